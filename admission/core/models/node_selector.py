"""core/v1 NodeSelector with node-affinity matching (labels and the `metadata.name` field)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from admission.core.errors import InvalidInput
from admission.core.models._fields import Fields

_LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_FIELD_OPERATORS = frozenset({"In", "NotIn"})
NAME_FIELD = "metadata.name"


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, present: bool, value: str) -> bool:
        op = self.operator
        if op == "In":
            return present and value in self.values
        if op == "NotIn":
            return not present or value not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if not present or len(self.values) != 1:
            return False
        try:
            have, want = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        # A term without requirements selects nothing, as in node affinity.
        if not self.match_expressions and not self.match_fields:
            return False
        for req in self.match_expressions:
            if not req.matches(req.key in labels, labels.get(req.key, "")):
                return False
        return all(req.matches(req.key == NAME_FIELD, name) for req in self.match_fields)

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_expressions:
            out["matchExpressions"] = [r.to_manifest() for r in self.match_expressions]
        if self.match_fields:
            out["matchFields"] = [r.to_manifest() for r in self.match_fields]
        return out


@dataclass(frozen=True, slots=True)
class NodeSelector:
    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        """True if any term matches (terms are ORed, requirements within a term ANDed)."""
        return any(term.matches(labels, name) for term in self.terms)

    def to_manifest(self) -> dict[str, Any]:
        return {"nodeSelectorTerms": [t.to_manifest() for t in self.terms]}


@lru_cache(maxsize=8192)
def node_name_selector(name: str) -> NodeSelector:
    """The selector `metadata.name In [name]` that pins an allocation to one node (immutable, so shared)."""
    pin = NodeSelectorRequirement(NAME_FIELD, "In", (name,))
    return NodeSelector((NodeSelectorTerm(match_fields=(pin,)),))


def parse_node_selector(fields: Fields) -> NodeSelector:
    terms = []
    for term in fields.maps("nodeSelectorTerms"):
        exprs = tuple(_requirement(r, _LABEL_OPERATORS, False) for r in term.maps("matchExpressions"))
        flds = tuple(_requirement(r, _FIELD_OPERATORS, True) for r in term.maps("matchFields"))
        terms.append(NodeSelectorTerm(exprs, flds))
    if not terms:
        raise fields.fail("nodeSelectorTerms", "must contain at least one term")
    return NodeSelector(tuple(terms))


def _requirement(fields: Fields, operators: frozenset[str], is_field: bool) -> NodeSelectorRequirement:
    key = fields.str("key", required=True)
    operator = fields.str("operator", required=True)
    if operator not in operators:
        raise fields.fail("operator", f"unsupported operator {operator!r}; expected one of "
                          + ", ".join(sorted(operators)))
    if is_field and key != NAME_FIELD:
        raise fields.fail("key", f"unsupported field {key!r}; only {NAME_FIELD} can be selected")
    values = fields.str_list("values")
    if operator in ("In", "NotIn") and not values:
        raise fields.fail("values", f"operator {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise fields.fail("values", f"operator {operator} takes no values")
    if operator in ("Gt", "Lt") and (len(values) != 1 or not _is_int(values[0])):
        raise InvalidInput(fields.obj, fields.where("values"),
                           f"operator {operator} needs exactly one integer value")
    return NodeSelectorRequirement(key, operator, values)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True
