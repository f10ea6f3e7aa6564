"""Validating webhook, ResourceClaims and ResourceClaimTemplates of managed namespaces: selectors that
compile, a charge that can be computed, and a charge its queue could ever hold."""

from __future__ import annotations

from collections.abc import Mapping

from admission.core.cel import CelError, compile_selector
from admission.core.errors import DraqError, InvalidInput
from admission.core.labels import DEFAULT_QUEUE_LABEL, QUEUE_LABEL
from admission.core.models import (
    ClaimSpec,
    DeviceClass,
    ObjectRef,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    parse_object,
)
from admission.core.quantity import Quantity
from admission.core.quota import (
    ChargeResult,
    ClusterQueue,
    CompiledUnit,
    DraCel,
    GroupObjects,
    Inventory,
    Unchargeable,
    charge_group,
    compile_unit,
    device_selected,
    format_amount,
    parse_cluster_queue,
    parse_quota_unit,
)
from admission.core.review.envelope import AdmissionRequest, Decision, JsonObject
from admission.core.review.lookups import Lookups
from admission.core.review.queue_choice import namespace_is_managed
from admission.core.review.readers import mapping

CLAIM_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate"})
_CLAIM_PROBE_POD = "draq-claim-check"


def validate_claim(request: AdmissionRequest, lookups: Lookups) -> Decision:
    """Selectors that compile, a charge that can be computed, and a charge its queue could ever hold."""
    namespace_labels = lookups.namespace_labels(request.namespace)
    if namespace_labels is None:
        return Decision.allow(missing=[ObjectRef("Namespace", "", request.namespace)])
    if not namespace_is_managed(namespace_labels) or request.object is None:
        return Decision.allow()
    try:
        model = parse_object(request.object, request.namespace)
    except InvalidInput as err:
        return Decision.deny(f"{err}; draq cannot charge a claim it cannot read", "Invalid", 422)
    if not isinstance(model, ResourceClaim | ResourceClaimTemplate):
        return Decision.allow()
    selector_problem = _selector_problem(request, model.spec)
    if selector_problem:
        return Decision.deny(selector_problem, "Invalid", 422)
    charged = _charge(request, model, lookups)
    if isinstance(charged, Decision):
        return charged
    charge, warnings = charged
    fit = _could_ever_fit(request, model, charge, lookups, namespace_labels)
    return fit if not fit.allowed else Decision.allow(warnings=[*warnings, *fit.warnings])


def _selector_problem(request: AdmissionRequest, spec: ClaimSpec) -> str:
    for device_request in spec.requests:
        for selection in device_request.alternatives:
            where = device_request.name if selection.name == device_request.name else (
                f"{device_request.name}/{selection.name}")
            for index, expression in enumerate(selection.selectors):
                if expression is None:
                    return (f"{request.describe()}, request {where}, selectors[{index}]: only CEL selectors "
                            "are understood; use selectors[].cel.expression")
                try:
                    compile_selector(expression)
                except CelError as err:
                    return (f"{request.describe()}, request {where}, selectors[{index}].cel.expression: "
                            f"does not compile: {err}")
    return ""


def _charge(
    request: AdmissionRequest, model: ResourceClaim | ResourceClaimTemplate, lookups: Lookups
) -> tuple[ChargeResult, list[str]] | Decision:
    """The charge in every unit the webhook can compute, and warnings for the others.

    The webhook has no device inventory (no ResourceSlice cache): a unit that counts devices only by
    class and number is charged here; one that needs to look at the devices (capacity, counters,
    weights, a unit selector, `allocationMode: All`) is charged by the operator at admission.
    """
    units, warnings = compiled_units(lookups)
    classes = sorted({s.device_class_name for r in model.spec.requests for s in r.alternatives})
    device_classes = []
    for name in classes:
        manifest = lookups.device_class(name)
        parsed = parse_or_none(manifest) if manifest is not None else None
        if isinstance(parsed, DeviceClass):
            device_classes.append(parsed)
    absent = [name for name in classes if name not in {c.name for c in device_classes}]
    # A class no unit counts is not named by charging (below): say here that it is missing.
    warnings.extend(_missing_class_warning(request, model, name) for name in absent
                    if not any(unit.unit.counts_class(name) for unit in units))
    entry: dict[str, str] = {"name": "claim"}
    if isinstance(model, ResourceClaim):
        entry["resourceClaimName"] = model.name
        group = GroupObjects((_probe_pod(request.namespace, entry),), claims={model.key: model})
    else:
        entry["resourceClaimTemplateName"] = model.name
        group = GroupObjects((_probe_pod(request.namespace, entry),),
                             templates={f"{model.namespace}/{model.name}": model})
    inventory = Inventory.of(device_classes, {})
    try:
        return charge_group(group, units, inventory, device_selected), warnings
    except Unchargeable as err:
        if err.permanent:
            text = _in_terms_of(request, err)
            return Decision.deny(f"{request.describe()}: draq cannot compute its charge: {text}", "Invalid", 422)
    # Some unit needs what the webhook does not have: find which, and charge the others.
    known: list[CompiledUnit] = []
    at_admission: list[str] = []
    for unit in units:
        try:
            charge_group(group, [unit], inventory, device_selected)
        except Unchargeable as err:
            if any(unit.unit.counts_class(name) for name in absent):
                text = f"the charge is not known yet: {_in_terms_of(request, err)}"
                warnings.extend([text] if text not in warnings else [])
            else:
                at_admission.append(unit.unit.name)
            continue
        known.append(unit)
    if at_admission:
        units_named = f"QuotaUnit{'s' if len(at_admission) > 1 else ''} {', '.join(at_admission)}"
        verb = "depend" if len(at_admission) > 1 else "depends"
        warnings.append(f"{request.describe()}: its charge in {units_named} is computed at admission (it {verb} "
                        "on the devices allocated)")
    try:
        return charge_group(group, known, inventory, device_selected), warnings
    except Unchargeable as err:
        return Decision.allow(warnings=[*warnings, f"the charge is not known yet: {_in_terms_of(request, err)}"])


