"""No silent bypass: a pod or a workload that names a draq queue in a namespace draq does not manage is
refused, never let run outside every quota (the webhook configuration sends exactly these: an objectSelector
on the queue label in every namespace neither managed scope selects)."""

from __future__ import annotations

from collections.abc import Mapping

from admission.core.labels import DEFAULT_QUEUE_LABEL, MANAGED_LABEL, MIRROR_ANNOTATION, QUEUE_LABEL
from admission.core.models import ObjectRef
from admission.core.review.envelope import AdmissionRequest, Decision
from admission.core.review.queue_choice import namespace_is_managed
from admission.core.review.readers import labels_of, mapping


def queue_outside_management(request: AdmissionRequest, namespace_labels: Mapping[str, str]) -> Decision | None:
    """The refusal of an object that names a queue where draq does not manage, or None when that is not the case.

    The refusal asks for a fresh look at the namespace first (`missing`): its labels may have just changed."""
    queue = labels_of(request.object).get(QUEUE_LABEL)
    if not queue or namespace_is_managed(namespace_labels):
        return None
    annotations = mapping(mapping(mapping(request.object).get("metadata")).get("annotations"))
    if annotations.get(MIRROR_ANNOTATION):
        return None  # a static pod's mirror: no webhook can stop the kubelet running it
    ns = request.namespace
    return Decision.deny(
        f"{request.describe()} names draq queue {queue!r} (label {QUEUE_LABEL}), but namespace {ns!r} is not "
        f"managed by draq, so nothing would gate it and it would run outside every quota. Let draq manage the "
        f"namespace (kubectl label namespace {ns} {MANAGED_LABEL}=true, with LocalQueue {queue!r} in it, or "
        f"{DEFAULT_QUEUE_LABEL}=<LocalQueue>), or remove the label {QUEUE_LABEL} to run outside draq",
        "Forbidden", 403, missing=[ObjectRef("Namespace", "", ns)],
    )



