"""The operator caches native ResourceQuotas and its gap metrics compare them as `draq gaps` does: the
NativeQuotaCounts and NativeQuotaLimit figures are those of the report over the same objects, and a
quota's changes reach the figures without waking the admission loop."""

from __future__ import annotations

import copy
from typing import Any

from prometheus_client import CollectorRegistry

from admission.core.features import gates_for
from admission.core.gaps import GapKind, find_gaps, read_objects
from admission.core.telemetry import gap_figures
from admission.operator.cache import OperatorCache
from admission.operator.metrics import OperatorMetrics, reading_gaps
from admission.operator.reading import CacheReader
from tests.support.builders import resource_quota
from tests.support.clock import FakeClock
from tests.unit.gaps.world import TEAM, base, device, held_claim

GATES = gates_for("1.35")
CLASS_DEVICES = "gpu.deviceclass.resource.k8s.io/devices"


class Cache(OperatorCache):
    """The operator's cache without an API: objects arrive as watch events."""

    def __init__(self) -> None:
        super().__init__(None, FakeClock())  # type: ignore[arg-type]
        self.version = 0

    def put(self, obj: dict[str, Any]) -> None:
        self.version += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.version)
        obj["metadata"].setdefault("uid", f"uid-{obj['kind']}-{obj['metadata']['name']}")
        self.reflectors[obj["kind"]].apply_event("ADDED", obj)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        self.reflectors[kind].apply_event("DELETED", self.reflectors[kind].store[(namespace, name)])


def world() -> list[dict[str, Any]]:
    # ClusterQueue cq (namespace team) has 8 `gpus` nominal; the quota allows team 3 GPUs of class gpu and
    # counts 5 (its controller's status): claim c1 holds 2, so it counts 3 more than the namespace holds.
    return [*base(), held_claim("c1", [device("gpu-0"), device("gpu-1")]),
            resource_quota("rq", {CLASS_DEVICES: 3}, TEAM, used={CLASS_DEVICES: 5})]


def test_the_operators_gap_figures_include_native_quota_as_the_report_does() -> None:
    cache = Cache()
    for obj in world():
        cache.put(obj)
    reading = CacheReader(cache, GATES).read()
    assert [q.key for q in reading.resource_quotas] == [f"{TEAM}/rq"]
    figures = reading_gaps(reading)
    assert figures.counts[GapKind.NATIVE_QUOTA_COUNTS.value] == 1
    assert figures.counts[GapKind.NATIVE_QUOTA_LIMIT.value] == 1
    assert figures.sizes[(GapKind.NATIVE_QUOTA_COUNTS.value, CLASS_DEVICES)] == 3.0  # counts 5, holds 2
    assert figures.sizes[(GapKind.NATIVE_QUOTA_LIMIT.value, "gpus")] == 5.0  # nominal 8, allows 3
    assert figures == gap_figures(find_gaps(read_objects(world(), GATES)))  # what `draq gaps` reports


def test_the_metrics_show_the_native_quota_gaps() -> None:
    cache = Cache()
    for obj in world():
        cache.put(obj)
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry, lambda: True)
    metrics.gap_figures = reading_gaps(CacheReader(cache, GATES).read())
    assert registry.get_sample_value("draq_accounting_gaps", {"kind": "NativeQuotaCounts"}) == 1
    assert registry.get_sample_value("draq_accounting_gaps", {"kind": "NativeQuotaLimit"}) == 1
    assert registry.get_sample_value("draq_accounting_gap_size",
                                     {"kind": "NativeQuotaLimit", "measure": "gpus"}) == 5


def test_quota_changes_reach_the_reading_without_waking_the_loop() -> None:
    cache = Cache()
    for obj in world():
        cache.put(obj)
    reader = CacheReader(cache, GATES)
    first = reader.read()
    assert reader.read().resource_quotas is first.resource_quotas  # nothing changed: nothing parsed again
    cache.changed.clear()
    cache.put(resource_quota("rq", {CLASS_DEVICES: 8}, TEAM, used={CLASS_DEVICES: 2}))
    assert not cache.changed.is_set()
    figures = reading_gaps(reader.read())
    assert figures.counts[GapKind.NATIVE_QUOTA_COUNTS.value] == 0
    assert figures.counts[GapKind.NATIVE_QUOTA_LIMIT.value] == 0
    cache.put(resource_quota("rq", {CLASS_DEVICES: 3}, TEAM, used={CLASS_DEVICES: 5}))
    assert reading_gaps(reader.read()).counts[GapKind.NATIVE_QUOTA_LIMIT.value] == 1
    cache.delete("ResourceQuota", TEAM, "rq")
    assert not cache.changed.is_set()
    reading = reader.read()
    assert reading.resource_quotas == ()
    assert reading_gaps(reading).counts[GapKind.NATIVE_QUOTA_LIMIT.value] == 0


def test_a_quota_that_does_not_parse_is_left_out() -> None:
    cache = Cache()
    for obj in world():
        cache.put(obj)
    broken = resource_quota("broken", {CLASS_DEVICES: 3}, TEAM)
    broken["spec"]["hard"] = {CLASS_DEVICES: "three"}
    cache.put(broken)
    assert [q.key for q in CacheReader(cache, GATES).read().resource_quotas] == [f"{TEAM}/rq"]
