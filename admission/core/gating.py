"""What the admission webhooks decide, as pure functions of an AdmissionRequest and a few lookups.

Mutating (Pod CREATE): a pod of a managed namespace that names a LocalQueue gets the scheduling gate
`draq.io/admission` and the labels the operator reads (queue, pod group, group minimum).

Validating: pods naming a LocalQueue that does not exist, removal of the gate by anyone but draq,
queue or group labels changed on an admitted pod, and draq's own objects that reference objects
that do not exist; ResourceClaims and ResourceClaimTemplates whose selectors do not compile or
whose charge cannot be computed.

A namespace is managed when it has the label `draq.io/managed: "true"` or the label
`draq.io/default-queue` (naming the LocalQueue its pods use when they name none).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from admission.core.admission_review import (
    AdmissionRequest,
    Decision,
    JsonObject,
    ObjectRef,
    PatchOperation,
)
from admission.core.cel import CelError, compile_selector
from admission.core.errors import DraqError, InvalidInput
from admission.core.models import ClaimSpec, DeviceClass, Pod, ResourceClaim, ResourceClaimTemplate, parse_object
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

GATE = "draq.io/admission"
QUEUE_LABEL = "draq.io/queue"
GROUP_LABEL = "draq.io/pod-group"
GROUP_MIN_LABEL = "draq.io/group-min"
MANAGED_LABEL = "draq.io/managed"
DEFAULT_QUEUE_LABEL = "draq.io/default-queue"
GROUP_LABELS = (QUEUE_LABEL, GROUP_LABEL, GROUP_MIN_LABEL)
DEFAULT_DRAQ_USER = "system:serviceaccount:draq-system:draq"
DRAQ_GROUP = "draq.io"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_VALUE_MAX = 63


class Lookups(Protocol):
    """The few objects the decisions read; the webhook shell serves them from a list+watch cache."""

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None: ...

    def local_queue(self, namespace: str, name: str) -> JsonObject | None: ...

    def cluster_queue(self, name: str) -> JsonObject | None: ...

    def quota_unit(self, name: str) -> JsonObject | None: ...

    def job(self, namespace: str, name: str) -> JsonObject | None: ...

    def quota_units(self) -> Iterable[JsonObject]: ...

    def device_class(self, name: str) -> JsonObject | None: ...


@dataclass(frozen=True, slots=True)
class GatingPolicy:
    """Settings of the decisions."""

    # The only user allowed to remove the gate and to relabel admitted pods.
    draq_user: str = DEFAULT_DRAQ_USER


# ---------------------------------------------------------------------------------------------
# Small readers that never raise on hostile shapes.


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _labels(obj: JsonObject | None) -> Mapping[str, str]:
    labels = _mapping(_mapping(obj).get("metadata")).get("labels")
    if not isinstance(labels, Mapping):
        return {}
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}


def _gates(pod: JsonObject | None) -> list[str]:
    gates = _mapping(_mapping(pod).get("spec")).get("schedulingGates")
    if not isinstance(gates, list):
        return []
    return [str(_mapping(g).get("name")) for g in gates if isinstance(_mapping(g).get("name"), str)]


def _controller_owner(obj: JsonObject | None) -> Mapping[str, Any]:
    owners = _mapping(_mapping(obj).get("metadata")).get("ownerReferences")
    for owner in owners if isinstance(owners, list) else []:
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return owner
    return {}


def namespace_is_managed(labels: Mapping[str, str]) -> bool:
    return labels.get(MANAGED_LABEL) == "true" or bool(labels.get(DEFAULT_QUEUE_LABEL))


@dataclass(frozen=True, slots=True)
class QueueChoice:
    """The LocalQueue a pod goes to, and where that name came from (for messages)."""

    name: str
    source: str


def pod_queue(pod: JsonObject | None, namespace_labels: Mapping[str, str]) -> QueueChoice | None:
    """The pod's own label first, then its namespace's default; None for an unmanaged pod."""
    if not namespace_is_managed(namespace_labels):
        return None
    if _mapping(_mapping(_mapping(pod).get("metadata")).get("annotations")).get(MIRROR_ANNOTATION):
        return None
    if _controller_owner(pod).get("kind") == "DaemonSet":
        return None
    own = _labels(pod).get(QUEUE_LABEL)
    if own:
        return QueueChoice(own, f"label {QUEUE_LABEL}")
    default = namespace_labels.get(DEFAULT_QUEUE_LABEL)
    if default:
        return QueueChoice(default, f"the namespace label {DEFAULT_QUEUE_LABEL}")
    return None


def label_value(name: str) -> str:
    """A valid label value for a name: unchanged when it fits, else shortened with a hash suffix."""
    if len(name) <= _LABEL_VALUE_MAX and _LABEL_VALUE.match(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    cleaned = re.sub(r"[^-A-Za-z0-9_.]", "-", name)[: _LABEL_VALUE_MAX - 11].strip("-_.")
    return f"{cleaned}-{digest}" if cleaned else digest


# ---------------------------------------------------------------------------------------------
# Mutating webhook.


def mutate(request: AdmissionRequest, lookups: Lookups) -> Decision:
    """The mutating webhook: gate and label managed pods at CREATE; everything else passes."""
    if request.kind.kind != "Pod" or request.kind.group or request.operation != "CREATE":
        return Decision.allow()
    if request.sub_resource:
        return Decision.allow()
    namespace_labels = lookups.namespace_labels(request.namespace)
    if namespace_labels is None:
        return Decision.allow(missing=[ObjectRef("Namespace", "", request.namespace)])
    queue = pod_queue(request.object, namespace_labels)
    pod = request.object
    if queue is None or pod is None or not isinstance(pod.get("spec"), Mapping):
        return Decision.allow(missing=_maybe_stale_namespace(request, namespace_labels))
    labels, warnings, missing = _labels_to_add(request, pod, queue, lookups)
    patch = [*_label_patch(pod, labels), *_gate_patch(pod)]
    return Decision.allow(patch, warnings, missing)


def _maybe_stale_namespace(request: AdmissionRequest, namespace_labels: Mapping[str, str]) -> list[ObjectRef]:
    """A queue-labelled pod in a namespace that looks unmanaged: the namespace's labels may have just
    changed (the API server only sends pods of managed namespaces), so ask for a fresh look."""
    if namespace_is_managed(namespace_labels) or not _labels(request.object).get(QUEUE_LABEL):
        return []
    return [ObjectRef("Namespace", "", request.namespace)]


def _labels_to_add(
    request: AdmissionRequest, pod: JsonObject, queue: QueueChoice, lookups: Lookups
) -> tuple[dict[str, str], list[str], list[ObjectRef]]:
    present = _labels(pod)
    wanted: dict[str, str] = {QUEUE_LABEL: queue.name}
    warnings: list[str] = []
    missing: list[ObjectRef] = []
    owner = _controller_owner(pod)
    if present.get(GROUP_LABEL):
        pass  # the user's group; its minimum is the user's too (or the PodGroup's minMember)
    elif owner.get("kind") == "Job" and isinstance(owner.get("name"), str):
        job_name = str(owner["name"])
        wanted[GROUP_LABEL] = label_value(job_name)
        job = lookups.job(request.namespace, job_name)
        if job is None:
            missing.append(ObjectRef("Job", request.namespace, job_name))
            warnings.append(f"Job {request.namespace}/{job_name} is not known to draq yet: group minimum 1")
        wanted[GROUP_MIN_LABEL] = str(job_group_min(job))
    else:
        wanted[GROUP_LABEL] = label_value(_lone_pod_group(request, pod))
        wanted[GROUP_MIN_LABEL] = "1"
    # Empty values count as absent; the queue label is set to the queue chosen (it may come from the
    # namespace default when the pod's own label is empty).
    to_set = {k: v for k, v in wanted.items() if not present.get(k)}
    if present.get(QUEUE_LABEL) != queue.name:
        to_set[QUEUE_LABEL] = queue.name
    return to_set, warnings, missing


def job_group_min(job: JsonObject | None) -> int:
    """A Job's pods run at most `parallelism` at once, and never more than `completions`."""
    spec = _mapping(_mapping(job).get("spec"))
    parallelism = spec.get("parallelism", 1)
    completions = spec.get("completions")
    size = parallelism if isinstance(parallelism, int) and not isinstance(parallelism, bool) else 1
    if isinstance(completions, int) and not isinstance(completions, bool) and completions > 0:
        size = min(size, completions)
    return max(size, 1)


