"""Bad input at full size (issue 26) on the real control plane: a pod-creation flood into one namespace, then a
node flapping Ready/NotReady with parked groups. draq runs as in `draq demo` (operator and webhooks in one
process, its own ServiceAccount, default debounce); `e2e/test_storm.py` checks the same at small size.

1. Flood: another process creates one-pod groups (each a 16-GPU claim, never admissible) into one namespace
   at --rate per second for --seconds over --connections keep-alive connections, into a LocalQueue capped at
   --cap pending groups, while one tenant's gang runs and, a third of the way in, another tenant's gang
   arrives. Printed: the rate reached (the API server calls both webhooks for each pod, on the same 2 cores),
   pods created and refused at the cap, other failures, the create requests' latency, draq's webhook reviews
   over 5 s (the API server's timeout), draq's RSS (median, peak), its cycles during the flood (count, mean,
   slowest bucket), how long after the flood every group let in had its PodGroup, the newcomer's time to
   bound, and whether the running gang kept its pods and nodes.
2. Storm: --parked groups that never fit wait, spread over LocalQueues of 8 (a LocalQueue evaluates 8 groups
   that do not fit per cycle); one node flips Ready/NotReady every second for --storm seconds, first with its
   condition alone (the kit runs no node-lifecycle controller), then with the not-ready taint added and
   removed too, as that controller would. Printed per phase: cycles, their mean and slowest bucket, groups
   evaluated / parked / woken (`draq_cycle_groups_total`), woken per parked group and per cycle, draq's CPU.

    PYTHONPATH=. .venv/bin/python bench/bench_storm.py [--rate 1000] [--seconds 60] [--storm 60]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench_bound_latency import tear_down
from kubernetes import client

from admission.cli.demo import start_draq
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.storm import (
    DraqFigures,
    Figures,
    Flapper,
    RssSampler,
    claim_template,
    create_gang,
    flood_counts,
    local_queues,
    park,
    phases,
    placed,
    pod_count,
    pod_groups,
    queue_objects,
    start_flood,
)

PER_QUEUE = 8


def wait(what: str, probe: Any, timeout: float, interval: float = 0.5) -> float:
    """Seconds until `probe()` is truthy; raises naming `what` after `timeout`."""
    start = time.monotonic()
    while not probe():
        if time.monotonic() - start > timeout:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - start


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def metrics_port(pid: int) -> int:
    argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    return int(argv[argv.index("--metrics-port") + 1])


def setup(plane: ControlPlane, sim: NodeSimulator, args: argparse.Namespace, unique: str) -> None:
    plane.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in [
        *queue_objects(unique), *local_queues(unique, args.cap, -(-args.parked // PER_QUEUE))]))
    custom = client.CustomObjectsApi(plane.client())
    for role, name, gpus in (("run", "four", 4), ("new", "two", 2), ("flood", "junk", 16), ("park", "junk", 16)):
        plane.wait_for_service_account(f"{role}-{unique}")
        custom.create_namespaced_custom_object("resource.k8s.io", "v1", f"{role}-{unique}", "resourceclaimtemplates",
                                               claim_template(f"{role}-{unique}", name, gpus))


def flood_phase(plane: ControlPlane, figures: DraqFigures, args: argparse.Namespace, unique: str) -> None:
    api = plane.client()
    run_ns, new_ns, flood_ns = f"run-{unique}", f"new-{unique}", f"flood-{unique}"
    running = create_gang(api, run_ns, "running", "four", 2)
    wait("the running gang", lambda: placed(api, run_ns, running) and phases(api, run_ns) == {"running": "Running"},
         120)
    before_pods = placed(api, run_ns, running)
    before, cpu = figures.read(), figures.cpu_seconds()
    print(f"flood: target {args.rate}/s for {args.seconds:.0f} s over {args.connections} connections into "
          f"{flood_ns}/lq (cap {args.cap}); {load()}", flush=True)
    with RssSampler(figures) as rss:
        flood = start_flood(plane.kubeconfig, flood_ns, args.rate, args.seconds, args.connections)
        time.sleep(args.seconds / 3)
        arrived = time.monotonic()
        newcomer = create_gang(api, new_ns, "newcomer", "two", 2, own_claims=True)
        try:
            newcomer_seconds = wait("the newcomer", lambda: placed(api, new_ns, newcomer), args.timeout)
        finally:
            counts = flood_counts(flood, args.seconds + args.timeout)
        ended = time.monotonic()
        caught_up = wait("a PodGroup for every group let in",
                         lambda: len(pod_groups(api, flood_ns)) >= counts["created"], args.timeout)
        flood_load = load()
    spent = figures.read().since(before)
    stored = pod_count(api, flood_ns)
    untouched = placed(api, run_ns, running) == before_pods and phases(api, run_ns) == {"running": "Running"}
    print(f"flood: reached {counts['rate']}/s ({counts['attempted']} requests in {counts['seconds']} s): "
          f"{counts['created']} created ({stored} pods in the namespace), {counts['refused_at_cap']} refused at the "
          f"cap, other {counts['other']}; "
          f"create latency median {counts['latency_median']} s, p99 {counts['latency_p99']} s, "
          f"max {counts['latency_max']} s", flush=True)
    print(f"flood: webhook reviews {spent['reviews']:.0f}, over 5 s: {spent['slow_reviews']:.0f}; draq RSS median "
          f"{rss.median:.0f} MiB, peak {figures.status_mib('VmHWM'):.0f} MiB; CPU "
          f"{(figures.cpu_seconds() - cpu) / (time.monotonic() - arrived + args.seconds / 3):.2f} cores", flush=True)
    print(f"flood: cycles {spent['cycles']:.0f}, mean {spent['mean_cycle']:.2f} s, slowest <= "
          f"{spent['slowest_cycle_bucket']} s; every group let in had its PodGroup {caught_up:.1f} s after the "
          f"flood ({ended - arrived:.0f} s after the newcomer arrived)", flush=True)
    print(f"flood: the newcomer's gang bound {newcomer_seconds:.1f} s after it arrived; the running gang "
          f"{'kept its pods, nodes and phase' if untouched else 'WAS DISTURBED'}; {flood_load}", flush=True)
    print(f"flood: a refusal reads: {counts['sample_refusal']}", flush=True)


def storm_phase(plane: ControlPlane, figures: DraqFigures, args: argparse.Namespace, unique: str,
                flappy: str) -> None:
    api = plane.client()
    queues = -(-args.parked // PER_QUEUE)
    park(api, f"park-{unique}", queues, PER_QUEUE)
    wait("the groups to be parked", lambda: figures.read().parked_now >= queues * PER_QUEUE, args.timeout)
    time.sleep(5)  # the last claims are created and seen
    quiet = measure(figures, args.storm / 2)
    print(f"storm: {quiet[0].parked_now:.0f} groups parked; nothing changing for {args.storm / 2:.0f} s: "
          f"{describe(*quiet)}; {load()}", flush=True)
    for label, tainted in (("Ready condition alone", False), ("condition and not-ready taint", True)):
        flapper = Flapper(client.CoreV1Api(api), flappy, tainted=tainted).start()
        measured = measure(figures, args.storm if tainted else args.storm / 2, flapper)
        print(f"storm ({label}): {flapper.flips} flips in {args.storm if tainted else args.storm / 2:.0f} s: "
              f"{describe(*measured)}; {load()}", flush=True)


def measure(figures: DraqFigures, seconds: float, flapper: Flapper | None = None) -> tuple[Figures, Figures, float,
                                                                                            float]:
    before, cpu, start = figures.read(), figures.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    if flapper is not None:
        flapper.stop()
        time.sleep(1)
    elapsed = time.monotonic() - start
    return before, figures.read(), (figures.cpu_seconds() - cpu) / elapsed, elapsed


def describe(before: Figures, after: Figures, cores: float, elapsed: float) -> str:
    spent = after.since(before)
    parked = max(before.parked_now, 1.0)
    cycles = max(spent["cycles"], 1.0)
    return (f"{spent['cycles']:.0f} cycles, mean {spent['mean_cycle'] * 1000:.0f} ms, slowest <= "
            f"{spent['slowest_cycle_bucket']} s; groups evaluated {spent['evaluated']:.0f}, given their parked Wait "
            f"{spent['parked']:.0f}, woken {spent['woken']:.0f} ({spent['woken'] / parked:.1f} per parked group, "
            f"{spent['woken'] / cycles / parked:.2f} per parked group and cycle); draq CPU {cores:.2f} cores")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--rate", type=float, default=1000, help="target pod creations per second")
    parser.add_argument("--seconds", type=float, default=60, help="how long the flood lasts")
    parser.add_argument("--connections", type=int, default=128, help="the flood's concurrent requests")
    parser.add_argument("--cap", type=int, default=1000, help="the flood's LocalQueue's maxPendingGroups")
    parser.add_argument("--parked", type=int, default=200, help="parked groups during the storm")
    parser.add_argument("--storm", type=float, default=60, help="seconds of flapping (with the taint)")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--keep", action="store_true", help="keep the control plane's directory (logs)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="draq-bench-storm-"))
    plane = ControlPlane(work)
    sim: NodeSimulator | None = None
    draq = None
    try:
        plane.start()
        sim = NodeSimulator(plane.client())
        sim.apply_device_classes()
        unique = uuid.uuid4().hex[:6]
        flappy = f"flap-{unique}"
        for node in (f"st-a-{unique}", f"st-b-{unique}", flappy):
            sim.add_node(node, "h100")
        sim.start()
        draq = start_draq(plane, None)
        figures = DraqFigures(draq.pid, metrics_port(draq.pid))
        setup(plane, sim, args, unique)
        print(f"{os.cpu_count()} cores; 3 nodes x 8 GPUs; {load()}", flush=True)
        flood_phase(plane, figures, args, unique)
        storm_phase(plane, figures, args, unique, flappy)
    finally:
        tear_down(plane, work, args.keep, (draq, sim))


if __name__ == "__main__":
    main()
