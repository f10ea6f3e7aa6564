"""Where a pod stands towards draq's queues: admitted, in a queue without an admission, or outside every queue."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

from admission.core.labels import (
    ALLOW_OFF_QUEUE,
    DEFAULT_QUEUE_LABEL,
    DEVICE_POLICY_LABEL,
    GROUP_LABEL,
    MANAGED_LABEL,
    MIRROR_ANNOTATION,
    QUEUE_LABEL,
)
from admission.core.models import Pod
from admission.core.quota import LocalQueue, PodGroup

TERMINAL = frozenset({"Succeeded", "Failed"})


class Place(StrEnum):
    ADMITTED = "admitted"  # a member of a group draq admitted: charged in its ClusterQueue
    BYPASSED = "bypassed"  # belongs to a queue, but no admission covers it
    OUTSIDE = "outside"  # in no queue at all
    ALLOWED = "allowed"  # in a managed namespace, in no queue, as its device policy or an owner exemption allows


@dataclass(frozen=True, slots=True)
class PodPlace:
    place: Place
    cluster_queue: str = ""
    group: str = ""  # `namespace/name` of the pod's group, if it names one
    reason: str = ""  # why a pod is bypassed or outside, for messages


def is_live(pod: Pod) -> bool:
    """Not finished: a pod that succeeded or failed holds no devices any more."""
    return pod.phase not in TERMINAL


def place_of(pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]], local_queues: Mapping[str, LocalQueue],
             pod_groups: Mapping[str, PodGroup]) -> PodPlace:
    """The pod's place. A pod is in a queue when it carries draq's queue label, or when its namespace
    names a default queue (the webhook would have labelled it); static pods never are. A pod of a managed
    namespace outside every queue is allowed there when the namespace's device policy is `allow` or its
    controller owner may be exempt (the report cannot tell whether the webhook verified it)."""
    labels = namespace_labels.get(pod.namespace, {})
    if pod.annotations.get(MIRROR_ANNOTATION):
        return PodPlace(Place.OUTSIDE, reason="draq leaves static pods alone")
    queue = pod.labels.get(QUEUE_LABEL)
    if not queue:
        return _without_queue(pod, labels, local_queues)
    cq = _cluster_queue(local_queues, pod.namespace, queue)
    group_name = pod.labels.get(GROUP_LABEL)
    if not group_name:
        return PodPlace(Place.BYPASSED, cq, reason=f"the pod has no {GROUP_LABEL} label: the webhook did not see it")
    group = f"{pod.namespace}/{group_name}"
    return _group_place(pod, group, cq, pod_groups.get(group))


def _without_queue(pod: Pod, labels: Mapping[str, str], local_queues: Mapping[str, LocalQueue]) -> PodPlace:
    default = labels.get(DEFAULT_QUEUE_LABEL)
    if labels.get(MANAGED_LABEL) != "true" and not default:
        return PodPlace(Place.OUTSIDE, reason=f"namespace {pod.namespace} is not managed by draq")
    if pod.meta.controller is not None:
        kind, name = pod.meta.controller
        return PodPlace(Place.ALLOWED, reason=f"a pod of {kind} {name} outside every queue, as the webhook allows "
                        "when its owner kind is exempt and the owner is verified")
    if default:
        cq = _cluster_queue(local_queues, pod.namespace, default)
        return PodPlace(Place.BYPASSED, cq, reason=f"namespace {pod.namespace} has the default queue {default}, "
                        f"but the pod has no {QUEUE_LABEL} label: the webhook did not see it")
    if labels.get(DEVICE_POLICY_LABEL) == ALLOW_OFF_QUEUE:
        return PodPlace(Place.ALLOWED, reason=f"namespace {pod.namespace} allows devices outside queues "
                        f"({DEVICE_POLICY_LABEL}={ALLOW_OFF_QUEUE})")
    return PodPlace(Place.ALLOWED, reason=f"namespace {pod.namespace} names no default queue and no "
                    f"{DEVICE_POLICY_LABEL}: allowed only if the webhook's default device policy is "
                    f"{ALLOW_OFF_QUEUE}, else the webhook did not see the pod")


def _group_place(pod: Pod, group: str, cq: str, pod_group: PodGroup | None) -> PodPlace:
    if pod_group is None or not pod_group.holds_quota:
        phase = pod_group.phase.value if pod_group is not None else "no PodGroup"
        return PodPlace(Place.BYPASSED, cq, group, f"group {group} is not admitted ({phase})")
    planned = {name for name, _ in pod_group.plan.nodes}
    if planned and pod.name not in planned:
        return PodPlace(Place.BYPASSED, pod_group.cluster_queue, group,
                        f"group {group} was admitted without pod {pod.name} in its plan")
    return PodPlace(Place.ADMITTED, pod_group.cluster_queue, group)


class Placer:
    """`place_of` for the pods of one gap input."""

    def __init__(self, namespace_labels: Mapping[str, Mapping[str, str]], local_queues: Mapping[str, LocalQueue],
                 pod_groups: Iterable[PodGroup]) -> None:
        self.namespace_labels = namespace_labels
        self.local_queues = local_queues
        self._pod_groups = pod_groups

    @cached_property
    def pod_groups(self) -> dict[str, PodGroup]:
        """By key, made at the first `place`: a report that places no pod never indexes a flood's records."""
        return {g.key: g for g in self._pod_groups}

    def place(self, pod: Pod) -> PodPlace:
        return place_of(pod, self.namespace_labels, self.local_queues, self.pod_groups)


def _cluster_queue(local_queues: Mapping[str, LocalQueue], namespace: str, queue: str) -> str:
    local = local_queues.get(f"{namespace}/{queue}")
    return local.cluster_queue if local is not None else ""
