"""The reader keeps parsed objects, the snapshot and what is derived from it between readings: after any
sequence of watch events (and writes of the operator's assumed before the watch delivers them), a
reading equals one made from scratch of the same cache."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from admission.core.allocator import Allocator
from admission.core.cycle import charging_inventory, run_cycle
from admission.core.features import gates_for
from admission.core.quota import seal_record
from admission.operator import reading
from admission.operator.cache import OperatorCache
from admission.operator.reading import CacheReader, Reading
from tests.support.builders import (
    claim,
    cluster_queue,
    device_class,
    exactly,
    gpu,
    local_queue,
    node,
    pod,
    pod_group,
    quota,
    quota_unit,
    resource_slice,
    result,
    taint,
)
from tests.support.clock import FakeClock
from tests.unit.cycle.cycle_builders import NS, gang

GATES = gates_for("1.35")


class Cache(OperatorCache):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__(None, clock)  # type: ignore[arg-type]
        self.version = 0

    def put(self, obj: dict[str, Any], event: str = "MODIFIED") -> None:
        self.version += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.version)
        obj["metadata"].setdefault("uid", f"uid-{obj['kind']}-{obj['metadata'].get('namespace')}-"
                                          f"{obj['metadata']['name']}")
        self.reflectors[obj["kind"]].apply_event(event, obj)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        found = self.reflectors[kind].store.get((namespace, name))
        if found is not None:
            self.reflectors[kind].apply_event("DELETED", found)


def fresh(cache: Cache) -> Reading:
    """A reading by a new reader, leaving the incremental reader's change tracking as it was."""
    saved = {kind: (r.relisted, dict(r.dirty)) for kind, r in cache.reflectors.items()}
    reading = CacheReader(cache, GATES, cache._clock).read()  # type: ignore[arg-type]
    for kind, (relisted, dirty) in saved.items():
        cache.reflectors[kind].relisted, cache.reflectors[kind].dirty = relisted, dirty
    return reading


def summary(reading: Reading) -> dict[str, Any]:
    cycle, snapshot = reading.cycle, reading.cycle.snapshot
    allocator = Allocator(snapshot, GATES)
    inventory = charging_inventory(snapshot, GATES)
    fit = snapshot.node_fit
    return {
        "nodes": list(snapshot.nodes.items()),
        "classes": list(snapshot.inventory.classes.items()),
        "slices": list(snapshot.inventory.slices),
        "slice_of": sorted(snapshot.inventory.slice_of.items()),
        "claims": list(snapshot.claims.items()),
        "templates": list(snapshot.templates.items()),
        "pods": list(snapshot.pods.items()),
        "views": {name: (v.pools, v.devices) for name in snapshot.nodes
                  for v in [allocator.view(name)]},
        "in use": (sorted(allocator.usage.exclusive), dict(allocator.usage.shared)),
        "fit nodes": list(fit.nodes.items()),
        "fit usage": {name: dict(fit.usage.on(name)) for name in snapshot.nodes},
        "charging": (list(inventory.devices_by_node.items()), list(inventory.devices_by_id.items()),
                     dict(inventory.extended_by_node), dict(inventory.device_classes)),
        "groups": cycle.groups, "local queues": dict(cycle.local_queues), "units": [u.name for u in cycle.units],
        "state": cycle.state, "promised": cycle.promised, "invalid": dict(cycle.invalid),
        "queues": reading.cluster_queues, "manifests": dict(reading.manifests),
        "decisions": run_cycle(cycle).decisions,
    }


def node_slice(name: str, gpus: int, generation: int = 1, tainted: bool = False) -> dict[str, Any]:
    devices = [gpu(f"gpu-{i}", **({"taints": [taint("broken")]} if tainted and i == 0 else {})) for i in range(gpus)]
    manifest = resource_slice(name, *devices, name=f"{name}-gpus")
    manifest["spec"]["pool"]["generation"] = generation
    return manifest


