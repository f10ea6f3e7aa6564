"""Whether the API server would send a request to a generated webhook: its selectors and its matchConditions.

The selectors follow the API server's rules (for an UPDATE the objectSelector matches if the old or the
new object matches). The matchConditions are evaluated with draq's own CEL, which implements the
subset they use (`has`, `in`, `exists`, the conditional operator); the e2e tests check the same
conditions in the real API server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admission.core.cel import compile_expression
from admission.core.models import parse_label_selector


def selects(webhook: Mapping[str, Any], field: str, labels: Mapping[str, str]) -> bool:
    """Whether the webhook's `namespaceSelector` or `objectSelector` matches `labels` (parsed strictly: a
    generated selector the API server would reject fails here)."""
    name = webhook.get("name", "webhook")
    return parse_label_selector(webhook[field], f"webhook {name}", field).matches(labels)


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def conditions_hold(webhook: Mapping[str, Any], operation: str, obj: Mapping[str, Any] | None,
                    old: Mapping[str, Any] | None, username: str = "alice") -> bool:
    request = {"operation": operation, "userInfo": {"username": username}}
    for condition in webhook.get("matchConditions") or []:
        expression = compile_expression(condition["expression"],
                                        {"request": Any, "object": Any, "oldObject": Any})
        if expression.evaluate({"request": request, "object": obj, "oldObject": old}) is not True:
            return False
    return True


def sent(webhook: Mapping[str, Any], namespace_labels: Mapping[str, str], operation: str,
         obj: Mapping[str, Any] | None, old: Mapping[str, Any] | None = None, username: str = "alice") -> bool:
    """Whether the API server calls `webhook` for this pod request."""
    if not selects(webhook, "namespaceSelector", namespace_labels):
        return False
    candidates = [o for o in (obj, old) if o is not None]
    if not any(selects(webhook, "objectSelector", _labels(o)) for o in candidates):
        return False
    return conditions_hold(webhook, operation, obj, old, username)
