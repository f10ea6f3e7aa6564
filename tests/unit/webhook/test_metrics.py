"""The webhooks' metrics: every review is timed and counted, denials by bounded kind, operation and reason."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from admission.core.labels import QUEUE_LABEL
from admission.core.review import GatingPolicy
from admission.webhook.configurations import MUTATE_PATH, VALIDATE_PATH
from admission.webhook.handlers import AdmissionHandlers
from admission.webhook.metrics import WebhookMetrics
from admission.webhook.server import build_app

from .builders import POD, cluster, pod, review


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def post_all(registry: CollectorRegistry, posts: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    handlers = AdmissionHandlers(cluster(), GatingPolicy(), observer=WebhookMetrics(registry))
    answers = []
    async with TestClient(TestServer(build_app(handlers))) as client:
        for path, body in posts:
            response = await client.post(path, data=body, headers={"Content-Type": "application/json"})
            assert response.status == 200
            answers.append(await response.json())
    return answers


def encoded(document: dict[str, Any]) -> bytes:
    return json.dumps(document).encode()


def test_reviews_are_timed_and_denials_counted_by_kind_operation_and_reason() -> None:
    registry = CollectorRegistry()
    managed = encoded(review(POD, pod("ok", labels={QUEUE_LABEL: "gpu"})))
    lost = encoded(review(POD, pod("lost", labels={QUEUE_LABEL: "nope"})))
    answers = asyncio.run(post_all(registry, [(MUTATE_PATH, managed), (VALIDATE_PATH, lost),
                                              (VALIDATE_PATH, b"not json")]))
    assert answers[0]["response"]["allowed"] and not answers[1]["response"]["allowed"]
    assert sample(registry, "draq_webhook_request_duration_seconds_count", webhook="mutate") == 1
    assert sample(registry, "draq_webhook_request_duration_seconds_count", webhook="validate") == 2
    assert sample(registry, "draq_webhook_reviews_total", webhook="mutate", allowed="true") == 1
    assert sample(registry, "draq_webhook_reviews_total", webhook="validate", allowed="false") == 2
    assert sample(registry, "draq_webhook_denials_total", webhook="validate", kind="Pod", operation="CREATE",
                  reason=answers[1]["response"]["status"]["reason"]) == 1
    # a body that is not a review names no kind: counted as Other, reason BadRequest
    assert sample(registry, "draq_webhook_denials_total", webhook="validate", kind="Other", operation="Other",
                  reason="BadRequest") == 1