def _lone_pod_group(request: AdmissionRequest, pod: JsonObject) -> str:
    metadata = _mapping(pod.get("metadata"))
    name = metadata.get("name") or request.name
    if isinstance(name, str) and name:
        return name
    # generateName: the final name is not known yet; the request uid is unique and stable.
    prefix = metadata.get("generateName")
    prefix = prefix if isinstance(prefix, str) and prefix else "pod-"
    return f"{prefix}{request.uid.replace('-', '')[:12]}"


def _label_patch(pod: JsonObject, labels: Mapping[str, str]) -> list[PatchOperation]:
    if not labels:
        return []
    metadata = pod.get("metadata")
    if not isinstance(metadata, Mapping):
        return [PatchOperation("add", ("metadata",), {"labels": dict(labels)})]
    if not isinstance(metadata.get("labels"), Mapping):
        return [PatchOperation("add", ("metadata", "labels"), dict(labels))]
    return [PatchOperation("add", ("metadata", "labels", key), value) for key, value in labels.items()]


def _gate_patch(pod: JsonObject) -> list[PatchOperation]:
    spec = _mapping(pod.get("spec"))
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list):
        return [PatchOperation("add", ("spec", "schedulingGates"), [{"name": GATE}])]
    if GATE in _gates(pod):
        return []
    return [PatchOperation("add", ("spec", "schedulingGates", "-"), {"name": GATE})]


