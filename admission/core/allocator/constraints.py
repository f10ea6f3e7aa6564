"""Claim constraints (matchAttribute, distinctAttribute), checked incrementally as devices are added."""

from __future__ import annotations

from collections.abc import Hashable

from admission.core.features import FeatureGates
from admission.core.models import AttributeValue, Device, DeviceConstraint
from admission.core.semver import Semver


def _element_key(value: object) -> Hashable:
    # Typed identity: 1 and True differ; versions compare as their text.
    if isinstance(value, Semver):
        return ("version", value.text)
    return (type(value).__name__, value)


def _as_set(value: AttributeValue) -> frozenset[Hashable]:
    items = value if isinstance(value, tuple) else (value,)
    return frozenset(_element_key(v) for v in items)


class ConstraintTracker:
    """State of one constraint during a search; `add` and `remove` must be called symmetrically."""

    __slots__ = ("_distinct", "_domain", "_ident", "_matched", "_picked", "as_sets", "attribute", "constraint",
                 "distinct_by_device", "distinct_per_device", "is_match", "lists_unmatched", "requests")

    def __init__(self, constraint: DeviceConstraint, gates: FeatureGates) -> None:
        self.constraint = constraint
        self.requests = frozenset(constraint.requests)
        self.is_match = constraint.match_attribute is not None
        self.attribute = constraint.match_attribute or constraint.distinct_attribute or ""
        self._domain, _, self._ident = self.attribute.rpartition("/")  # as Device.attribute splits it
        self.as_sets = gates.list_type_attributes
        # 1.34 compared where the values are stored, not what they are: only a device's own value
        # equals itself, so distinctAttribute only kept a shared device from being picked twice.
        self.distinct_by_device = gates.minor <= 34
        # 1.37 compares a device with every device picked so far; before, with the last one per request.
        self.distinct_per_device = gates.minor >= 37
        # 1.37 without DRAListTypeAttributes compares scalar values only (a list comes from a derived attribute).
        self.lists_unmatched = gates.minor >= 37 and not self.as_sets
        self._matched: list[Hashable] = []
        self._distinct: dict[str, AttributeValue] = {}
        self._picked: list[AttributeValue] = []

    def applies(self, request: str, result_name: str) -> bool:
        return not self.requests or request in self.requests or result_name in self.requests

    def add(self, request: str, device: Device) -> bool:
        values = device.attributes.get(self._domain)
        value = values.get(self._ident) if values is not None else None
        if value is None:
            return False
        if self.is_match:
            return self._add_match(value)
        if self.distinct_by_device:
            return self._add_distinct(request, device.id)
        return self._add_distinct(request, value)

    def add_value(self, request: str, value: AttributeValue) -> bool:
        """Add a device whose attribute the request computes (a derived attribute, 1.37)."""
        if self.is_match:
            return self._add_match(value)
        return self._add_distinct(request, value)

    def remove(self, request: str) -> None:
        if self.is_match:
            self._matched.pop()
        elif self.distinct_per_device:
            self._picked.pop()
        else:
            self._distinct.pop(request, None)

    def _add_match(self, value: AttributeValue) -> bool:
        if self.as_sets:
            if value == ():
                return False  # an empty list has no type: upstream refuses it
            current = _as_set(value)
            if self._matched:
                current = current & self._matched[-1]  # type: ignore[operator]
                if not current:
                    return False
            self._matched.append(current)
            return True
        if isinstance(value, tuple):
            if self.lists_unmatched and self._matched:
                return False  # 1.37 compares scalars only: a list matches nothing after the first device
            key: Hashable = ("list", tuple(_element_key(v) for v in value))
        else:
            key = _element_key(value)
        if self._matched and self._matched[0] != key:
            return False
        self._matched.append(key)
        return True

    def _add_distinct(self, request: str, value: AttributeValue) -> bool:
        if self.distinct_per_device:
            if self.as_sets and value == ():
                return False
            if self.lists_unmatched and type(value) is tuple and self._picked:
                return False  # 1.37 compares scalars only: a list repeats every value
            if any(self._equal(value, other) for other in self._picked):
                return False
            self._picked.append(value)
            return True
        for other in self._distinct.values():
            if self._equal(value, other):
                return False
        # Remembered per request name (upstream quirk): a later device of the same request
        # overwrites the value, and removing a device forgets the request's value.
        self._distinct[request] = value
        return True

    def _equal(self, a: AttributeValue, b: AttributeValue) -> bool:
        if self.as_sets:
            return bool(_as_set(a) & _as_set(b))
        if isinstance(a, tuple) or isinstance(b, tuple):
            return isinstance(a, tuple) and isinstance(b, tuple) and _as_set(a) == _as_set(b)
        return _element_key(a) == _element_key(b)
