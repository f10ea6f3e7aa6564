"""Validating webhook, Pods: a queue that exists, a valid group size, the gate, and labels that stay;
draq's own updates and deletions only under the current leadership epoch (`epoch_check`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from admission.core.labels import (
    DEFAULT_QUEUE_LABEL,
    GATE,
    GROUP_LABELS,
    GROUP_MIN_LABEL,
    MAX_GROUP_MIN,
    MIRROR_ANNOTATION,
    QUEUE_LABEL,
)
from admission.core.models import ObjectRef
from admission.core.review.device_policy import device_use, namespace_device_policy
from admission.core.review.envelope import AdmissionRequest, Decision
from admission.core.review.epoch_check import validate_stamped_write
from admission.core.review.lookups import GatingPolicy, Lookups
from admission.core.review.pending_cap import under_pending_cap
from admission.core.review.pod_mutation import maybe_stale_namespace
from admission.core.review.queue_choice import PodRoute, QueueChoice, namespace_is_managed, pod_route
from admission.core.review.readers import gates_of, labels_of, mapping
from admission.core.review.topology_check import topology_level_known
from admission.core.review.unmanaged import queue_outside_management


def validate_pod(request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy) -> Decision:
    if request.operation == "DELETE":
        return validate_stamped_write(request, lookups, policy)
    if request.operation == "UPDATE":
        return _validate_pod_update(request, lookups, policy)
    namespace_labels = lookups.namespace_labels(request.namespace)
    if namespace_labels is None:
        # The API server only sends pods of namespaces that exist: draq's view is behind (and a second
        # look did not find it either). Refuse rather than let a pod through that may need the gate.
        return Decision.deny(
            f"{request.describe()}: namespace {request.namespace!r} is not known to draq yet, so draq "
            "cannot tell whether the pod must wait for a queue; create the pod again in a moment",
            "Forbidden", 403, missing=[ObjectRef("Namespace", "", request.namespace)],
        )
    route = pod_route(request.object, request.namespace, namespace_labels, lookups, policy)
    queue = route.queue
    if queue is None:
        return _off_queue(request, namespace_labels, route, policy)
    return _first_denial(
        lambda: _queue_exists(request, queue, lookups),
        lambda: _group_min_valid(request),
        lambda: topology_level_known(request, queue, lookups),
        lambda: _not_bound_directly(request, queue),
        lambda: _gated(request, queue),
        lambda: under_pending_cap(request, queue, lookups, policy),
        lambda: Decision.allow(missing=route.exemption.missing),
    )


def _off_queue(request: AdmissionRequest, namespace_labels: Mapping[str, str], route: PodRoute,
               policy: GatingPolicy) -> Decision:
    """A pod outside every queue: refused in a managed namespace whose device policy requires a queue when
    it uses devices (static pods' mirrors and pods of verified exempt owners excepted)."""
    refusal = queue_outside_management(request, namespace_labels)
    if refusal is not None:
        return refusal
    stale = maybe_stale_namespace(request, namespace_labels)
    mirror = mapping(mapping(request.object).get("metadata")).get("annotations")
    if (route.exemption.exempt or not namespace_is_managed(namespace_labels)
            or mapping(mirror).get(MIRROR_ANNOTATION)):
        return Decision.allow(missing=stale)
    uses = device_use(request.object)
    device_policy = namespace_device_policy(namespace_labels, policy)
    if not uses or not device_policy.requires_queue:
        return Decision.allow(missing=stale)
    owner = f" It is not exempt by its owner: {route.exemption.note}." if route.exemption.note else ""
    return Decision.deny(
        f"{request.describe()}: namespace {request.namespace!r} requires pods that use devices to go through "
        f"a draq queue ({device_policy.source}), and this pod uses {'; '.join(uses)} but names no queue.{owner} "
        f"Add the label {QUEUE_LABEL} naming a LocalQueue (kubectl get localqueues -n {request.namespace}), or "
        f"give the namespace a default queue with the label {DEFAULT_QUEUE_LABEL}",
        missing=[*stale, *route.exemption.missing],
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
        return Decision.deny(_missing_queue_message(request, queue), missing=[ref])
    cluster_queue = mapping(local_queue.get("spec")).get("clusterQueue")
    if isinstance(cluster_queue, str) and lookups.cluster_queue(cluster_queue) is None:
        return Decision.allow(
            warnings=[f"LocalQueue {queue.name} points to ClusterQueue {cluster_queue}, which does not "
                      "exist: the pod stays gated until it does"],
            missing=[ObjectRef("ClusterQueue", "", cluster_queue)],
        )
    return Decision.allow()


def _missing_queue_message(request: AdmissionRequest, queue: QueueChoice) -> str:
    create = ("Create it (apiVersion draq.io/v1alpha1, kind LocalQueue, spec.clusterQueue; "
              f"kubectl get localqueues -n {request.namespace} lists those that exist)")
    if queue.from_namespace:
        return (f"{request.describe()}: namespace {request.namespace!r} has the label "
                f"{DEFAULT_QUEUE_LABEL}={queue.name}, so every pod created in it goes to LocalQueue "
                f"{queue.name!r}, which does not exist in the namespace. {create}, or take the namespace "
                f"out of draq until it does: kubectl label namespace {request.namespace} {DEFAULT_QUEUE_LABEL}-")
    return (f"{request.describe()}: LocalQueue {queue.name!r} (from {queue.source}) does not exist in "
            f"namespace {request.namespace!r}. {create}, or name an existing one.")


def _group_min_valid(request: AdmissionRequest) -> Decision:
    value = labels_of(request.object).get(GROUP_MIN_LABEL)
    if value is None or group_min_value(value) is not None:
        return Decision.allow()
    return Decision.deny(
        f"{request.describe()}, label {GROUP_MIN_LABEL}: {_abridged(value)} is not a group size; "
        f"use a whole number of pods from 1 to {MAX_GROUP_MIN}",
        "Invalid",
        422,
    )


def group_min_value(text: str) -> int | None:
    """The group size a `draq.io/group-min` value gives: a whole number 1..MAX_GROUP_MIN, else None.

    The digits are counted before converting, so a value of thousands of digits is refused like any
    other bad value (Python's int() itself refuses strings of more than 4300 digits).
    """
    if not (text.isascii() and text.isdigit()):
        return None
    significant = text.lstrip("0")
    if not significant or len(significant) > len(str(MAX_GROUP_MIN)):
        return None
    size = int(significant)
    return size if size <= MAX_GROUP_MIN else None


def _abridged(value: str, limit: int = 40) -> str:
    """A label value for a message: quoted, and cut with its length when long."""
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}... ({len(value)} characters)"


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
        return validate_stamped_write(request, lookups, policy)  # releases: the gate is draq's to remove
    old_labels, new_labels = labels_of(request.old_object), labels_of(request.object)
    if GATE in gates_of(request.old_object):
        return _validate_gated_update(request, lookups, policy, old_labels, new_labels)
    queue = old_labels.get(QUEUE_LABEL)
    if not queue:
        return Decision.allow()
    changed = [key for key in GROUP_LABELS if old_labels.get(key) != new_labels.get(key)]
    if changed:
        moves = ", ".join(f"{k} {old_labels.get(k)!r} -> {new_labels.get(k)!r}" for k in changed)
        return Decision.deny(
            f"{request.describe()}, metadata.labels: the pod is admitted and charged to LocalQueue "
            f"{queue!r}, so its queue and group labels cannot change ({moves}). "
            "To move it, delete the pod and create it again with the new labels",
        )
    return Decision.allow()


def _validate_gated_update(
    request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy,
    old_labels: Mapping[str, str], new_labels: Mapping[str, str],
) -> Decision:
    """A pod that carries draq's gate, whatever its labels: the gate stays until draq removes it, and
    the queue it waits in stays (removing the label first must not make the gate removable)."""
    queue = old_labels.get(QUEUE_LABEL)
    if GATE not in gates_of(request.object):
        if queue:
            why = (f"it does so when LocalQueue {queue!r} admits the pod's group. "
                   f"See why it waits with: kubectl describe podgroups -n {request.namespace}")
        else:
            why = (f"it does so when the pod's LocalQueue admits its group, and this pod names no queue "
                   f"(label {QUEUE_LABEL}), so it is never admitted. Delete the pod and create it again "
                   f"with label {QUEUE_LABEL} naming a LocalQueue")
        return Decision.deny(
            f"{request.describe()}, field spec.schedulingGates: only draq ({policy.draq_user}) removes the "
            f"gate {GATE}; {why}",
        )
    new_queue = new_labels.get(QUEUE_LABEL)
    if queue and new_queue != queue:
        change = "removed" if not new_queue else f"changed to {_abridged(new_queue)}"
        return Decision.deny(
            f"{request.describe()}, metadata.labels: label {QUEUE_LABEL} cannot be {change} while the pod "
            f"carries the gate {GATE}: the pod waits for admission by LocalQueue {queue!r}, and only that "
            "queue's admission releases it. To move it to another queue, delete the pod and create it "
            f"again with the new {QUEUE_LABEL} label",
        )
    if new_queue and not queue:
        return _queue_exists(request, QueueChoice(new_queue, f"label {QUEUE_LABEL}"), lookups)
    if old_labels.get(GROUP_MIN_LABEL) != new_labels.get(GROUP_MIN_LABEL):
        return _group_min_valid(request)
    return Decision.allow()
