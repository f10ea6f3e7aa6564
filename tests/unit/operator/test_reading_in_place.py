"""Pods changed in place replace their models in a copy of the list; any other change makes the lists again.
Either way the reading's pods are those a new reader of the same cache finds, and its models in the same order."""

from __future__ import annotations

import random
from typing import Any

from admission.core.features import gates_for
from admission.operator.cache import OperatorCache
from admission.operator.reading import CacheReader

GATES = gates_for("1.35")


def pod(index: int, version: int, node: str, broken: bool = False) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": "not-a-quantity" if broken else str(1 + version % 3)}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{index}", "namespace": "ns", "uid": f"u{index}",
                         "resourceVersion": str(version)},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": requests}}]}}


def copied(cache: OperatorCache) -> OperatorCache:
    """Another cache holding the same pods in the same order, for a reader of its own."""
    copy = OperatorCache(None)  # type: ignore[arg-type]
    for obj in cache.reflectors["Pod"].store.values():
        copy.reflectors["Pod"].apply_event("ADDED", obj)
    return copy


def keys(reader: CacheReader) -> list[tuple[str, str, int]]:
    pods = reader.read().cycle.snapshot.pods
    return sorted((key, p.node_name, str(p.containers[0].requests)) for key, p in pods.items())


def test_in_place_changes_and_others_read_as_a_new_reader_does() -> None:
    rng = random.Random(26)
    cache = OperatorCache(None)  # type: ignore[arg-type]
    pods = cache.reflectors["Pod"]
    for index in range(40):
        pods.apply_event("ADDED", pod(index, 1, f"n{index % 4}"))
    reader = CacheReader(cache, GATES)
    version, in_place = 1, 0
    for _ in range(60):
        for _ in range(rng.randint(1, 3)):
            version += 1
            index, roll = rng.randrange(50), rng.random()
            if roll < 0.85:
                pods.apply_event("MODIFIED", pod(index, version, f"n{rng.randrange(4)}"))
            elif roll < 0.9:
                pods.apply_event("MODIFIED", pod(index, version, "n0", broken=True))
            else:
                pods.apply_event("DELETED", pod(index, version, "n0"))
        fresh = CacheReader(copied(cache), GATES)
        assert keys(reader) == keys(fresh)
        assert [m.key for m in reader._parsed["Pod"].models] == [m.key for m in fresh._parsed["Pod"].models]
        assert len(reader._parsed["Pod"].bad) == len(fresh._parsed["Pod"].bad)
        in_place += reader._parsed["Pod"].positions is not None
    assert in_place > 5  # the copy-and-replace path was taken, not only the remaking of the lists
