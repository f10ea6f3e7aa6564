"""A reading that parses a large kind afresh moves its models out of the cycle collector's view."""

from __future__ import annotations

import gc
from typing import Any

from admission.core.features import gates_for
from admission.operator.cache import OperatorCache
from admission.operator.reading import FREEZE_AFTER, CacheReader


def pod(index: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{index}", "namespace": "ns", "uid": f"u{index}", "resourceVersion": "1"},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


def frozen_after_reading(pods: int) -> int:
    cache = OperatorCache(None)  # type: ignore[arg-type]
    for index in range(pods):
        cache.reflectors["Pod"].apply_event("ADDED", pod(index))
    gc.unfreeze()
    try:
        reading = CacheReader(cache, gates_for("1.35")).read()
        assert len(reading.cycle.snapshot.pods) == pods
        return gc.get_freeze_count()
    finally:
        gc.unfreeze()


def test_a_large_kind_parsed_afresh_is_frozen() -> None:
    assert frozen_after_reading(FREEZE_AFTER) > 0


def test_a_small_cluster_leaves_the_collector_alone() -> None:
    assert frozen_after_reading(10) == 0
