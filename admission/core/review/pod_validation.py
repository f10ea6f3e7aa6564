"""Validating webhook, Pods: a queue that exists, a valid group size, the gate, and labels that stay."""

from __future__ import annotations

from collections.abc import Callable

from admission.core.labels import GATE, GROUP_LABELS, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.review.envelope import AdmissionRequest, Decision, ObjectRef
from admission.core.review.lookups import GatingPolicy, Lookups
from admission.core.review.pod_mutation import maybe_stale_namespace
from admission.core.review.queue_choice import QueueChoice, pod_queue
from admission.core.review.readers import gates_of, labels_of, mapping


def validate_pod(request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy) -> Decision:
    if request.operation == "UPDATE":
        return _validate_pod_update(request, lookups, policy)
    namespace_labels = lookups.namespace_labels(request.namespace)
    if namespace_labels is None:
        return Decision.allow(missing=[ObjectRef("Namespace", "", request.namespace)])
    queue = pod_queue(request.object, namespace_labels)
    if queue is None:
        return Decision.allow(missing=maybe_stale_namespace(request, namespace_labels))
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
    cluster_queue = mapping(local_queue.get("spec")).get("clusterQueue")
    if isinstance(cluster_queue, str) and lookups.cluster_queue(cluster_queue) is None:
        return Decision.allow(
            warnings=[f"LocalQueue {queue.name} points to ClusterQueue {cluster_queue}, which does not "
                      "exist: the pod stays gated until it does"],
            missing=[ObjectRef("ClusterQueue", "", cluster_queue)],
        )
    return Decision.allow()


def _group_min_valid(request: AdmissionRequest) -> Decision:
    value = labels_of(request.object).get(GROUP_MIN_LABEL)
    if value is None or (value.isdigit() and value.isascii() and 0 < int(value) <= 100_000):
        return Decision.allow()
    return Decision.deny(
        f"{request.describe()}, label {GROUP_MIN_LABEL}: {value!r} is not a group size; "
        "use a whole number of pods from 1 to 100000",
        "Invalid",
        422,
    )


def _not_bound_directly(request: AdmissionRequest, queue: QueueChoice) -> Decision:
    node = mapping(mapping(request.object).get("spec")).get("nodeName")
    if not node:
        return Decision.allow()
    return Decision.deny(
        f"{request.describe()}, field spec.nodeName: a pod of LocalQueue {queue.name!r} must go "
        "through the scheduler to be admitted; use a nodeSelector or node affinity instead of nodeName",
        "Invalid",
        422,
    )


def _gated(request: AdmissionRequest, queue: QueueChoice) -> Decision:
    if GATE in gates_of(request.object):
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
    old_labels, new_labels = labels_of(old), labels_of(new)
    queue = old_labels.get(QUEUE_LABEL)
    if not queue:
        return Decision.allow()
    was_gated = GATE in gates_of(old)
    if was_gated and GATE not in gates_of(new):
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

