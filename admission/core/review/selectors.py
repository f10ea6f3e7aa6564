"""metav1.LabelSelector matching."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admission.core.review.readers import mapping


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector; an empty selector matches everything."""
    match_labels = mapping(selector.get("matchLabels"))
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    expressions = selector.get("matchExpressions")
    for expression in expressions if isinstance(expressions, list) else []:
        if not _expression_matches(mapping(expression), labels):
            return False
    return True


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values")
    allowed = set(values) if isinstance(values, list) else set()
    present = isinstance(key, str) and key in labels
    if operator == "In":
        return present and labels[str(key)] in allowed
    if operator == "NotIn":
        return not present or labels[str(key)] not in allowed
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    return False
