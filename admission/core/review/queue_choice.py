"""Which LocalQueue a pod goes to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from admission.core.labels import DEFAULT_QUEUE_LABEL, MANAGED_LABEL, MIRROR_ANNOTATION, QUEUE_LABEL
from admission.core.review.device_policy import NOT_EXEMPT, OwnerExemption, owner_exemption
from admission.core.review.envelope import JsonObject
from admission.core.review.lookups import GatingPolicy, Lookups
from admission.core.review.readers import labels_of, mapping


def namespace_is_managed(labels: Mapping[str, str]) -> bool:
    return labels.get(MANAGED_LABEL) == "true" or bool(labels.get(DEFAULT_QUEUE_LABEL))


@dataclass(frozen=True, slots=True)
class QueueChoice:
    """The LocalQueue a pod goes to, and where that name came from (for messages)."""

    name: str
    source: str
    from_namespace: bool = False  # the namespace's default queue (the mutating webhook copies it to the pod)


def pod_queue(pod: JsonObject | None, namespace_labels: Mapping[str, str]) -> QueueChoice | None:
    """The pod's own label first, then its namespace's default; None for an unmanaged pod."""
    if not namespace_is_managed(namespace_labels):
        return None
    if mapping(mapping(mapping(pod).get("metadata")).get("annotations")).get(MIRROR_ANNOTATION):
        return None
    own = labels_of(pod).get(QUEUE_LABEL)
    default = namespace_labels.get(DEFAULT_QUEUE_LABEL)
    if own and own != default:
        return QueueChoice(own, f"label {QUEUE_LABEL}")
    if default:
        return QueueChoice(default, f"the namespace label {DEFAULT_QUEUE_LABEL}", from_namespace=True)
    return None


@dataclass(frozen=True, slots=True)
class PodRoute:
    """Where a pod at CREATE goes: its queue (None: outside every queue) and what its owner exempts."""

    queue: QueueChoice | None
    exemption: OwnerExemption = NOT_EXEMPT


def pod_route(pod: JsonObject | None, namespace: str, namespace_labels: Mapping[str, str], lookups: Lookups,
              policy: GatingPolicy) -> PodRoute:
    """A pod of a verified exempt owner goes outside every queue; any other pod to `pod_queue`'s choice."""
    if not namespace_is_managed(namespace_labels):
        return PodRoute(None)
    exemption = owner_exemption(pod, namespace, lookups, policy)
    if exemption.exempt:
        return PodRoute(None, exemption)
    return PodRoute(pod_queue(pod, namespace_labels), exemption)


