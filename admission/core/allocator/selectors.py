"""CEL selector evaluation for the allocator: compiled once, results cached per device.

A CEL problem is never "not selected": compile errors, runtime errors and unsupported attribute
values become AllocationError, raised only when evaluation reaches the device (lazy, as upstream).
"""

from __future__ import annotations

from admission.core.allocator.errors import AllocationError
from admission.core.cel import CelCompileError, CelError, compile_selector
from admission.core.features import FeatureGates
from admission.core.models import Device


class SelectorEvaluator:
    """Evaluates selector lists against devices under one gate set; caches per (selector, device)."""

    def __init__(self, gates: FeatureGates) -> None:
        self.gates = gates
        self._programs: dict[str, object] = {}
        self._results: dict[tuple[str, str], bool] = {}
        self._attribute_problem: dict[str, str | None] = {}
        self._combined: dict[tuple[int, str], bool] = {}
        self._signatures: dict[tuple[str, tuple[str | None, ...], str, tuple[str | None, ...]], int] = {}

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
        key = (signature, device.id)
        found = self._combined.get(key)
        if found is None:
            found = self.all_true(class_owner, class_selectors, device) and self.all_true(owner, selectors, device)
            self._combined[key] = found
        return found

    def all_true(self, owner: str, selectors: tuple[str | None, ...], device: Device) -> bool:
        """True if every selector accepts the device (stopping at the first false)."""
        results = self._results
        for index, expression in enumerate(selectors):
            if expression is None:
                raise AllocationError(f"{owner}: selector #{index}: CEL expression empty "
                                      "(unsupported selector type?)")
            key = (expression, device.id)
            value = results.get(key)
            if value is None:
                value = self._evaluate(owner, index, expression, device)
                results[key] = value
            if not value:
                return False
        return True

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