# ---------------------------------------------------------------------------------------------
# Validating webhook: pods.


def validate(request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy) -> Decision:
    """The validating webhook: dispatch on the kind of object under review."""
    if request.operation not in ("CREATE", "UPDATE") or request.sub_resource:
        return Decision.allow()
    kind = request.kind
    if kind.group == "" and kind.kind == "Pod":
        return _validate_pod(request, lookups, policy)
    if kind.group == DRAQ_GROUP:
        check = _DRAQ_CHECKS.get(kind.kind)
        return check(request, lookups) if check else Decision.allow()
    if kind.group == "resource.k8s.io" and kind.kind in CLAIM_KINDS:
        return validate_claim(request, lookups)
    return Decision.allow()


def _validate_pod(request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy) -> Decision:
    if request.operation == "UPDATE":
        return _validate_pod_update(request, lookups, policy)
    namespace_labels = lookups.namespace_labels(request.namespace)
    if namespace_labels is None:
        return Decision.allow(missing=[ObjectRef("Namespace", "", request.namespace)])
    queue = pod_queue(request.object, namespace_labels)
    if queue is None:
        return Decision.allow(missing=_maybe_stale_namespace(request, namespace_labels))
    return _first_denial(
        lambda: _queue_exists(request, queue, lookups),
        lambda: _group_min_valid(request),
        lambda: _not_bound_directly(request, queue),
        lambda: _gated(request, queue),
    )


def _first_denial(*checks: Callable[[], Decision]) -> Decision:
    warnings: list[str] = []
    missing: list[ObjectRef] = []
    for check in checks:
        decision = check()
        if not decision.allowed:
            return decision
        warnings.extend(decision.warnings)
        missing.extend(decision.missing)
    return Decision.allow(warnings=warnings, missing=missing)


def _queue_exists(request: AdmissionRequest, queue: QueueChoice, lookups: Lookups) -> Decision:
    local_queue = lookups.local_queue(request.namespace, queue.name)
    if local_queue is None:
        ref = ObjectRef("LocalQueue", request.namespace, queue.name)
        return Decision.deny(
            f"{request.describe()}: LocalQueue {queue.name!r} (from {queue.source}) does not exist in "
            f"namespace {request.namespace!r}. Create it (apiVersion draq.io/v1alpha1, kind LocalQueue, "
            f"spec.clusterQueue) or name an existing one (kubectl get localqueues -n {request.namespace}).",
            missing=[ref],
        )
    cluster_queue = _mapping(local_queue.get("spec")).get("clusterQueue")
    if isinstance(cluster_queue, str) and lookups.cluster_queue(cluster_queue) is None:
        return Decision.allow(
            warnings=[f"LocalQueue {queue.name} points to ClusterQueue {cluster_queue}, which does not "
                      "exist: the pod stays gated until it does"],
            missing=[ObjectRef("ClusterQueue", "", cluster_queue)],
        )
    return Decision.allow()


def _group_min_valid(request: AdmissionRequest) -> Decision:
    value = _labels(request.object).get(GROUP_MIN_LABEL)
    if value is None or (value.isdigit() and value.isascii() and 0 < int(value) <= 100_000):
        return Decision.allow()
    return Decision.deny(
        f"{request.describe()}, label {GROUP_MIN_LABEL}: {value!r} is not a group size; "
        "use a whole number of pods from 1 to 100000",
        "Invalid",
        422,
    )


