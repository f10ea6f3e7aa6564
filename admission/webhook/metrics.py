"""The webhooks' Prometheus metrics: request latency, reviews answered and denials by reason.

Labels are bounded by `admission.core.telemetry.review_outcome` (known kinds, operations and reasons,
anything else "Other"), whatever a review claims to be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from admission.core.review import AdmissionRequest
from admission.core.telemetry import review_outcome

WEBHOOKS = ("mutate", "validate")
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class WebhookMetrics:
    """A `handlers.ReviewObserver` that counts into `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._latency = Histogram("draq_webhook_request_duration_seconds", "Time to answer one AdmissionReview, "
                                  "from the request's arrival to the answer.", ["webhook"], registry=registry,
                                  buckets=LATENCY_BUCKETS)
        self._reviews = Counter("draq_webhook_reviews_total", "AdmissionReviews answered, by webhook and whether "
                                "they were allowed.", ["webhook", "allowed"], registry=registry)
        self._denials = Counter("draq_webhook_denials_total", "AdmissionReviews denied, by webhook, kind, "
                                "operation and reason (Forbidden, Invalid, BadRequest, InternalError).",
                                ["webhook", "kind", "operation", "reason"], registry=registry)
        for webhook in WEBHOOKS:  # series exist before the first review, so rates start from 0
            self._latency.labels(webhook)
            for allowed in ("true", "false"):
                self._reviews.labels(webhook, allowed)

    def reviewed(self, webhook: str, request: AdmissionRequest | None, document: Mapping[str, Any],
                 seconds: float) -> None:
        outcome = review_outcome(request, document)
        self._latency.labels(webhook).observe(seconds)
        self._reviews.labels(webhook, "true" if outcome.allowed else "false").inc()
        if not outcome.allowed:
            self._denials.labels(webhook, outcome.kind, outcome.operation, outcome.reason).inc()
