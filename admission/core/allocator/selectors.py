"""CEL selector evaluation for the allocator: compiled once, results cached per device.

The results are kept across snapshots for devices that did not change (`carried`): they are keyed by
the device id, the expression and a number standing for the (class, request selectors) combination,
numbered by content in a registry the evaluators of successive snapshots share.

A CEL problem is never "not selected": compile errors, runtime errors and unsupported attribute
values become AllocationError, raised only when evaluation reaches the device (lazy, as upstream).
"""

from __future__ import annotations

from typing import cast

from admission.core.allocator.errors import AllocationError
from admission.core.cel import CelCompileError, CelError, compile_derived, compile_selector
from admission.core.features import FeatureGates
from admission.core.models import AttributeValue, Device

# Beyond this many (class, request selectors) combinations, a snapshot's evaluator starts afresh instead
# of carrying the results on (request selectors are per claim; old claims' entries would pile up).
MAX_CARRIED_SIGNATURES = 50_000


class SelectorEvaluator:
    """Evaluates selector lists against devices under one gate set; caches per (selector, device)."""

    def __init__(self, gates: FeatureGates) -> None:
        self.gates = gates
        self._programs: dict[str, object] = {}
        self._results: dict[str, dict[str, bool]] = {}  # device id -> expression -> result
        self._attribute_problem: dict[str, str | None] = {}
        self._combined: dict[str, dict[int, bool]] = {}  # device id -> signature -> result
        self._signatures: dict[tuple[str, tuple[str | None, ...], str, tuple[str | None, ...]], int] = {}
        self._derived: dict[str, dict[str, AttributeValue]] = {}  # device id -> expression -> value

    def carried(self, index: object, changed: set[str]) -> SelectorEvaluator:
        """An evaluator for the next snapshot: the same results except for the devices in `changed`."""
        other = SelectorEvaluator(self.gates)
        if len(self._signatures) > MAX_CARRIED_SIGNATURES:
            return other
        other._programs = self._programs
        other._signatures = self._signatures  # shared, so that a number means the same in both
        other._results = dict(self._results)
        other._combined = dict(self._combined)
        other._attribute_problem = dict(self._attribute_problem)
        other._derived = dict(self._derived)
        for device_id in changed:
            other._derived.pop(device_id, None)
            other._results.pop(device_id, None)
            other._combined.pop(device_id, None)
            other._attribute_problem.pop(device_id, None)
        return other

    def signature(self, class_name: str, class_selectors: tuple[str | None, ...], owner: str,
                  selectors: tuple[str | None, ...]) -> int:
        """A small number standing for one (class, request selectors) combination."""
        key = (class_name, class_selectors, owner if selectors else "", selectors)
        found = self._signatures.get(key)
        if found is None:
            found = self._signatures[key] = len(self._signatures)
        return found

    def selects(self, signature: int, class_owner: str, class_selectors: tuple[str | None, ...],
                owner: str, selectors: tuple[str | None, ...], device: Device) -> bool:
        """Class selectors, then request selectors; the combined answer is cached per device."""
        known = self._combined.get(device.id)
        if known is None:
            known = self._combined[device.id] = {}
        found = known.get(signature)
        if found is None:
            found = self.all_true(class_owner, class_selectors, device) and self.all_true(owner, selectors, device)
            known[signature] = found
        return found

    def all_true(self, owner: str, selectors: tuple[str | None, ...], device: Device) -> bool:
        """True if every selector accepts the device (stopping at the first false)."""
        results = self._results.get(device.id)
        if results is None:
            results = self._results[device.id] = {}
        for index, expression in enumerate(selectors):
            if expression is None:
                raise AllocationError(f"{owner}: selector #{index}: CEL expression empty "
                                      "(unsupported selector type?)")
            value = results.get(expression)
            if value is None:
                value = self._evaluate(owner, index, expression, device)
                results[expression] = value
            if not value:
                return False
        return True

    def derived(self, name: str, expression: str, device: Device) -> AttributeValue:
        """The value of a derived attribute (DRADerivedAttributes) for the device, kept per device and
        expression; a compile or runtime error is an AllocationError, as it fails the scheduler's attempt."""
        values = self._derived.get(device.id)
        if values is None:
            values = self._derived[device.id] = {}
        found = values.get(expression)
        if found is not None:
            return found
        try:
            program = compile_derived(expression, allow_multiple_allocations=self.gates.consumable_capacity,
                                      list_attributes=self.gates.list_type_attributes)
        except CelCompileError as err:
            raise AllocationError(f"compile derived attribute {name} failed: {err}") from None
        try:
            # A scalar or a flat list of scalars (derived_value checks it), as a device attribute is.
            found = values[expression] = cast(AttributeValue, program.value(device))
        except CelError as err:
            raise AllocationError(f"evaluate derived attribute {name} on device {device.id} failed: {err}") from None
        return found

    def _evaluate(self, owner: str, index: int, expression: str, device: Device) -> bool:
        problem = self._unsupported_attribute(device)
        if problem is not None:
            raise AllocationError(f"{owner}: selector #{index}: CEL runtime error: attribute {problem}: "
                                  "unsupported attribute value")
        program = self._programs.get(expression)
        if program is None:
            try:
                program = compile_selector(
                    expression, allow_multiple_allocations=self.gates.consumable_capacity,
                    list_attributes=self.gates.list_type_attributes)
            except CelCompileError as err:
                raise AllocationError(f"{owner}: selector #{index}: CEL compile error: {err}") from None
            self._programs[expression] = program
        try:
            result = program.evaluate(device)  # type: ignore[attr-defined]
        except CelError as err:
            raise AllocationError(f"{owner}: selector #{index}: CEL runtime error: {err}") from None
        if not isinstance(result, bool):
            raise AllocationError(f"{owner}: selector #{index}: CEL result is not a bool but {result!r}")
        return result

    def _unsupported_attribute(self, device: Device) -> str | None:
        if device.id in self._attribute_problem:
            return self._attribute_problem[device.id]
        problem = device.valueless_attributes[0] if device.valueless_attributes else None
        if problem is None and not self.gates.list_type_attributes:
            for domain, values in device.attributes.items():
                for ident, value in values.items():
                    if isinstance(value, tuple):
                        problem = ident if domain == device.driver else f"{domain}/{ident}"
                        break
                if problem:
                    break
        self._attribute_problem[device.id] = problem
        return problem