def _not_bound_directly(request: AdmissionRequest, queue: QueueChoice) -> Decision:
    node = _mapping(_mapping(request.object).get("spec")).get("nodeName")
    if not node:
        return Decision.allow()
    return Decision.deny(
        f"{request.describe()}, field spec.nodeName: a pod of LocalQueue {queue.name!r} must go "
        "through the scheduler to be admitted; use a nodeSelector or node affinity instead of nodeName",
        "Invalid",
        422,
    )


def _gated(request: AdmissionRequest, queue: QueueChoice) -> Decision:
    if GATE in _gates(request.object):
        return Decision.allow()
    return Decision.deny(
        f"{request.describe()}: a pod of LocalQueue {queue.name!r} needs the scheduling gate {GATE}, "
        "which draq's mutating webhook adds; check that its MutatingWebhookConfiguration is installed",
        "Invalid",
        422,
    )


def _validate_pod_update(request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy) -> Decision:
    if request.username == policy.draq_user:
        return Decision.allow()
    old, new = request.old_object, request.object
    old_labels, new_labels = _labels(old), _labels(new)
    queue = old_labels.get(QUEUE_LABEL)
    if not queue:
        return Decision.allow()
    was_gated = GATE in _gates(old)
    if was_gated and GATE not in _gates(new):
        return Decision.deny(
            f"{request.describe()}, field spec.schedulingGates: only draq ({policy.draq_user}) removes the "
            f"gate {GATE}; it does so when LocalQueue {queue!r} admits the pod's group. "
            f"See why it waits with: kubectl describe podgroups -n {request.namespace}",
        )
    changed = [key for key in GROUP_LABELS if old_labels.get(key) != new_labels.get(key)]
    if changed and not was_gated:
        moves = ", ".join(f"{k} {old_labels.get(k)!r} -> {new_labels.get(k)!r}" for k in changed)
        return Decision.deny(
            f"{request.describe()}, metadata.labels: the pod is admitted and charged to LocalQueue "
            f"{queue!r}, so its queue and group labels cannot change ({moves}). "
            "To move it, delete the pod and create it again with the new labels",
        )
    new_queue = new_labels.get(QUEUE_LABEL)
    if QUEUE_LABEL in changed and new_queue:
        return _queue_exists(request, QueueChoice(new_queue, f"label {QUEUE_LABEL}"), lookups)
    return _group_min_valid(request) if GROUP_MIN_LABEL in changed else Decision.allow()


# ---------------------------------------------------------------------------------------------
# Validating webhook: draq's own objects, beyond what the CRD schema can say.


def _validate_local_queue(request: AdmissionRequest, lookups: Lookups) -> Decision:
    name = _mapping(_mapping(request.object).get("spec")).get("clusterQueue")
    if not isinstance(name, str) or not name:
        return Decision.allow()  # the CRD schema requires it and says so
    cluster_queue = lookups.cluster_queue(name)
    if cluster_queue is None:
        return Decision.deny(
            f"{request.describe()}, field spec.clusterQueue: ClusterQueue {name!r} does not exist. "
            "Create the ClusterQueue first (kubectl get clusterqueues lists them)",
            missing=[ObjectRef("ClusterQueue", "", name)],
        )
    selector = _mapping(cluster_queue.get("spec")).get("namespaceSelector")
    namespace_labels = lookups.namespace_labels(request.namespace)
    if namespace_labels is None or not isinstance(selector, Mapping):
        return Decision.allow()
    if not selector_matches(selector, namespace_labels):
        return Decision.deny(
            f"{request.describe()}, field spec.clusterQueue: ClusterQueue {name!r} does not serve "
            f"namespace {request.namespace!r} (its spec.namespaceSelector does not match the namespace's "
            "labels). Label the namespace to match, or point to another ClusterQueue",
        )
    return Decision.allow()


