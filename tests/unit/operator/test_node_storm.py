"""A node flapping Ready/NotReady, through the reader: a flap of its Ready condition alone is not a change that
could give a parked group room, and a flap that also taints it (as the node-lifecycle controller does) moves
the capacity counter at most once per reading, however many events came in between."""

from __future__ import annotations

from typing import Any

from admission.operator.reading import CacheReader
from tests.support.builders import node
from tests.support.clock import FakeClock
from tests.unit.operator.test_incremental_reading import GATES
from tests.unit.operator.test_parking_reading import _cache

NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def flapped(ready: bool, tainted: bool) -> dict[str, Any]:
    manifest = node("n0", allocatable={"cpu": "16", "memory": "64Gi", "pods": "20"})
    manifest["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False",
                                         "reason": "KubeletReady" if ready else "KubeletNotReady"}]
    if tainted and not ready:
        manifest["spec"] = {"taints": [NOT_READY_TAINT]}
    return manifest


def test_ready_condition_flaps_alone_never_move_the_capacity_counter() -> None:
    clock = FakeClock()
    cache = _cache(clock)
    reader = CacheReader(cache, GATES, clock)  # type: ignore[arg-type]
    reader.read()
    start = reader.capacity_epoch
    for second in range(60):
        cache.put(flapped(ready=second % 2 == 1, tainted=False))
        reader.read()
    assert reader.capacity_epoch == start


def test_a_storm_of_taint_flaps_moves_the_capacity_counter_at_most_once_per_reading() -> None:
    clock = FakeClock()
    cache = _cache(clock)
    reader = CacheReader(cache, GATES, clock)  # type: ignore[arg-type]
    reader.read()
    for events in (1, 2, 7, 50):
        before = reader.capacity_epoch
        for flap in range(events):
            cache.put(flapped(ready=flap % 2 == 1, tainted=True))
        reader.read()
        # An odd count ends NotReady (tainted: room taken, none given); an even one ends Ready again.
        assert reader.capacity_epoch - before == (1 if events % 2 == 0 else 0), events
