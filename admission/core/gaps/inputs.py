"""The gap report's input: every object it compares, parsed from manifests (files or a live listing)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from admission.core.allocator import Snapshot
from admission.core.errors import DraqError, InvalidInput
from admission.core.features import FeatureGates
from admission.core.labels import API_VERSION
from admission.core.models import (
    DeviceClass,
    Namespace,
    Node,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceQuota,
    ResourceSlice,
    is_supported,
    parse_object,
)
from admission.core.models.meta import object_label
from admission.core.quota import (
    ClusterQueue,
    CompiledUnit,
    DraCel,
    LocalQueue,
    PodGroup,
    SelectionFilter,
    compile_unit,
    device_selected,
    parse_cluster_queue,
    parse_local_queue,
    parse_pod_group,
    parse_quota_unit,
)

DRAQ_KINDS = ("ClusterQueue", "LocalQueue", "QuotaUnit", "PodGroup")
SUPPORTED = ("v1 Namespace", "v1 Node", "v1 Pod", "v1 ResourceQuota", "resource.k8s.io/v1 DeviceClass",
             "resource.k8s.io/v1 ResourceClaim", "resource.k8s.io/v1 ResourceClaimTemplate",
             "resource.k8s.io/v1 ResourceSlice", *(f"{API_VERSION} {kind}" for kind in DRAQ_KINDS))

_SNAPSHOT_KINDS = (Node, DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate, Pod)


@dataclass(frozen=True, slots=True)
class GapInput:
    """One consistent set of objects: the DRA snapshot (with every pod), draq's queues, units and
    groups, namespaces and native ResourceQuotas."""

    snapshot: Snapshot
    gates: FeatureGates
    units: tuple[CompiledUnit, ...] = ()
    cluster_queues: tuple[ClusterQueue, ...] = ()
    local_queues: Mapping[str, LocalQueue] = field(default_factory=dict)  # `namespace/name`
    pod_groups: tuple[PodGroup, ...] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    resource_quotas: tuple[ResourceQuota, ...] = ()
    matches: SelectionFilter = device_selected
    notes: tuple[str, ...] = ()  # objects left out because they do not parse (live input only)


_DRAQ_PARSERS: dict[str, Callable[[Mapping[str, Any], str], object]] = {
    "ClusterQueue": lambda m, _: parse_cluster_queue(m),
    "LocalQueue": parse_local_queue,
    "QuotaUnit": lambda m, _: compile_unit(parse_quota_unit(m), DraCel()),
    "PodGroup": parse_pod_group,
}


def read_objects(manifests: Iterable[Any], gates: FeatureGates, default_namespace: str = "default", *,
                 strict: bool = True, ignore_unknown: bool = False) -> GapInput:
    """Parse every manifest (`List`s flattened). `strict`: a manifest that does not parse is an error
    naming it (files); otherwise it is left out with a note (a live cluster). Unknown kinds are an
    error naming the supported ones, unless `ignore_unknown`."""
    parsed: list[object] = []
    notes: list[str] = []
    for manifest in _flattened(manifests):
        try:
            item = _parse(manifest, default_namespace, ignore_unknown)
        except DraqError as err:
            if strict:
                raise
            notes.append(f"left out: {err}")
            continue
        if item is not None:
            parsed.append(item)
    return _assemble(parsed, gates, tuple(notes))


def _flattened(manifests: Iterable[Any]) -> Iterable[Any]:
    for manifest in manifests:
        if isinstance(manifest, Mapping) and str(manifest.get("kind", "")).endswith("List") \
                and isinstance(manifest.get("items"), list):
            yield from _flattened(manifest["items"])
        elif manifest is not None:
            yield manifest


def _parse(manifest: Any, default_namespace: str, ignore_unknown: bool) -> object | None:
    if not isinstance(manifest, Mapping):
        raise InvalidInput("manifest", "", f"expected a Kubernetes object (a mapping), got {type(manifest).__name__}")
    api, kind = manifest.get("apiVersion"), manifest.get("kind")
    if not api or not kind:
        raise InvalidInput(object_label(str(kind or "object"), manifest), "apiVersion/kind",
                           "both are required (is this a Kubernetes object?)")
    if api == API_VERSION and kind in _DRAQ_PARSERS:
        return _DRAQ_PARSERS[str(kind)](manifest, default_namespace)
    if is_supported(manifest):
        return parse_object(manifest, default_namespace)
    if ignore_unknown:
        return None
    raise InvalidInput(object_label(str(kind or "object"), manifest), "apiVersion/kind",
                       f"{api} {kind} is not used by the gap report; supported: {', '.join(SUPPORTED)} "
                       "(or pass --ignore-unknown to skip other kinds)")


def _assemble(parsed: list[object], gates: FeatureGates, notes: tuple[str, ...]) -> GapInput:
    return GapInput(
        snapshot=Snapshot.from_models(p for p in parsed if isinstance(p, _SNAPSHOT_KINDS)),
        gates=gates,
        units=tuple(p for p in parsed if isinstance(p, CompiledUnit)),
        cluster_queues=tuple(p for p in parsed if isinstance(p, ClusterQueue)),
        local_queues={p.key: p for p in parsed if isinstance(p, LocalQueue)},
        pod_groups=tuple(p for p in parsed if isinstance(p, PodGroup)),
        namespace_labels={p.name: p.labels for p in parsed if isinstance(p, Namespace)},
        resource_quotas=tuple(p for p in parsed if isinstance(p, ResourceQuota)),
        notes=notes,
    )