def _validate_cluster_queue(request: AdmissionRequest, lookups: Lookups) -> Decision:
    quotas = _mapping(_mapping(request.object).get("spec")).get("quotas")
    units = [_mapping(q).get("unit") for q in quotas] if isinstance(quotas, list) else []
    absent = [u for u in units if isinstance(u, str) and u and lookups.quota_unit(u) is None]
    if not absent:
        return Decision.allow()
    return Decision.deny(
        f"{request.describe()}, field spec.quotas[].unit: QuotaUnit {', '.join(map(repr, absent))} "
        "does not exist. Create the QuotaUnit first (kubectl get quotaunits lists them)",
        missing=[ObjectRef("QuotaUnit", "", u) for u in absent],
    )


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector; an empty selector matches everything."""
    match_labels = _mapping(selector.get("matchLabels"))
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    expressions = selector.get("matchExpressions")
    for expression in expressions if isinstance(expressions, list) else []:
        if not _expression_matches(_mapping(expression), labels):
            return False
    return True


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values")
    allowed = set(values) if isinstance(values, list) else set()
    present = isinstance(key, str) and key in labels
    if operator == "In":
        return present and labels[str(key)] in allowed
    if operator == "NotIn":
        return not present or labels[str(key)] not in allowed
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    return False


# ---------------------------------------------------------------------------------------------
# Validating webhook: ResourceClaims and ResourceClaimTemplates of managed namespaces, QuotaUnits.

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
    units, unit_warnings = _compiled_units(lookups)
    classes = {s.device_class_name for r in model.spec.requests for s in r.alternatives}
    device_classes = []
    for name in sorted(classes):
        manifest = lookups.device_class(name)
        parsed = _parse_or_none(manifest) if manifest is not None else None
        if isinstance(parsed, DeviceClass):
            device_classes.append(parsed)
    entry: dict[str, str] = {"name": "claim"}
    if isinstance(model, ResourceClaim):
        entry["resourceClaimName"] = model.name
        group = GroupObjects((_probe_pod(request.namespace, entry),), claims={model.key: model})
    else:
        entry["resourceClaimTemplateName"] = model.name
        group = GroupObjects((_probe_pod(request.namespace, entry),),
                             templates={f"{model.namespace}/{model.name}": model})
    try:
        charged = charge_group(group, units, Inventory.of(device_classes, {}), device_selected)
    except Unchargeable as err:
        text = str(err).replace(f"pod {request.namespace}/{_CLAIM_PROBE_POD} claim claim", request.describe())
        if err.permanent:
            return Decision.deny(f"{request.describe()}: draq cannot compute its charge: {text}", "Invalid", 422)
        return Decision.allow(warnings=[f"the charge is not known yet: {text}", *unit_warnings])
    return charged, unit_warnings


def _probe_pod(namespace: str, entry: Mapping[str, str]) -> Pod:
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": _CLAIM_PROBE_POD, "namespace": namespace},
                "spec": {"resourceClaims": [dict(entry)], "containers": []}}
    pod = parse_object(manifest, namespace)
    assert isinstance(pod, Pod)
    return pod


def _parse_or_none(manifest: JsonObject) -> object:
    try:
        return parse_object(manifest)
    except InvalidInput:
        return None


def _compiled_units(lookups: Lookups) -> tuple[list[CompiledUnit], list[str]]:
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
    cluster_queue_name = _mapping(_mapping(local_queue).get("spec")).get("clusterQueue")
    manifest = lookups.cluster_queue(cluster_queue_name) if isinstance(cluster_queue_name, str) else None
    if manifest is None:
        return Decision.allow()  # no queue known here: the pods that use the claim are checked
    try:
        cluster_queue = parse_cluster_queue(manifest)
    except InvalidInput as err:
        return Decision.allow(warnings=[f"whether the claim could ever fit is not known: {err}"])
    too_big = []
    for unit, needed in charged.total:
        ceiling = _ceiling(cluster_queue, unit)
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


def _ceiling(cluster_queue: ClusterQueue, unit: str) -> Quantity | None:
    """The most of a unit the queue could ever hold; None when unbounded (no quota, or free borrowing)."""
    quota = cluster_queue.quota(unit)
    if quota is None:
        return None
    if cluster_queue.cohort is None:
        return quota.nominal
    if quota.borrowing_limit is None:
        return None
    return quota.nominal + quota.borrowing_limit


def _validate_quota_unit(request: AdmissionRequest, lookups: Lookups) -> Decision:
    if request.object is None:
        return Decision.allow()
    try:
        compile_unit(parse_quota_unit(request.object), DraCel())
    except DraqError as err:
        return Decision.deny(f"{err}", "Invalid", 422)
    return Decision.allow()


_DRAQ_CHECKS: dict[str, Callable[[AdmissionRequest, Lookups], Decision]] = {
    "LocalQueue": _validate_local_queue,
    "ClusterQueue": _validate_cluster_queue,
    "QuotaUnit": _validate_quota_unit,
}
