"""Runtime representation of CEL values, and the equality and ordering CEL defines on them.

int -> int, uint -> UInt, double -> float, bool -> bool, string -> str, bytes -> bytes,
null -> None, list -> tuple, map -> dict (or a read-only Mapping view), type -> CelType,
optional -> Optional; quantities and versions are the core's Quantity and Semver.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from admission.core.quantity import Quantity
from admission.core.semver import Semver

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
UINT64_MAX: Final = 2**64 - 1


class UInt(int):
    """A CEL `uint`: a distinct type, so `1u` and `1` are told apart by `type()` and overloads."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


@dataclass(frozen=True, slots=True)
class CelType:
    """A type used as a value: `type(1) == int`."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Optional:
    """A CEL optional value; `present` False is `optional.none()`."""

    present: bool
    value: object = None


NONE: Final = Optional(False)


class _BoolKey:
    """Stands for a bool map key, so `{true: 1, 1: 2}` keeps two keys (Python hashes True like 1)."""

    __slots__ = ("flag",)

    def __init__(self, flag: bool) -> None:
        self.flag = flag

    def __repr__(self) -> str:
        return "true" if self.flag else "false"


TRUE_KEY: Final = _BoolKey(True)
FALSE_KEY: Final = _BoolKey(False)


def map_key(key: object) -> object:
    """The dict key a CEL key is stored under."""
    if key is True:
        return TRUE_KEY
    if key is False:
        return FALSE_KEY
    return key


def cel_key(stored: object) -> object:
    """The CEL value of a stored dict key."""
    if isinstance(stored, _BoolKey):
        return stored.flag
    return stored


KIND_OF_TYPE: dict[type, str] = {
    bool: "bool", int: "int", UInt: "uint", float: "double", str: "string", bytes: "bytes",
    type(None): "null", tuple: "list", list: "list", dict: "map", CelType: "type",
    Optional: "optional", Quantity: "quantity", Semver: "semver",
}
_TYPE_NAMES = {"null": "null_type", "quantity": "kubernetes.Quantity", "semver": "kubernetes.Semver",
               "optional": "optional_type"}


def kind(value: object) -> str:
    """The runtime kind of a value: int, uint, double, bool, string, bytes, null, list, map, ..."""
    found = KIND_OF_TYPE.get(type(value))
    if found is not None:
        return found
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, (tuple, list)):
        return "list"
    return type(value).__name__


def type_value(value: object) -> CelType:
    k = kind(value)
    return CelType(_TYPE_NAMES.get(k, k))


_NUMERIC = frozenset({"int", "uint", "double"})


def equal(left: object, right: object) -> bool:
    """CEL heterogeneous equality: different kinds are unequal, except numbers, which compare by value."""
    lt, rt = type(left), type(right)
    if lt is rt and lt in (str, int, bytes, bool, UInt):
        return left == right
    lk, rk = kind(left), kind(right)
    if lk != rk:
        return lk in _NUMERIC and rk in _NUMERIC and _numeric_equal(left, right)
    if lk == "list":
        assert isinstance(left, (tuple, list)) and isinstance(right, (tuple, list))
        return len(left) == len(right) and all(equal(a, b) for a, b in zip(left, right, strict=True))
    if lk == "map":
        assert isinstance(left, Mapping) and isinstance(right, Mapping)
        if len(left) != len(right):
            return False
        for key, value in left.items():
            if key not in right:
                return False
            if not equal(value, right[key]):
                return False
        return True
    if lk == "optional":
        assert isinstance(left, Optional) and isinstance(right, Optional)
        return left.present == right.present and (not left.present or equal(left.value, right.value))
    return left == right


def _numeric_equal(left: object, right: object) -> bool:
    assert isinstance(left, (int, float)) and isinstance(right, (int, float))
    return left == right


def compare(left: object, right: object) -> int:
    """Ordering for `<`, `<=`, `>`, `>=`: numbers across kinds, strings, bytes, bools."""
    lk, rk = kind(left), kind(right)
    if lk in _NUMERIC and rk in _NUMERIC:
        assert isinstance(left, (int, float)) and isinstance(right, (int, float))
    elif lk != rk or lk not in ("string", "bytes", "bool"):
        raise TypeError(f"no such overload: {lk} < {rk}")
    result: int = (left > right) - (left < right)  # type: ignore[operator]
    return result


def format_double(value: float) -> str:
    """A double as CEL prints it (Go's shortest `%g`): 1 -> "1", 1e6 -> "1e+06", 0.5 -> "0.5"."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    shortest = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, shortest.digits))
    assert isinstance(shortest.exponent, int)
    exponent = len(digits) - 1 + shortest.exponent
    if exponent < -4 or exponent >= 6:
        rest = digits[1:]
        body = digits[0] + ("." + rest if rest else "")
        return f"{sign}{body}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    if len(digits) <= exponent + 1:
        return sign + digits + "0" * (exponent + 1 - len(digits))
    return f"{sign}{digits[:exponent + 1]}.{digits[exponent + 1:]}"
