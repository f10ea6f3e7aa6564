"""Which LocalQueue a pod goes to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from admission.core.labels import DEFAULT_QUEUE_LABEL, MANAGED_LABEL, MIRROR_ANNOTATION, QUEUE_LABEL
from admission.core.review.envelope import JsonObject
from admission.core.review.readers import controller_owner, labels_of, mapping


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
    if mapping(mapping(mapping(pod).get("metadata")).get("annotations")).get(MIRROR_ANNOTATION):
        return None
    if controller_owner(pod).get("kind") == "DaemonSet":
        return None
    own = labels_of(pod).get(QUEUE_LABEL)
    if own:
        return QueueChoice(own, f"label {QUEUE_LABEL}")
    default = namespace_labels.get(DEFAULT_QUEUE_LABEL)
    if default:
        return QueueChoice(default, f"the namespace label {DEFAULT_QUEUE_LABEL}")
    return None