@pytest.mark.parametrize("seed", range(6))
def test_a_kept_reading_equals_a_fresh_one(seed: int) -> None:
    rng = random.Random(seed)
    clock = FakeClock()
    cache = Cache(clock)
    cache.put(device_class())
    cache.put(quota_unit("gpus", {"devices": {"deviceClassNames": ["gpu"]}}))
    cache.put(cluster_queue("cq", quota("gpus", 12)))
    cache.put(local_queue("lq", "cq"))
    for index in range(6):
        cache.put(node(f"n{index}", allocatable={"cpu": "16", "memory": "64Gi", "pods": "20"}))
        cache.put(node_slice(f"n{index}", 4))
    reader = CacheReader(cache, GATES, clock)  # type: ignore[arg-type]
    steps = [
        lambda: cache.put(node(f"n{rng.randrange(8)}", {"zone": str(rng.randrange(3))},
                               allocatable={"cpu": str(rng.choice((8, 16))), "pods": "20"})),
        lambda: cache.delete("Node", "", f"n{rng.randrange(8)}"),
        lambda: cache.put(node_slice(f"n{rng.randrange(8)}", rng.randrange(1, 5), rng.randrange(1, 3),
                                     rng.random() < 0.3)),
        lambda: cache.delete("ResourceSlice", "", f"n{rng.randrange(8)}-gpus"),
        lambda: cache.put(pod(f"web-{rng.randrange(10)}", "apps", node=f"n{rng.randrange(8)}",
                              requests={"cpu": str(rng.randrange(1, 6))}, phase=rng.choice(("Running", "Succeeded")))),
        lambda: cache.delete("Pod", "apps", f"web-{rng.randrange(10)}"),
        lambda: cache.put(claim(f"held-{rng.randrange(4)}", exactly(count=1),
                                allocation=[result("gpu", f"gpu-{rng.randrange(4)}", f"n{rng.randrange(8)}")])),
        lambda: cache.delete("ResourceClaim", "default", f"held-{rng.randrange(4)}"),
        lambda: [cache.put(m) for m in gang(f"g{rng.randrange(4)}", rng.randrange(1, 3), rng.randrange(1, 4))],
        lambda: cache.delete("Pod", NS, f"g{rng.randrange(4)}-0"),
        lambda: cache.put(device_class(expression=rng.choice(('device.attributes["gpu.example.com"].model == "H100"',
                                                             "true")))),
        lambda: cache.put(cluster_queue("cq", quota("gpus", rng.randrange(4, 20)))),
        lambda: cache.assume("Pod", _assumed(cache, rng)),
        lambda: clock.advance(rng.choice((1.0, 40.0))),
        lambda: cache.put(_record(rng)),
        lambda: cache.delete("PodGroup", NS, f"g{rng.randrange(4)}"),
        lambda: cache.assume("PodGroup", _assumed_record(cache, rng)),
    ]
    for _ in range(40):
        for _ in range(rng.randrange(1, 4)):
            steps[rng.randrange(len(steps))]()
        kept = reader.read()
        assert summary(kept) == summary(fresh(cache))


@pytest.mark.parametrize("seed", range(6))
def test_the_records_traced_to_draq_are_remembered_as_a_reading_of_every_podgroup_would(seed: int) -> None:
    """With a seal key, kept readings (only the PodGroups that changed looked at) name the same untraceable
    records, each with the same last sealed record, and the same groups, as a reader that looks at every
    PodGroup each time, after random records sealed, forged, deleted and recreated."""
    rng = random.Random(seed)
    clock = FakeClock()
    cache = Cache(clock)
    cache.put(cluster_queue("cq", quota("gpus", 12)))
    cache.put(local_queue("lq", "cq"))
    readers = [CacheReader(cache, GATES, clock) for _ in range(2)]  # type: ignore[arg-type]
    every = readers[1]
    every._remember_sealed = every._remember_all  # type: ignore[method-assign]
    for reader in readers:
        reader.seal_key = KEY
    recreated = [0]

    def recreate() -> None:
        recreated[0] += 1
        cache.delete("PodGroup", NS, "g0")
        cache.put(_record(rng, "g0", uid=f"again-{recreated[0]}"), "ADDED")

    steps = [
        lambda: cache.put(_record(rng, sealed=True)),
        lambda: cache.put(_record(rng, sealed=False)),
        lambda: cache.delete("PodGroup", NS, f"g{rng.randrange(4)}"),
        recreate,
        lambda: [cache.put(m) for m in gang(f"g{rng.randrange(4)}", 1, 1)],
        lambda: cache.assume("PodGroup", _assumed_record(cache, rng)),
    ]
    for _ in range(40):
        for _ in range(rng.randrange(1, 4)):
            steps[rng.randrange(len(steps))]()
        saved = {kind: (r.relisted, dict(r.dirty)) for kind, r in cache.reflectors.items()}
        kept = readers[0].read()
        for kind, (relisted, dirty) in saved.items():  # the second reader sees the same changes
            cache.reflectors[kind].relisted, cache.reflectors[kind].dirty = relisted, dirty
        full = every.read()
        assert readers[0].untraceable == every.untraceable
        assert readers[0]._last_sealed == every._last_sealed
        assert kept.cycle.groups == full.cycle.groups and kept.cycle.invalid == full.cycle.invalid


