"""Validating webhook, Job and JobSet CREATE in managed namespaces: refused when the devices all its pods ask
for together are more than its ClusterQueue could ever hold (the webhook checks each claim template on its
own; only the workload knows how many pods will use it).

"Where it can tell": the queue comes from the workload's own label or the namespace default; the pods' devices
from their ResourceClaimTemplates (read for this decision) and device-plugin requests; units that need the
devices themselves (capacities, counters, weights) are left to the operator, as for claims.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from admission.core.errors import DraqError
from admission.core.labels import DEFAULT_QUEUE_LABEL, QUEUE_LABEL
from admission.core.models import DeviceClass, ObjectRef, Pod, ResourceClaimTemplate, parse_object
from admission.core.quota import (
    GroupObjects,
    Inventory,
    Unchargeable,
    charge_group,
    device_selected,
    format_amount,
    parse_cluster_queue,
)
from admission.core.review.claims import compiled_units, parse_or_none, queue_ceiling
from admission.core.review.envelope import AdmissionRequest, Decision
from admission.core.review.lookups import Lookups
from admission.core.review.queue_choice import namespace_is_managed
from admission.core.review.readers import labels_of, mapping
from admission.core.review.unmanaged import queue_outside_management
from admission.core.workloads.shapes import RoleSpec, ShapeOf, job_shape, jobset_shape

TOTALLED_WORKLOADS: Mapping[tuple[str, str], ShapeOf] = {
    ("batch", "Job"): job_shape, ("jobset.x-k8s.io", "JobSet"): jobset_shape}
"""The workload kinds whose total the webhook checks at creation, by API group and kind."""


def validate_workload_create(request: AdmissionRequest, lookups: Lookups) -> Decision:
    """A workload of a kind draq groups, at CREATE: refused when it names a queue in a namespace draq does not
    manage (`unmanaged`), or when draq can already tell that its pods together never fit their queue."""
    namespace_labels = lookups.namespace_labels(request.namespace)
    # A namespace not known yet counts as unmanaged, after a fresh look (`queue_outside_management` asks for one).
    refusal = queue_outside_management(request, namespace_labels or {})
    if refusal is not None:
        return refusal
    if namespace_labels is None or not namespace_is_managed(namespace_labels):
        return Decision.allow()
    return validate_workload_total(request, lookups, namespace_labels)


def validate_workload_total(request: AdmissionRequest, lookups: Lookups,
                            namespace_labels: Mapping[str, str]) -> Decision:
    shape_of = TOTALLED_WORKLOADS.get((request.kind.group, request.kind.kind))
    if shape_of is None or request.object is None:
        return Decision.allow()
    queue = labels_of(request.object).get(QUEUE_LABEL) or namespace_labels.get(DEFAULT_QUEUE_LABEL)
    local_queue = lookups.local_queue(request.namespace, queue) if queue else None
    name = mapping(mapping(local_queue).get("spec")).get("clusterQueue")
    manifest = lookups.cluster_queue(name) if isinstance(name, str) else None
    if manifest is None:
        return Decision.allow()  # its pods are checked when they are created
    try:
        cluster_queue = parse_cluster_queue(manifest)
    except DraqError:
        return Decision.allow()
    roles = shape_of(request.object)
    templates, missing = _templates(request.namespace, roles, lookups)
    if missing:
        return Decision.allow(missing=missing)  # read them for this decision; if they do not exist, it cannot tell
    totals = _totals(request.namespace, roles, templates, lookups)
    too_big = []
    pods = sum(count for _, _, count in roles)
    for unit, needed in sorted(totals.items()):
        ceiling = queue_ceiling(cluster_queue, unit)
        if ceiling is not None and needed > ceiling.value:
            too_big.append(f"{unit}: its {pods} pods ask for {format_amount(needed, ceiling.format)} together, the "
                           f"queue can hold at most {ceiling}")
    if not too_big:
        return Decision.allow()
    return Decision.deny(
        f"{request.describe()} could never be admitted by LocalQueue {queue!r} (ClusterQueue {cluster_queue.name}): "
        f"{'; '.join(too_big)}. Run fewer pods or ask for fewer devices per pod, or raise the ClusterQueue's quota "
        "(nominal, or borrowingLimit within a cohort)")


def _template_names(template: Mapping[str, Any]) -> list[str]:
    entries = mapping(template.get("spec")).get("resourceClaims")
    return [str(e["resourceClaimTemplateName"]) for e in entries if isinstance(e, Mapping)
            and isinstance(e.get("resourceClaimTemplateName"), str)] if isinstance(entries, list) else []


def _templates(namespace: str, roles: tuple[RoleSpec, ...], lookups: Lookups
               ) -> tuple[dict[str, ResourceClaimTemplate], list[ObjectRef]]:
    found: dict[str, ResourceClaimTemplate] = {}
    missing: list[ObjectRef] = []
    for name in sorted({n for _, template, _ in roles for n in _template_names(template)}):
        manifest = lookups.claim_template(namespace, name)
        model = parse_or_none(manifest) if manifest is not None else None
        if isinstance(model, ResourceClaimTemplate):
            found[f"{namespace}/{name}"] = model
        elif manifest is None:
            missing.append(ObjectRef("ResourceClaimTemplate", namespace, name))
    return found, missing


def _totals(namespace: str, roles: tuple[RoleSpec, ...], templates: Mapping[str, ResourceClaimTemplate],
            lookups: Lookups) -> dict[str, Fraction]:
    """Per unit the webhook can charge without devices: one pod of each role charged, times the role's count."""
    units, _ = compiled_units(lookups)
    classes = sorted({s.device_class_name for t in templates.values() for r in t.spec.requests for s in r.alternatives})
    device_classes = [m for name in classes if isinstance(m := parse_or_none(lookups.device_class(name) or {}),
                                                          DeviceClass)]
    inventory = Inventory.of(device_classes, {})
    totals: dict[str, Fraction] = {}
    for role, template, count in roles:
        pod = _role_pod(namespace, role, template)
        if pod is None:
            continue
        group = GroupObjects((pod,), templates=dict(templates))
        for unit in units:
            try:
                charged = charge_group(group, [unit], inventory, device_selected).total
            except Unchargeable:
                continue  # needs the devices themselves: the operator charges it at admission
            for name, amount in charged:
                totals[name] = totals.get(name, Fraction(0)) + amount * count
    return totals


def _role_pod(namespace: str, role: str, template: Mapping[str, Any]) -> Pod | None:
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{role}-0", "namespace": namespace},
                "spec": dict(mapping(template.get("spec")))}
    try:
        pod = parse_object(manifest, namespace)
    except DraqError:
        return None
    return pod if isinstance(pod, Pod) else None
