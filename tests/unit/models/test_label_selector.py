"""metav1.LabelSelector: every operator, the empty selector, and the selectors the parser refuses."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.errors import InvalidInput
from admission.core.models import LabelRequirement, LabelSelector, parse_label_selector

LABELS = {"team": "ml", "tier": "gold"}


def selector(*expressions: dict[str, Any], **match_labels: str) -> LabelSelector:
    data: dict[str, Any] = {}
    if match_labels:
        data["matchLabels"] = match_labels
    if expressions:
        data["matchExpressions"] = list(expressions)
    return parse_label_selector(data, "ClusterQueue q", "spec.namespaceSelector")


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        entry["values"] = list(values)
    return entry


@pytest.mark.parametrize("empty", [{}, None, {"matchLabels": {}, "matchExpressions": []}])
def test_the_empty_selector_matches_everything(empty: Any) -> None:
    parsed = parse_label_selector(empty)
    assert parsed == LabelSelector()
    assert parsed.matches({}) and parsed.matches(LABELS)


@pytest.mark.parametrize(("expression", "matches"), [
    (req("tier", "In", "gold", "silver"), True),
    (req("tier", "In", "silver"), False),
    (req("absent", "In", "gold"), False),
    (req("tier", "NotIn", "gold"), False),
    (req("tier", "NotIn", "silver"), True),
    (req("absent", "NotIn", "gold"), True),  # a missing label is not in any set
    (req("tier", "Exists"), True),
    (req("absent", "Exists"), False),
    (req("tier", "DoesNotExist"), False),
    (req("absent", "DoesNotExist"), True),
])
def test_each_operator(expression: dict[str, Any], matches: bool) -> None:
    assert selector(expression).matches(LABELS) is matches


def test_match_labels_and_every_expression_must_all_hold() -> None:
    both = selector(req("tier", "Exists"), req("zone", "DoesNotExist"), team="ml")
    assert both.matches(LABELS)
    assert not both.matches({**LABELS, "team": "web"})
    assert not both.matches({**LABELS, "zone": "a"})
    assert not selector(team="ml", tier="silver").matches(LABELS)
    assert both.match_labels == (("team", "ml"),)
    assert both.match_expressions == (LabelRequirement("tier", "Exists"), LabelRequirement("zone", "DoesNotExist"))


@pytest.mark.parametrize(("expression", "field", "reason"), [
    (req("tier", "Bogus", "gold"), "operator", "unknown operator 'Bogus'; expected In, NotIn, Exists or DoesNotExist"),
    (req("tier", "Gt", "1"), "operator", "unknown operator 'Gt'"),  # node selectors have it, label selectors not
    (req("tier", "in", "gold"), "operator", "unknown operator 'in'"),
    (req("tier", "In"), "values", "operator In needs at least one value"),
    (req("tier", "NotIn"), "values", "operator NotIn needs at least one value"),
    (req("tier", "Exists", "gold"), "values", "operator Exists takes no values"),
    (req("tier", "DoesNotExist", "gold"), "values", "operator DoesNotExist takes no values"),
    ({"operator": "Exists"}, "key", "is required"),
    ({"key": "tier"}, "operator", "is required"),
    ({"key": "tier", "operator": "In", "values": "gold"}, "values", "expected a list"),
])
def test_invalid_requirements_name_the_field_and_operator(expression: dict[str, Any], field: str,
                                                         reason: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        selector(req("team", "Exists"), expression)
    assert caught.value.obj == "ClusterQueue q"
    assert caught.value.field == f"spec.namespaceSelector.matchExpressions[1].{field}"
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"ClusterQueue q, field spec.namespaceSelector.matchExpressions[1].{field}: ")


def test_match_labels_must_be_strings() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_label_selector({"matchLabels": {"gpu": True}}, "webhook w", "objectSelector")
    assert caught.value.field == "objectSelector.matchLabels.gpu"


def test_a_requirement_built_by_hand_with_an_unknown_operator_does_not_match_silently() -> None:
    with pytest.raises(ValueError, match="'Bogus'"):
        LabelRequirement("tier", "Bogus").matches(LABELS)
