"""What waiting costs the API server: the writes of the operator's passes while 1,000 groups wait.

One namespace, one ClusterQueue of 4 GPUs held by one admitted group, and `--groups` one-pod groups of one
GPU each that wait for quota (not "never": the queue could hold each once the first leaves). The operator runs
against the in-memory API of the unit tests (tests/support/fake_api.py), so what is counted is the requests
draq sends, by resource, in the pass that sees the groups first, then in `--passes` passes with nothing new,
then in the pass after their LocalQueue is deleted (a new reason for the groups it considers).

    PYTHONPATH=. .venv/bin/python bench/bench_wait_writes.py [--groups 1000] [--passes 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter

from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi, parse_path
from tests.unit.cycle.cycle_builders import NS
from tests.unit.operator.operator_world import cluster, settle, started, submit


def by_resource(api: FakeApi, since: int) -> Counter[str]:
    counted: Counter[str] = Counter()
    for write in api.writes[since:]:
        target = parse_path(write.path)
        counted[f"{write.method} {target.plural}{'/' + target.subresource if target.subresource else ''}"] += 1
    return counted


def line(title: str, counted: Counter[str], seconds: float) -> str:
    parts = ", ".join(f"{what} {n}" for what, n in sorted(counted.items())) or "none"
    return f"{title}: {sum(counted.values())} writes ({parts}) in {seconds * 1000:.0f} ms"


async def run(groups: int, passes: int) -> None:
    api = cluster(nodes=groups // 4 + 2, gpus=4)
    submit(api, "first", 1, 4)
    operator = await started(api, FakeClock())
    await settle(operator)
    for i in range(groups):
        submit(api, f"w{i:04d}", 1, 1)
    since, began = len(api.writes), time.perf_counter()
    await settle(operator)
    print(line(f"first pass with {groups} waiting groups", by_resource(api, since), time.perf_counter() - began))
    for n in range(passes):
        since, began = len(api.writes), time.perf_counter()
        await settle(operator)
        print(line(f"pass {n + 2}, nothing new", by_resource(api, since), time.perf_counter() - began))
    await api.delete(f"/apis/draq.io/v1alpha1/namespaces/{NS}/localqueues/lq")
    since, began = len(api.writes), time.perf_counter()
    await settle(operator)
    print(line("pass after the LocalQueue is deleted", by_resource(api, since), time.perf_counter() - began))
    await operator.cache.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--groups", type=int, default=1000, help="waiting groups (default %(default)s)")
    parser.add_argument("--passes", type=int, default=3, help="passes with nothing new (default %(default)s)")
    args = parser.parse_args()
    asyncio.run(run(args.groups, args.passes))


if __name__ == "__main__":
    main()
