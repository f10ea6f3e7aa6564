"""Which LocalQueue a pod goes to, and label values made from names."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from admission.core.labels import DEFAULT_QUEUE_LABEL, MANAGED_LABEL, MIRROR_ANNOTATION, QUEUE_LABEL
from admission.core.review.envelope import JsonObject
from admission.core.review.readers import controller_owner, labels_of, mapping

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_VALUE_MAX = 63


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


def label_value(name: str) -> str:
    """A valid label value for a name: unchanged when it fits, else shortened with a hash suffix."""
    if len(name) <= _LABEL_VALUE_MAX and _LABEL_VALUE.match(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    cleaned = re.sub(r"[^-A-Za-z0-9_.]", "-", name)[: _LABEL_VALUE_MAX - 11].strip("-_.")
    return f"{cleaned}-{digest}" if cleaned else digest

