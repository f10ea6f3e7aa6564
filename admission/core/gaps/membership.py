"""Where a pod stands towards draq's queues: admitted, in a queue without an admission, or outside every queue."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from admission.core.labels import DEFAULT_QUEUE_LABEL, GROUP_LABEL, MIRROR_ANNOTATION, QUEUE_LABEL
from admission.core.models import Pod
from admission.core.quota import LocalQueue, PodGroup

TERMINAL = frozenset({"Succeeded", "Failed"})


class Place(StrEnum):
    ADMITTED = "admitted"  # a member of a group draq admitted: charged in its ClusterQueue
    BYPASSED = "bypassed"  # belongs to a queue, but no admission covers it
    OUTSIDE = "outside"  # in no queue at all


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
    names a default queue (the webhook would have labelled it); DaemonSet and static pods never are."""
    labels = namespace_labels.get(pod.namespace, {})
    if pod.annotations.get(MIRROR_ANNOTATION) or (pod.meta.controller or ("", ""))[0] == "DaemonSet":
        return PodPlace(Place.OUTSIDE, reason="draq leaves DaemonSet and static pods alone")
    queue = pod.labels.get(QUEUE_LABEL)
    if not queue:
        default = labels.get(DEFAULT_QUEUE_LABEL)
        if default:
            cq = _cluster_queue(local_queues, pod.namespace, default)
            return PodPlace(Place.BYPASSED, cq, reason=f"namespace {pod.namespace} has the default queue {default}, "
                            f"but the pod has no {QUEUE_LABEL} label: the webhook did not see it")
        return PodPlace(Place.OUTSIDE, reason=f"namespace {pod.namespace} is not managed by draq")
    cq = _cluster_queue(local_queues, pod.namespace, queue)
    group_name = pod.labels.get(GROUP_LABEL)
    if not group_name:
        return PodPlace(Place.BYPASSED, cq, reason=f"the pod has no {GROUP_LABEL} label: the webhook did not see it")
    group = f"{pod.namespace}/{group_name}"
    return _group_place(pod, group, cq, pod_groups.get(group))


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
        self.pod_groups = {g.key: g for g in pod_groups}

    def place(self, pod: Pod) -> PodPlace:
        return place_of(pod, self.namespace_labels, self.local_queues, self.pod_groups)


def _cluster_queue(local_queues: Mapping[str, LocalQueue], namespace: str, queue: str) -> str:
    local = local_queues.get(f"{namespace}/{queue}")
    return local.cluster_queue if local is not None else ""
