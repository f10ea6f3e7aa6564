"""metav1.LabelSelector: the selector of ClusterQueue namespaces, of pod (anti-)affinity terms and of
webhook configurations.

`matchLabels` and every `matchExpressions` requirement must all hold; the empty selector `{}` matches
everything. Operators are In, NotIn (both need at least one value), Exists and DoesNotExist (both take
none). Anything else is invalid input wherever a selector is read: the parser names the field and the
operator rather than letting such a selector match nothing or everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from admission.core.models._fields import Fields

LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_WITH_VALUES = frozenset({"In", "NotIn"})


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One `matchExpressions` entry, its operator one of `LABEL_OPERATORS` (the parser sees to it)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        match self.operator:
            case "In":
                return present and labels[self.key] in self.values
            case "NotIn":
                return not present or labels[self.key] not in self.values
            case "Exists":
                return present
            case "DoesNotExist":
                return not present
        raise ValueError(f"label selector operator {self.operator!r} is not one of {', '.join(LABEL_OPERATORS)}")


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed metav1.LabelSelector; the empty one matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(key) == value for key, value in self.match_labels) and \
            all(r.matches(labels) for r in self.match_expressions)


def parse_label_selector(data: object, obj: str = "label selector", path: str = "") -> LabelSelector:
    """The selector `data` (a mapping; None is the empty selector) found in object `obj` at field `path`.

    Raises InvalidInput naming the object and field for an unknown operator, In or NotIn without values,
    Exists or DoesNotExist with values, a requirement without a key, or a field of the wrong type.
    """
    return read_label_selector(Fields(obj, data, path))


def read_label_selector(fields: Fields) -> LabelSelector:
    """`parse_label_selector` for the parsers that already hold the selector's `Fields`."""
    requirements = []
    for entry in fields.maps("matchExpressions"):
        key = entry.str("key", required=True)
        operator = entry.str("operator", required=True)
        if operator not in LABEL_OPERATORS:
            raise entry.fail("operator", f"unknown operator {operator!r}; expected In, NotIn, Exists or "
                             "DoesNotExist")
        values = entry.str_list("values")
        if operator in _WITH_VALUES and not values:
            raise entry.fail("values", f"operator {operator} needs at least one value")
        if operator not in _WITH_VALUES and values:
            raise entry.fail("values", f"operator {operator} takes no values")
        requirements.append(LabelRequirement(key, operator, values))
    return LabelSelector(tuple(sorted(fields.str_map("matchLabels").items())), tuple(requirements))
