"""Mutating webhook, Pod CREATE: gate and label the pods of managed namespaces."""

from __future__ import annotations

from collections.abc import Mapping

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL, label_value
from admission.core.models import ObjectRef
from admission.core.native_gangs import GangApi, pod_reference, unserved_reference
from admission.core.review.envelope import AdmissionRequest, Decision, JsonObject, PatchOperation
from admission.core.review.lookups import DEFAULT_POLICY, GatingPolicy, Lookups
from admission.core.review.queue_choice import QueueChoice, namespace_is_managed, pod_queue, pod_route
from admission.core.review.readers import gates_of, labels_of, mapping
from admission.core.workloads import Membership, membership


def mutate(request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy = DEFAULT_POLICY) -> Decision:
    """The mutating webhook: gate and label managed pods at CREATE; everything else passes."""
    if request.kind.kind != "Pod" or request.kind.group or request.operation != "CREATE":
        return Decision.allow()
    if request.sub_resource:
        return Decision.allow()
    namespace_labels = lookups.namespace_labels(request.namespace)
    if namespace_labels is None:
        return Decision.allow(missing=[ObjectRef("Namespace", "", request.namespace)])
    pod = request.object
    unserved = unserved_reference(pod, policy.gang_api) if namespace_is_managed(namespace_labels) else ""
    if unserved:
        return Decision.deny(f"{request.describe()}: {unserved}", "Invalid", 422)
    route = pod_route(pod, request.namespace, namespace_labels, lookups, policy)
    member = membership(pod, lookups, policy.workload_kinds) if isinstance(pod, Mapping) else Membership()
    queue = None if route.exemption.exempt else _queue(pod, namespace_labels, member)
    if queue is None or pod is None or not isinstance(pod.get("spec"), Mapping):
        # The validating webhook refuses a pod that uses devices outside a queue where the policy says so.
        # An owner not read yet may carry the queue label: ask for it too.
        unread = [member.missing] if member.missing is not None and namespace_is_managed(namespace_labels) else []
        return Decision.allow(missing=[*maybe_stale_namespace(request, namespace_labels), *unread])
    labels, warnings, missing = _labels_to_add(request, pod, queue, member)
    if route.exemption.note:
        warnings.append(f"{request.describe()} waits in LocalQueue {queue.name} like any pod: {route.exemption.note}")
        missing.extend(route.exemption.missing)
    patch = [*_label_patch(pod, labels), *_gate_patch(pod)]
    if policy.native_gangs and policy.gang_api is not None:
        group = labels.get(GROUP_LABEL) or labels_of(pod).get(GROUP_LABEL, "")
        patch.extend(_gang_patch(pod, group, policy.gang_api))
    return Decision.allow(patch, warnings, missing)


def _gang_patch(pod: JsonObject, group: str, api: GangApi) -> list[PatchOperation]:
    """Make the pod a member of its group's native gang, unless it names a gang itself or uses a
    ResourceClaim by name: such a claim may be shared with other members, and the scheduler (1.35) does
    not allocate a claim shared inside a gang (draq's own admission still keeps the group whole)."""
    spec = mapping(pod.get("spec"))
    if not group or spec.get("workloadRef") is not None or spec.get("schedulingGroup") is not None:
        return []
    entries = spec.get("resourceClaims")
    if isinstance(entries, list) and any(isinstance(e, Mapping) and e.get("resourceClaimName") for e in entries):
        return []
    return [PatchOperation("add", ("spec", api.pod_field), pod_reference(api, group))]


def maybe_stale_namespace(request: AdmissionRequest, namespace_labels: Mapping[str, str]) -> list[ObjectRef]:
    """A queue-labelled pod in a namespace that looks unmanaged: the namespace's labels may have just
    changed (the API server only sends pods of managed namespaces), so ask for a fresh look."""
    if namespace_is_managed(namespace_labels) or not labels_of(request.object).get(QUEUE_LABEL):
        return []
    return [ObjectRef("Namespace", "", request.namespace)]


def _queue(pod: JsonObject | None, namespace_labels: Mapping[str, str], member: Membership) -> QueueChoice | None:
    """The pod's own queue label, else the one on its top-level owner, else the namespace default."""
    if member.queue and not labels_of(pod).get(QUEUE_LABEL) and namespace_is_managed(namespace_labels):
        return QueueChoice(member.queue, f"label {QUEUE_LABEL} on {member.top}")
    return pod_queue(pod, namespace_labels)


def _labels_to_add(
    request: AdmissionRequest, pod: JsonObject, queue: QueueChoice, member: Membership
) -> tuple[dict[str, str], list[str], list[ObjectRef]]:
    present = labels_of(pod)
    wanted: dict[str, str] = {QUEUE_LABEL: queue.name}
    warnings = _membership_warnings(member)
    group = member.group or (member.missing.name if member.missing is not None else "")
    if present.get(GROUP_LABEL):
        # The user's group; its minimum is the user's too (or the PodGroup's minMember).
        if member.gang and present[GROUP_LABEL] != label_value(member.group):
            warnings.append(f"label {GROUP_LABEL}={present[GROUP_LABEL]!r} contradicts the owner chain, which makes "
                            f"the pod a member of group {label_value(member.group)!r} ({member.top}): remove the "
                            "label from the pod template, or the group waits")
    elif group:
        wanted[GROUP_LABEL] = label_value(group)
        wanted[GROUP_MIN_LABEL] = str(member.minimum or 1)
    else:
        wanted[GROUP_LABEL] = label_value(_lone_pod_group(request, pod))
        wanted[GROUP_MIN_LABEL] = "1"
    # Empty values count as absent; the queue label is set to the queue chosen (it may come from the
    # namespace default when the pod's own label is empty).
    to_set = {k: v for k, v in wanted.items() if not present.get(k)}
    if present.get(QUEUE_LABEL) != queue.name:
        to_set[QUEUE_LABEL] = queue.name
    return to_set, warnings, [member.missing] if member.missing is not None else []


def _membership_warnings(member: Membership) -> list[str]:
    warnings = [member.problem] if member.problem else []
    if member.missing is not None:
        warnings.append(f"{member.missing} is not known to draq yet (deleted, or draq may not read it): "
                        f"the group waits until draq can read it (group minimum 1 until then)")
    if member.unknown_owner:
        warnings.append(f"owner {member.unknown_owner} is not a workload kind draq groups, or its integration is "
                        "off: the pod is its own group")
    return warnings


def _lone_pod_group(request: AdmissionRequest, pod: JsonObject) -> str:
    metadata = mapping(pod.get("metadata"))
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
    spec = mapping(pod.get("spec"))
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list):
        return [PatchOperation("add", ("spec", "schedulingGates"), [{"name": GATE}])]
    if GATE in gates_of(pod):
        return []
    return [PatchOperation("add", ("spec", "schedulingGates", "-"), {"name": GATE})]

