"""What 6,000 abandoned groups cost another tenant: one operator pass, flooded vs idle.

A namespace with 4 nodes of 4 GPUs and ClusterQueue `main`; the flood is `--groups` one-pod groups of 16 GPUs
each in LocalQueue `team/lq` (they never fit a node), already evaluated and told why they wait. The tenant is a
one-pod, one-GPU group in LocalQueue `team/tenant` of its own ClusterQueue. Timed, on an idle cluster (no
flood) and on the flooded one: a pass with nothing changed, and the pass that admits one new tenant group
(reading, deciding, the writes to the in-memory API of the unit tests, and the metrics). The operator runs on
an injected clock that moves only between passes, so the metrics' time budget never skips a computation: every
pass here pays for the figures and the gap report, the worst case of a real operator.

    PYTHONPATH=. .venv/bin/python bench/bench_flooded_pass.py [--groups 6000] [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from admission.operator import Operator
from tests.support import builders as b
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, gpu_template, member
from tests.unit.operator.operator_world import cluster, started, submit

TENANT_QUEUE = "tenant"


def tenant_cluster() -> FakeApi:
    """4 nodes of 4 GPUs, ClusterQueue `main` (the flood's) and `tenant` with its own LocalQueue."""
    api = cluster(nodes=4, gpus=100000)
    api.add(b.cluster_queue(TENANT_QUEUE, b.quota("gpus", 16)), b.local_queue(TENANT_QUEUE, TENANT_QUEUE, NS))
    return api


def add_tenant(api: FakeApi, name: str) -> None:
    api.add(gpu_template(f"{name}-gpus", 1), member(f"{name}-0", name, queue=TENANT_QUEUE, template=f"{name}-gpus"))


async def timed_pass(operator: Operator, clock: FakeClock) -> float:
    """One pass after the watches delivered what came before, and the heap kept after it as the loop keeps it
    (`operator.heap`); the pass's seconds."""
    await asyncio.sleep(0.02)
    started_at = time.perf_counter()
    await operator.reconcile()
    seconds = time.perf_counter() - started_at
    operator.heap.after_pass()
    clock.advance(1)
    return seconds


async def measure(groups: int, runs: int) -> dict[str, list[float]]:
    api = tenant_cluster()
    for i in range(groups):
        submit(api, f"f{i}", 1, 16)
    clock = FakeClock()
    operator = await started(api, clock)
    for _ in range(3):  # the flood is evaluated, told why it waits, and parked
        await timed_pass(operator, clock)
    quiet: list[float] = []
    admitting: list[float] = []
    for run in range(runs):
        quiet.append(await timed_pass(operator, clock))
        add_tenant(api, f"tenant-{run}")
        admitting.append(await timed_pass(operator, clock))
        record = api.get_object("PodGroup", NS, f"tenant-{run}")
        assert record is not None and record["status"]["phase"] == "Admitted", "the tenant group was not admitted"
    await operator.cache.stop()
    return {"nothing changed": quiet, "one tenant group admitted": admitting}


def describe(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"median {statistics.median(ms):7.1f} ms  (range {ms[0]:.1f}-{ms[-1]:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=6000, help="abandoned groups in the flood")
    parser.add_argument("--runs", type=int, default=7, help="tenant groups admitted, one pass each")
    args = parser.parse_args()
    idle = asyncio.run(measure(0, args.runs))
    flooded = asyncio.run(measure(args.groups, args.runs))
    print(f"pass of the operator, idle cluster vs {args.groups} abandoned groups")
    for what in idle:
        print(f"  {what:27s} idle    {describe(idle[what])}")
        print(f"  {what:27s} flooded {describe(flooded[what])}")
        ratio = statistics.median(flooded[what]) / statistics.median(idle[what])
        print(f"  {what:27s} flooded / idle: {ratio:.2f}x")



if __name__ == "__main__":
    main()
