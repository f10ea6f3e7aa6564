"""Bad input for the whole system (issue 26), on the real control plane with `draq run` as a process (operator
and webhooks, as its own ServiceAccount). Small sizes, so that the module runs in about two minutes;
`bench/bench_storm.py` runs the full-size flood (1,000 pods/s for 60 s) and storm (60 s) and prints figures.

- A pod-creation flood into one namespace (another process, one-pod groups that never fit, at FLOOD_RATE for
  FLOOD_SECONDS) while one tenant's gang runs and another tenant's new gang arrives: the API server's calls
  to the webhooks never fail or time out, exactly the LocalQueue's cap of groups gets in and every other pod
  is refused with the cap's message, draq's memory stays bounded, the running gang is untouched (same pods,
  same nodes, still running), the newcomer is admitted and bound during the flood, and the cycles catch up
  (every group let in has its PodGroup) soon after.
- An event storm: a node flapping Ready/NotReady every second (with the not-ready taint, as the
  node-lifecycle controller would add) while groups are parked: each parked group is evaluated again at
  most once per cycle (`draq_cycle_groups_total{outcome="woken"}`), in fact at most once per return of the
  node to Ready, and the cycles stay short.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from admission.core.labels import MANAGED_LABEL
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.draq_process import DraqProcess
from e2e.storm import DraqFigures, Flapper, RssSampler, claim_template, pod
from e2e.test_metrics import service_account_kubeconfig, start_draq
from e2e.test_operator import apply
from e2e.waiting import until

REPO = Path(__file__).resolve().parents[1]
FLOOD_RATE, FLOOD_SECONDS, CONNECTIONS = 200, 15, 32
CAP = 120  # the flood's LocalQueue's spec.maxPendingGroups
PARKED_QUEUES, PER_QUEUE = 4, 8  # a LocalQueue evaluates 8 groups that do not fit per cycle (queue_misses)
STORM_SECONDS = 15
RSS_BOUND_MIB = 600
CATCH_UP_SECONDS = 60


@dataclass
class Stack:
    api: Any
    draq: DraqProcess
    figures: DraqFigures
    unique: str
    flappy: str

    def ns(self, role: str) -> str:
        return f"{role}-{self.unique}"


def _queues(unique: str) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": f"gpus-{unique}"},
         "spec": {"devices": {"deviceClassNames": ["gpu.nvidia.com"]}}}]
    for role in ("run", "new", "flood", "park"):
        namespace = f"{role}-{unique}"
        objects += [
            {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": namespace, "labels": {MANAGED_LABEL: "true"}}},
            {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": namespace},
             "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                      "quotas": [{"unit": f"gpus-{unique}", "nominal": 100000}]}}]
    return objects


def _local_queues(unique: str) -> list[dict[str, Any]]:
    def local(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": namespace, **spec}}
    return [local(f"run-{unique}", "lq"), local(f"new-{unique}", "lq"),
            local(f"flood-{unique}", "lq", maxPendingGroups=CAP),
            *(local(f"park-{unique}", f"lq-{i}") for i in range(PARKED_QUEUES))]


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane, api: Any, nodesim: NodeSimulator,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    control_plane.kubectl("apply", "-f", str(REPO / "crds"))
    control_plane.kubectl("wait", "--for=condition=Established", "crd/clusterqueues.draq.io",
                          "crd/localqueues.draq.io", "crd/podgroups.draq.io", "crd/quotaunits.draq.io",
                          "--timeout=60s")
    unique = uuid.uuid4().hex[:6]
    flappy = f"flap-{unique}"
    for node in (f"st-a-{unique}", f"st-b-{unique}", flappy):
        nodesim.add_node(node, "h100")
    work = tmp_path_factory.mktemp("storm")
    draq = start_draq(service_account_kubeconfig(control_plane, work), work / "draq.log")
    try:
        apply(control_plane, *_queues(unique))
        apply(control_plane, *_local_queues(unique))
        custom = client.CustomObjectsApi(api)
        for role, name, gpus in (("run", "four", 4), ("new", "two", 2), ("flood", "junk", 16), ("park", "junk", 16)):
            control_plane.wait_for_service_account(f"{role}-{unique}")
            custom.create_namespaced_custom_object("resource.k8s.io", "v1", f"{role}-{unique}",
                                                   "resourceclaimtemplates",
                                                   claim_template(f"{role}-{unique}", name, gpus))
        yield Stack(api, draq, DraqFigures(draq.process.pid, draq.metrics_port), unique, flappy)
    finally:
        draq.stop()
        print("\n" + draq.log_tail(15))


def _gang(api: Any, namespace: str, group: str, template: str, size: int) -> list[str]:
    core = client.CoreV1Api(api)
    names = [f"{group}-{i}" for i in range(size)]
    for name in names:
        core.create_namespaced_pod(namespace, pod(namespace, name, "lq", template, group, size))
    return names


def _placed(api: Any, namespace: str, names: list[str]) -> dict[str, tuple[str, str, str]] | None:
    """name -> (uid, node, phase) once every pod is bound and running; None before."""
    core = client.CoreV1Api(api)
    found = {}
    for name in names:
        p = core.read_namespaced_pod(name, namespace)
        if not p.spec.node_name or p.status.phase != "Running" or p.metadata.deletion_timestamp:
            return None
        found[name] = (p.metadata.uid, p.spec.node_name, p.status.phase)
    return found


def _pod_groups(api: Any, namespace: str) -> list[dict[str, Any]]:
    listing = client.CustomObjectsApi(api).list_namespaced_custom_object("draq.io", "v1alpha1", namespace, "podgroups")
    return list(listing["items"])


def _phases(api: Any, namespace: str) -> dict[str, str]:
    return {g["metadata"]["name"]: g.get("status", {}).get("phase") for g in _pod_groups(api, namespace)}


def _run_flood(control_plane: ControlPlane, namespace: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "e2e.storm", "flood", str(control_plane.kubeconfig), namespace,
                             "lq", "junk", str(FLOOD_RATE), str(FLOOD_SECONDS), str(CONNECTIONS)],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)


def test_a_pod_flood_stops_at_the_cap_and_disturbs_no_admitted_gang(control_plane: ControlPlane,
                                                                      stack: Stack) -> None:
    api = stack.api
    running = _gang(api, stack.ns("run"), "running", "four", 2)
    before = until("the running gang to be bound and running", lambda: _placed(api, stack.ns("run"), running),
                   timeout=60)
    until("the running gang's PodGroup to say Running", lambda: _phases(api, stack.ns("run")),
          accept=lambda phases: phases == {"running": "Running"}, timeout=30)
    figures_before = stack.figures.read()
    with RssSampler(stack.figures) as rss:
        flood = _run_flood(control_plane, stack.ns("flood"))
        try:
            time.sleep(FLOOD_SECONDS / 3)
            arrived = time.monotonic()
            newcomer = _gang(api, stack.ns("new"), "newcomer", "two", 2)
            until("the newcomer to be bound during the flood", lambda: _placed(api, stack.ns("new"), newcomer),
                  timeout=60)
            newcomer_seconds = time.monotonic() - arrived
            output, _ = flood.communicate(timeout=FLOOD_SECONDS + 90)
        finally:
            if flood.poll() is None:
                flood.kill()
                flood.wait()
        counts = json.loads(output.strip().splitlines()[-1])
        ended = time.monotonic()
        written = until("a PodGroup for every group let in", lambda: len(_pod_groups(api, stack.ns("flood"))),
                        timeout=CATCH_UP_SECONDS, accept=lambda n: n >= counts["created"])
        caught_up = time.monotonic() - ended
    flooded = stack.figures.read().since(figures_before)
    peak = stack.figures.status_mib("VmHWM")
    print(f"\nflood {counts}\nnewcomer bound {newcomer_seconds:.1f} s after it arrived; PodGroups {written} "
          f"{caught_up:.1f} s after the flood; draq RSS median {rss.median:.0f} MiB, peak {peak:.0f} MiB; "
          f"draq {flooded}")
    assert counts["attempted"] > CAP * 2, counts  # the flood went well past the cap
    assert counts["created"] == CAP, counts  # not one group more than the cap, although PodGroups lag
    assert counts["created"] + counts["refused_at_cap"] == counts["attempted"], counts  # nothing else failed
    assert f"LocalQueue {stack.ns('flood')}/lq" in counts["sample_refusal"], counts
    assert f"cap of {CAP} (its spec.maxPendingGroups)" in counts["sample_refusal"], counts
    assert flooded["slow_reviews"] == 0, flooded
    assert peak < RSS_BOUND_MIB, peak
    assert _placed(api, stack.ns("run"), running) == before  # the same pods on the same nodes, still running
    assert _phases(api, stack.ns("run")) == {"running": "Running"}  # not evicted
    assert flooded["cycles"] > 0, flooded  # the catch-up above is what says the cycles keep up


def test_a_flapping_node_wakes_each_parked_group_at_most_once_per_cycle(stack: Stack) -> None:
    api = stack.api
    for queue in range(PARKED_QUEUES):
        for index in range(PER_QUEUE):
            name = f"parked-{queue}-{index}"
            client.CoreV1Api(api).create_namespaced_pod(stack.ns("park"), pod(stack.ns("park"), name,
                                                                              f"lq-{queue}", "junk", name))
    parked_groups = PARKED_QUEUES * PER_QUEUE
    until("the groups to be parked", lambda: stack.figures.read().parked_now, timeout=60,
          accept=lambda n: n >= parked_groups)
    time.sleep(2)  # the claims created meanwhile for the last pods are seen
    before = stack.figures.read()
    cpu = stack.figures.cpu_seconds()
    flapper = Flapper(client.CoreV1Api(api), stack.flappy).start()
    with RssSampler(stack.figures) as rss:
        time.sleep(STORM_SECONDS)
        flapper.stop()
    time.sleep(1)
    after = stack.figures.read()
    stormed = after.since(before)
    cores = (stack.figures.cpu_seconds() - cpu) / (STORM_SECONDS + 1)
    returns_to_ready = (flapper.flips + 1) // 2 + 1  # and the return at the stop
    print(f"\nstorm: {flapper.flips} flips ({flapper.errors} failed), {before.parked_now:.0f} groups parked before, "
          f"{after.parked_now:.0f} after; draq {stormed}; {cores:.2f} cores; RSS peak {rss.peak:.0f} MiB")
    parked = max(before.parked_now, after.parked_now)
    assert flapper.flips >= 4, flapper.flips  # a loaded API server takes longer than a second for some flips
    assert stormed["woken"] > 0, stormed  # a return to Ready removes a taint: room that could admit a group
    assert stormed["woken"] <= stormed["cycles"] * parked, stormed  # at most once per cycle each
    # Each return to Ready may give room (its taint goes): one wake each at most, plus one safety sweep.
    assert stormed["woken"] <= (returns_to_ready + 1) * parked, stormed
    assert stormed["parked"] > 0, stormed  # between returns the groups stay parked
    assert stormed["mean_cycle"] < 1.0 and stormed["slowest_cycle_bucket"] <= 2.5, stormed
