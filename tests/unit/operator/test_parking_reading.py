"""The reader's capacity counter, which parked groups wait on (`core.cycle.parking`): it moves on every change
that could give a group room, not on a pending pod's own changes; and over random watch events, cycles fed
with it admit what cycles without parking admit."""

from __future__ import annotations

import os
import random
from dataclasses import replace

from admission.core.cycle import Changes, Parking, run_cycle
from admission.operator.reading import CacheReader
from tests.support.builders import (
    claim,
    cluster_queue,
    device_class,
    local_queue,
    node,
    pod,
    quota,
    quota_unit,
    result,
)
from tests.support.clock import FakeClock
from tests.unit.cycle.cycle_builders import NS, gang
from tests.unit.operator.test_incremental_reading import GATES, Cache, node_slice


def _cache(clock: FakeClock) -> Cache:
    cache = Cache(clock)
    cache.put(device_class())
    cache.put(quota_unit("gpus", {"devices": {"deviceClassNames": ["gpu"]}}))
    cache.put(cluster_queue("cq", quota("gpus", 12)))
    cache.put(local_queue("lq", "cq", NS))
    cache.put(node("n0", allocatable={"cpu": "16", "memory": "64Gi", "pods": "20"}))
    cache.put(node_slice("n0", 4))
    return cache


def test_the_capacity_counter_moves_on_room_changes_only() -> None:
    clock = FakeClock()
    cache = _cache(clock)
    reader = CacheReader(cache, GATES, clock)  # type: ignore[arg-type]
    reader.read()
    start = reader.capacity_epoch
    for manifest in gang("g", 2, 2):  # gated members and their template... a template is a claim source
        if manifest["kind"] == "Pod":
            cache.put(manifest)
    reader.read()
    assert reader.capacity_epoch == start  # pending pods change their group, not the cluster's room
    cache.put(pod("web", "apps", node="n0", requests={"cpu": "1"}, phase="Running"))
    reader.read()
    assert reader.capacity_epoch == start  # a pod bound now takes room and gives none
    cache.put(pod("web", "apps", node="n0", requests={"cpu": "1"}, phase="Succeeded"))
    reader.read()
    assert reader.capacity_epoch == start + 1  # it finished: its room is free
    cache.put(claim("held", namespace=NS, allocation=[result("gpu", "gpu-0", "n0")]))
    reader.read()
    assert reader.capacity_epoch == start + 1  # an allocated claim takes devices
    cache.delete("ResourceClaim", NS, "held")
    reader.read()
    assert reader.capacity_epoch == start + 2  # and gives them back when it goes
    cache.put(node("n1", allocatable={"cpu": "16", "memory": "64Gi", "pods": "20"}))
    reader.read()
    assert reader.capacity_epoch == start + 3
    cache.put(node("n1", allocatable={"cpu": "16", "memory": "64Gi", "pods": "20"}))  # a status heartbeat
    reader.read()
    assert reader.capacity_epoch == start + 3  # the node reads the same: no room given
    reader.read()
    assert reader.capacity_epoch == start + 3  # nothing changed


def test_cycles_fed_by_the_reader_admit_what_cycles_without_parking_admit() -> None:
    seed = 7 if os.environ.get("CI") == "true" else random.randrange(2**32)
    print(f"parking over watch events: seed {seed}")
    rng = random.Random(seed)
    clock = FakeClock()
    cache = _cache(clock)
    reader = CacheReader(cache, GATES, clock)  # type: ignore[arg-type]
    steps = [
        lambda: cache.put(node(f"n{rng.randrange(4)}", allocatable={"cpu": "16", "memory": "64Gi", "pods": "20"})),
        lambda: cache.delete("Node", "", f"n{rng.randrange(1, 4)}"),
        lambda: cache.put(node_slice(f"n{rng.randrange(4)}", rng.randrange(1, 9))),
        lambda: cache.put(pod(f"web-{rng.randrange(6)}", "apps", node=f"n{rng.randrange(4)}",
                              requests={"cpu": str(rng.randrange(1, 12))}, phase=rng.choice(("Running", "Succeeded")))),
        lambda: cache.delete("Pod", "apps", f"web-{rng.randrange(6)}"),
        lambda: cache.put(claim(f"held-{rng.randrange(3)}", namespace="apps",
                                allocation=[result("gpu", f"gpu-{rng.randrange(4)}", f"n{rng.randrange(4)}")])),
        lambda: cache.delete("ResourceClaim", "apps", f"held-{rng.randrange(3)}"),
        lambda: [cache.put(m) for m in gang(f"g{rng.randrange(8)}", rng.randrange(1, 3), rng.randrange(1, 6))],
        lambda: cache.delete("Pod", NS, f"g{rng.randrange(8)}-0"),
        lambda: cache.put(cluster_queue("cq", quota("gpus", rng.randrange(2, 16)))),
        lambda: clock.advance(rng.choice((1.0, 70.0))),
        lambda: None,
    ]
    parking = Parking(safety_seconds=60.0)
    reused = 0
    for index in range(60):
        for _ in range(rng.randrange(1, 3)):
            steps[rng.randrange(len(steps))]()
        cycle = reader.read().cycle
        plain = run_cycle(cycle)
        parked = run_cycle(replace(cycle, parking=parking.fed(Changes(reader.capacity_epoch, clock.monotonic()))))
        assert parked.admitted == plain.admitted, f"seed {seed}: admissions differ at cycle {index}"
        assert parked.parking is not None
        reused += sum(1 for p in parking.parked.values() if p in parked.parking.parked.values())
        parking = parked.parking
    print(f"parked waits given out again: {reused}")
