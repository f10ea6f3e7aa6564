"""From manifests (files, or a live cluster's listing) to a simulated cluster.

The objects are parsed by the parsers the rest of draq uses: the DRA models and pods by
`models.parse_object`, draq's own objects by the gap report's reader (`gaps.read_objects`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from admission.core.errors import DraqError, InvalidInput
from admission.core.features import FeatureGates
from admission.core.gaps import read_objects
from admission.core.labels import API_VERSION
from admission.core.models import Model, Namespace, Topology, is_supported, parse_object, parse_topology
from admission.core.simulate.cluster import SimulatedCluster
from admission.core.simulate.workloads import declared_run_times, submit

_WORKLOADS = (("batch/v1", "Job"),)


@dataclass(frozen=True, slots=True)
class Loaded:
    cluster: SimulatedCluster
    run_times: Mapping[str, float | None]  # declared with `draq.io/run-time`, by group key
    notes: tuple[str, ...] = ()  # objects left out (live listings only) and kinds not simulated


def load(manifests: Iterable[Any], gates: FeatureGates, *, default_namespace: str = "default",
         strict: bool = True, submitted: bool = True, namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
         stamp: str = "") -> Loaded:
    """Parse every manifest (`List`s flattened). `submitted`: Jobs and unbound pods are taken as just
    submitted (the Job's pods made, the webhook's labels and gate added); a live listing holds them as they
    are. `stamp`: the creation time given to pods and PodGroups that have none. `strict`: a manifest that
    does not parse is an error naming it; otherwise it is left out with a note."""
    items = [dict(m) for m in _flattened(manifests)]
    labels = dict(namespace_labels or {})
    labels.update({str((m.get("metadata") or {}).get("name")): dict((m.get("metadata") or {}).get("labels") or {})
                   for m in items if (m.get("apiVersion"), m.get("kind")) == ("v1", "Namespace")})
    if submitted:
        items = [dict(m) for m in submit(items, labels, default_namespace)]
    if stamp:
        items = [_stamped(m, stamp) for m in items]
    notes: list[str] = []
    draq = [m for m in items
            if m.get("apiVersion") == API_VERSION or (m.get("apiVersion"), m.get("kind")) == ("v1", "Namespace")]
    parsed = read_objects(draq, gates, default_namespace, strict=strict, ignore_unknown=True)
    notes += parsed.notes
    models: list[Model] = []
    skipped: dict[str, int] = {}
    for manifest in items:
        kind = (manifest.get("apiVersion"), manifest.get("kind"))
        if manifest.get("apiVersion") == API_VERSION or kind in _WORKLOADS:
            continue
        if not is_supported(manifest):
            skipped[f"{kind[0]} {kind[1]}"] = skipped.get(f"{kind[0]} {kind[1]}", 0) + 1
            continue
        try:
            model = parse_object(manifest, default_namespace)
        except DraqError as err:
            if strict:
                raise
            notes.append(f"left out: {err}")
            continue
        if not isinstance(model, Namespace):
            models.append(model)
    notes += [f"not simulated: {n} {kind} object(s)" for kind, n in sorted(skipped.items())]
    created = {f"{m['metadata'].get('namespace') or default_namespace}/{m['metadata'].get('name')}":
               str(m["metadata"].get("creationTimestamp") or "") for m in items
               if m.get("kind") == "PodGroup" and isinstance(m.get("metadata"), Mapping)}
    topologies, left_out = _topologies(items, strict)
    notes += left_out
    cluster = SimulatedCluster(tuple(models), parsed.pod_groups, created, parsed.cluster_queues,
                               dict(parsed.local_queues), parsed.units, {**labels, **parsed.namespace_labels} or None,
                               topologies)
    return Loaded(cluster, declared_run_times(items, default_namespace), tuple(notes))


def merged(base: Loaded, added: Loaded) -> Loaded:
    """`added` on top of `base`: its objects join the cluster, replacing those of the same kind and name."""
    a, b = base.cluster, added.cluster
    cluster = a.with_models(b.models).with_pod_groups(b.pod_groups, b.created)
    queues = {q.name: q for q in (*a.cluster_queues, *b.cluster_queues)}
    units = {u.name: u for u in (*a.units, *b.units)}
    cluster = replace(cluster, cluster_queues=tuple(queues.values()), local_queues={**a.local_queues, **b.local_queues},
                    units=tuple(units.values()),
                    namespace_labels={**(a.namespace_labels or {}), **(b.namespace_labels or {})} or None,
                    topologies={**a.topologies, **b.topologies})
    return Loaded(cluster, {**base.run_times, **added.run_times}, (*base.notes, *added.notes))


def _topologies(items: Iterable[Mapping[str, Any]], strict: bool) -> tuple[dict[str, Topology], list[str]]:
    """The Topologies among the manifests, by name; one that does not parse is an error (`strict`) or left
    out with a note (its groups then wait as in the cluster, their queue's Topology invalid)."""
    found: dict[str, Topology] = {}
    notes: list[str] = []
    for manifest in items:
        if (manifest.get("apiVersion"), manifest.get("kind")) != (API_VERSION, "Topology"):
            continue
        try:
            topology = parse_topology(manifest)
        except DraqError as err:
            if strict:
                raise
            notes.append(f"left out: {err}")
            continue
        found[topology.name] = topology
    return found, notes


def _flattened(manifests: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for manifest in manifests:
        if manifest is None:
            continue
        if not isinstance(manifest, Mapping):
            raise InvalidInput("manifest", "", "expected a Kubernetes object (a mapping), "
                               f"got {type(manifest).__name__}")
        if str(manifest.get("kind", "")).endswith("List") and isinstance(manifest.get("items"), list):
            yield from _flattened(manifest["items"])
        else:
            yield manifest


def _stamped(manifest: dict[str, Any], stamp: str) -> dict[str, Any]:
    if manifest.get("kind") not in ("Pod", "PodGroup") or (manifest.get("metadata") or {}).get("creationTimestamp"):
        return manifest
    stamped = copy.copy(manifest)
    stamped["metadata"] = {**(manifest.get("metadata") or {}), "creationTimestamp": stamp}
    return stamped