KEY = b"k" * 32


def _record(rng: random.Random, name: str | None = None, sealed: bool | None = None,
            uid: str | None = None) -> dict[str, Any]:
    """A PodGroup of a gang of `_steps`, with an Admitted record, sealed (by draq) or not (forged), or Pending."""
    name = name or f"g{rng.randrange(4)}"
    manifest = pod_group(name, 1, "lq", namespace=NS)
    manifest["metadata"]["uid"] = uid or f"uid-PodGroup-{NS}-{name}"
    if rng.random() < 0.3:
        manifest["status"] = {"phase": "Pending", "message": "waits"}
        return manifest
    status: dict[str, Any] = {"phase": "Admitted", "clusterQueue": "cq", "charge": [{"unit": "gpus", "amount": "1"}]}
    if sealed if sealed is not None else rng.random() < 0.6:
        status["seal"] = seal_record(KEY, manifest["metadata"]["uid"], status)
    manifest["status"] = status
    return manifest


def _assumed_record(cache: Cache, rng: random.Random) -> dict[str, Any]:
    """A write of the operator's to a PodGroup (a newer version than the watch has)."""
    records = list(cache.reflectors["PodGroup"].store.values())
    if not records:
        return _record(rng)
    chosen = copy.deepcopy(rng.choice(records))
    cache.version += 1
    chosen["metadata"]["resourceVersion"] = str(cache.version)
    chosen["status"] = {"phase": "Pending", "message": "written"}
    return chosen


def _assumed(cache: Cache, rng: random.Random) -> dict[str, Any]:
    """A write of the operator's to a group member (a newer version than the watch has)."""
    members = [m for (ns, _), m in cache.reflectors["Pod"].store.items() if ns == NS]
    if not members:
        return pod("web-0", "apps", node="n0", phase="Running")
    chosen = copy.deepcopy(rng.choice(members))
    cache.version += 1
    chosen["metadata"]["resourceVersion"] = str(cache.version)
    chosen["spec"]["schedulingGates"] = []
    return chosen


@pytest.mark.parametrize("seed", range(4))
def test_models_kept_through_adds_and_deletes_are_the_models_listed_afresh(seed: int,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Adds, deletes and changes in place, a few at a time: each kind's models, made by changing a copy of the
    last list, are in the order a fresh reading lists them (also once the positions were numbered afresh)."""
    monkeypatch.setattr(reading, "WORN_AFTER", 5)
    rng = random.Random(seed)
    clock = FakeClock()
    cache = Cache(clock)
    reader = CacheReader(cache, GATES, clock)  # type: ignore[arg-type]
    steps = [
        lambda: cache.put(pod(f"web-{rng.randrange(30)}", "apps", node=f"n{rng.randrange(4)}",
                              requests={"cpu": str(rng.randrange(1, 6))})),
        lambda: cache.delete("Pod", "apps", f"web-{rng.randrange(30)}"),
        lambda: cache.put(node(f"n{rng.randrange(12)}", {"zone": str(rng.randrange(3))})),
        lambda: cache.delete("Node", "", f"n{rng.randrange(12)}"),
    ]
    for _ in range(150):
        for _ in range(rng.randrange(1, 4)):
            steps[rng.randrange(len(steps))]()
        reader.read()
        listed = CacheReader(cache, GATES, clock)  # type: ignore[arg-type]
        saved = {kind: (r.relisted, dict(r.dirty)) for kind, r in cache.reflectors.items()}
        listed.read()
        for kind, (relisted, dirty) in saved.items():
            cache.reflectors[kind].relisted, cache.reflectors[kind].dirty = relisted, dirty
        for kind in ("Pod", "Node"):
            assert reader._parsed[kind].models == listed._parsed[kind].models