def _missing_class_warning(request: AdmissionRequest, model: ResourceClaim | ResourceClaimTemplate,
                           name: str) -> str:
    where = next(r.name if r.exactly is not None else f"{r.name}/{s.name}"
                 for r in model.spec.requests for s in r.alternatives if s.device_class_name == name)
    return (f"{request.describe()}, request {where}: DeviceClass {name} does not exist; the scheduler "
            "reports the pods that use it unschedulable until it is created")


def _in_terms_of(request: AdmissionRequest, err: Unchargeable) -> str:
    """The charging error about the probe pod, retold about the object under review."""
    return str(err).replace(f"pod {request.namespace}/{_CLAIM_PROBE_POD} claim claim", request.describe())


def _probe_pod(namespace: str, entry: Mapping[str, str]) -> Pod:
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": _CLAIM_PROBE_POD, "namespace": namespace},
                "spec": {"resourceClaims": [dict(entry)], "containers": []}}
    pod = parse_object(manifest, namespace)
    assert isinstance(pod, Pod)
    return pod


def parse_or_none(manifest: JsonObject) -> object:
    try:
        return parse_object(manifest)
    except InvalidInput:
        return None


def compiled_units(lookups: Lookups) -> tuple[list[CompiledUnit], list[str]]:
    """Every QuotaUnit that compiles, and a warning for each that does not (the unit's own problem)."""
    units, warnings = [], []
    for manifest in lookups.quota_units():
        try:
            units.append(compile_unit(parse_quota_unit(manifest), DraCel()))
        except DraqError as err:
            warnings.append(f"not charged in a unit that cannot be used: {err}")
    return units, warnings


def _could_ever_fit(
    request: AdmissionRequest, model: ResourceClaim | ResourceClaimTemplate, charged: ChargeResult,
    lookups: Lookups, namespace_labels: Mapping[str, str],
) -> Decision:
    queue = model.meta.labels.get(QUEUE_LABEL) or namespace_labels.get(DEFAULT_QUEUE_LABEL)
    local_queue = lookups.local_queue(request.namespace, queue) if queue else None
    cluster_queue_name = mapping(mapping(local_queue).get("spec")).get("clusterQueue")
    manifest = lookups.cluster_queue(cluster_queue_name) if isinstance(cluster_queue_name, str) else None
    if manifest is None:
        return Decision.allow()  # no queue known here: the pods that use the claim are checked
    try:
        cluster_queue = parse_cluster_queue(manifest)
    except InvalidInput as err:
        return Decision.allow(warnings=[f"whether the claim could ever fit is not known: {err}"])
    too_big = []
    for unit, needed in charged.total:
        ceiling = queue_ceiling(cluster_queue, unit)
        if ceiling is not None and needed > ceiling.value:
            too_big.append(f"{unit}: it asks for {format_amount(needed, ceiling.format)}, the queue can hold at "
                           f"most {ceiling}")
    if not too_big:
        return Decision.allow()
    return Decision.deny(
        f"{request.describe()} could never be admitted by LocalQueue {queue!r} (ClusterQueue "
        f"{cluster_queue.name}): {'; '.join(too_big)}. Ask for fewer devices, or raise the ClusterQueue's "
        "quota (nominal, or borrowingLimit within a cohort)",
    )


def queue_ceiling(cluster_queue: ClusterQueue, unit: str) -> Quantity | None:
    """The most of a unit the queue could ever hold; None when unbounded (no quota, or free borrowing)."""
    quota = cluster_queue.quota(unit)
    if quota is None:
        return None
    if cluster_queue.cohort is None:
        return quota.nominal
    if quota.borrowing_limit is None:
        return None
    return quota.nominal + quota.borrowing_limit
