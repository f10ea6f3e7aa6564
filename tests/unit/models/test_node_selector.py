"""Node selectors match labels and the metadata.name field as node affinity does."""

from __future__ import annotations

import pytest

from admission.core.errors import InvalidInput
from admission.core.models._fields import Fields
from admission.core.models.node_selector import parse_node_selector


def selector(*terms: dict[str, object]):  # type: ignore[no-untyped-def]
    return parse_node_selector(Fields("ResourceSlice s", {"nodeSelectorTerms": list(terms)}, "spec.nodeSelector"))


@pytest.mark.parametrize(("operator", "values", "labels", "expected"), [
    ("In", ["a", "b"], {"zone": "b"}, True),
    ("In", ["a"], {}, False),
    ("NotIn", ["a"], {}, True),
    ("Exists", [], {"zone": ""}, True),
    ("DoesNotExist", [], {"zone": "a"}, False),
    ("Gt", ["3"], {"zone": "4"}, True),
    ("Lt", ["3"], {"zone": "4"}, False),
])
def test_label_operators(operator: str, values: list[str], labels: dict[str, str], expected: bool) -> None:
    term = {"matchExpressions": [{"key": "zone", "operator": operator, "values": values}]}
    assert selector(term).matches(labels, "n1") is expected


def test_terms_are_ored_and_fields_match_the_node_name() -> None:
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
    by_label = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    both = selector(by_name, by_label)
    assert both.matches({}, "n2") and both.matches({"zone": "a"}, "n1") and not both.matches({}, "n1")


def test_bad_operator_is_named() -> None:
    with pytest.raises(InvalidInput) as caught:
        selector({"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]})
    assert caught.value.field == "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator"
