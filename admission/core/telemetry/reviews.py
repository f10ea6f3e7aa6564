"""Webhook reviews for metrics, with bounded labels: a review names its kind and operation itself, so
anything outside the known vocabulary (a forged review can say anything) is counted as "Other"."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from admission.core.review.envelope import AdmissionRequest

OTHER = "Other"
REVIEWED_KINDS = frozenset({"Pod", "ResourceClaim", "ResourceClaimTemplate", "LocalQueue", "ClusterQueue",
                            "QuotaUnit"})
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
DENIAL_REASONS = frozenset({"Forbidden", "Invalid", "BadRequest", "InternalError"})
"""The reasons draq's decisions deny with (`Decision.deny`): a refused change, an invalid object, a
malformed review, a failure of draq's own."""


@dataclass(frozen=True, slots=True)
class ReviewOutcome:
    kind: str
    operation: str
    allowed: bool
    reason: str  # "" when allowed


def review_outcome(request: AdmissionRequest | None, document: Mapping[str, Any]) -> ReviewOutcome:
    """What a review was about and how it was answered; `request` None for a review that did not parse."""
    response = document.get("response")
    response = response if isinstance(response, Mapping) else {}
    allowed = response.get("allowed") is True
    status = response.get("status")
    reason = str(status.get("reason", "")) if isinstance(status, Mapping) else ""
    kind = request.kind.kind if request is not None else ""
    operation = request.operation if request is not None else ""
    return ReviewOutcome(
        kind=_bounded(kind, REVIEWED_KINDS) if kind else OTHER,
        operation=_bounded(operation, OPERATIONS) if operation else OTHER,
        allowed=allowed,
        reason="" if allowed else _bounded(reason, DENIAL_REASONS))


def _bounded(value: str, known: frozenset[str]) -> str:
    return value if value in known else OTHER
