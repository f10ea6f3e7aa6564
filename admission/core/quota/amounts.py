"""Per-unit amounts (a charge, a usage): exact fractions keyed by quota unit name, immutable."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from admission.core.quantity import Format, format_quantity


@dataclass(frozen=True, slots=True)
class Amounts:
    """Amount per quota unit. Zero entries are dropped, so equal charges compare equal."""

    entries: tuple[tuple[str, Fraction], ...] = ()

    @staticmethod
    def of(values: Mapping[str, Fraction | int] | Iterable[tuple[str, Fraction | int]]) -> Amounts:
        pairs = values.items() if isinstance(values, Mapping) else values
        summed: dict[str, Fraction] = {}
        for unit, value in pairs:
            if type(value) is not Fraction:  # a Fraction is immutable: no copy needed
                value = Fraction(value)
            known = summed.get(unit)
            summed[unit] = value if known is None else known + value
        return Amounts(tuple(sorted((u, v) for u, v in summed.items() if v != 0)))

    def get(self, unit: str) -> Fraction:
        for name, value in self.entries:
            if name == unit:
                return value
        return Fraction(0)

    @property
    def units(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.entries)

    def as_dict(self) -> dict[str, Fraction]:
        return dict(self.entries)

    def __iter__(self) -> Iterator[tuple[str, Fraction]]:
        return iter(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __add__(self, other: Amounts) -> Amounts:
        if not other.entries:
            return self
        if not self.entries:
            return other
        return Amounts.of([*self.entries, *other.entries])

    def __sub__(self, other: Amounts) -> Amounts:
        if not other.entries:
            return self
        return Amounts.of([*self.entries, *((u, -v) for u, v in other.entries)])

    def __neg__(self) -> Amounts:
        return Amounts(tuple((u, -v) for u, v in self.entries))

    def scaled(self, factor: Fraction | int) -> Amounts:
        return Amounts.of((u, v * factor) for u, v in self.entries)

    def maximum(self, other: Amounts) -> Amounts:
        """Per unit the larger of the two (the worst case of two alternatives)."""
        units = set(self.units) | set(other.units)
        return Amounts.of({u: max(self.get(u), other.get(u)) for u in units})

    def describe(self, formats: Mapping[str, Format] | None = None) -> str:
        """`gpus 2, gpu-memory 160Gi` (or `nothing`)."""
        if not self.entries:
            return "nothing"
        return ", ".join(f"{unit} {format_amount(value, (formats or {}).get(unit))}"
                         for unit, value in self.entries)


NONE = Amounts()


def format_amount(value: Fraction, fmt: Format | None = None) -> str:
    """Kubernetes quantity text; binary suffixes for whole multiples of 1Ki unless told otherwise."""
    if fmt is None:
        binary = value.denominator == 1 and value != 0 and value.numerator % 1024 == 0
        fmt = "BinarySI" if binary else "DecimalSI"
    return format_quantity(value, fmt)
