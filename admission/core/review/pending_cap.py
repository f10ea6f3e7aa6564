"""Pod CREATE: a LocalQueue holds at most so many pending groups, so one tenant's abandoned groups cannot
grow without bound. Only a pod that would start a new group is refused; members of groups that exist
(pending, admitted or running) always pass.

The operator writes a group's PodGroup a pass after its first pod, so a burst of creations (hundreds a
second) would find the count behind. The webhook therefore counts the groups it let start itself
(`started_group`) as pending PodGroups until their own appear (`webhook.cache`), and their later members
pass as members of an existing group."""

from __future__ import annotations

from admission.core.labels import GROUP_LABEL, QUEUE_LABEL
from admission.core.review.envelope import AdmissionRequest, Decision
from admission.core.review.lookups import GatingPolicy, Lookups
from admission.core.review.queue_choice import QueueChoice
from admission.core.review.readers import labels_of, mapping

CAP_FIELD = "spec.maxPendingGroups"


def pending_cap(local_queue: object, policy: GatingPolicy) -> tuple[int, str]:
    """The LocalQueue's cap on pending groups (0: none) and where it comes from."""
    value = mapping(mapping(local_queue).get("spec")).get("maxPendingGroups")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value, f"its {CAP_FIELD}"
    return policy.max_pending_groups, "the webhook's default, as the queue sets no " + CAP_FIELD


def under_pending_cap(request: AdmissionRequest, queue: QueueChoice, lookups: Lookups,
                      policy: GatingPolicy) -> Decision:
    group = labels_of(request.object).get(GROUP_LABEL)
    local_queue = lookups.local_queue(request.namespace, queue.name)
    if not group or local_queue is None or lookups.pod_group(request.namespace, group) is not None:
        return Decision.allow()
    cap, source = pending_cap(local_queue, policy)
    pending = lookups.pending_groups(request.namespace, queue.name)
    if cap == 0 or pending < cap:
        return Decision.allow()
    return Decision.deny(
        f"{request.describe()} would start group {group!r} in LocalQueue {request.namespace}/{queue.name}, which "
        f"already holds {pending} pending groups, at or over its cap of {cap} ({source}). Wait until some are "
        f"admitted, delete groups nobody waits for (kubectl get podgroups -n {request.namespace}), or ask the "
        f"queue's owner to raise {CAP_FIELD}",
        "Forbidden", 403,
    )


def started_group(request: AdmissionRequest, lookups: Lookups, policy: GatingPolicy) -> tuple[str, str] | None:
    """The LocalQueue and group that an allowed pod CREATE starts: its group has no PodGroup yet and its
    LocalQueue has a cap on pending groups. None for any other request (a dry run starts nothing)."""
    if request.operation != "CREATE" or request.kind.kind != "Pod" or request.kind.group or request.sub_resource \
            or request.dry_run:
        return None
    labels = labels_of(request.object)
    group, queue = labels.get(GROUP_LABEL), labels.get(QUEUE_LABEL)
    if not group or not queue or lookups.pod_group(request.namespace, group) is not None:
        return None
    local_queue = lookups.local_queue(request.namespace, queue)
    if local_queue is None or pending_cap(local_queue, policy)[0] == 0:
        return None
    return queue, group
