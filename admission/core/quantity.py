"""Kubernetes resource quantities (`resource.Quantity`), exact, as immutable values.

A quantity is a decimal or binary-suffixed number such as `80Gi`, `1.5`, `500m` or `2e3`. Values
are kept as exact fractions so sums and comparisons never round; the suffix style of the parsed
text is remembered for printing, as Kubernetes does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Literal

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_PATTERN = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$")
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)


class QuantityError(ValueError):
    """Text that is not a Kubernetes quantity."""


@dataclass(frozen=True, slots=True)
class Quantity:
    value: Fraction
    format: Format = "DecimalSI"

    # Equality and ordering are by value only: 1Gi == 1073741824.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __le__(self, other: Quantity) -> bool:
        return self.value <= other.value

    def __gt__(self, other: Quantity) -> bool:
        return self.value > other.value

    def __ge__(self, other: Quantity) -> bool:
        return self.value >= other.value

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.value - other.value, self.format)

    def __neg__(self) -> Quantity:
        return Quantity(-self.value, self.format)

    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def is_integer(self) -> bool:
        return self.value.denominator == 1 and _INT64_MIN <= self.value.numerator <= _INT64_MAX

    def as_integer(self) -> int:
        if not self.is_integer():
            raise QuantityError(f"quantity {self} cannot be represented as an int64")
        return self.value.numerator

    def as_float(self) -> float:
        return float(self.value)

    def milli(self) -> int:
        """The value in thousandths, rounded up (as Kubernetes' MilliValue)."""
        scaled = self.value * 1000
        return -((-scaled.numerator) // scaled.denominator)

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


ZERO = Quantity(Fraction(0))


@lru_cache(maxsize=65536)
def parse_quantity(text: str | int | float) -> Quantity:
    """Parse `80Gi`, `1.5`, `500m`, `2e3` (ints and floats are taken as plain decimals)."""
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a quantity")
    if isinstance(text, int):
        return Quantity(Fraction(text), "DecimalSI")
    if isinstance(text, float):
        return Quantity(Fraction(str(text)), "DecimalSI")
    if not isinstance(text, str):
        raise QuantityError(f"{text!r} is not a quantity")
    match = _PATTERN.match(text.strip())
    if not match or not text.strip():
        raise QuantityError(f"{text!r} is not a quantity (expected e.g. 80Gi, 1.5, 500m, 2e3)")
    sign, number, suffix, exponent = match.groups()
    value = Fraction(number)
    fmt: Format
    if exponent is not None:
        value *= Fraction(10) ** int(exponent)
        fmt = "DecimalExponent"
    elif suffix in _BINARY:
        value *= _BINARY[suffix]
        fmt = "BinarySI"
    else:
        value *= Fraction(10) ** _DECIMAL[suffix or ""]
        fmt = "DecimalSI"
    return Quantity(-value if sign == "-" else value, fmt)


@lru_cache(maxsize=4096)  # a cycle formats the same few charges over and over
def format_quantity(value: Fraction, fmt: Format = "DecimalSI") -> str:
    """Canonical text of a value: the largest exact suffix of the preferred style."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt == "BinarySI" and magnitude.denominator == 1 and magnitude >= 1024:
        for suffix, factor in reversed(list(_BINARY.items())):
            if magnitude.numerator % factor == 0:
                return f"{sign}{magnitude.numerator // factor}{suffix}"
    for suffix, exp in sorted(_DECIMAL.items(), key=lambda kv: -kv[1]):
        scaled = magnitude / (Fraction(10) ** exp)
        if scaled.denominator == 1:
            if fmt == "DecimalExponent" and exp:
                return f"{sign}{scaled.numerator}e{exp}"
            return f"{sign}{scaled.numerator}{suffix}"
    # Finer than nano: Kubernetes rounds up to the nearest nano unit.
    nanos = -((-magnitude.numerator * 10**9) // magnitude.denominator)
    return f"{sign}{nanos}n"
