"""Kubernetes' CEL libraries for DRA: quantities, semantic versions, and `includes` for list attributes."""

from __future__ import annotations

from fractions import Fraction

from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.functions import define
from admission.core.cel.stdlib import checked_int
from admission.core.cel.values import equal
from admission.core.quantity import Quantity, QuantityError, parse_quantity
from admission.core.semver import Semver, SemverError, parse_semver

MAX_LIST_ATTRIBUTE_SIZE = 48


# -- quantity ----------------------------------------------------------------------------------------
@define("quantity", "string", "quantity")
def _quantity(text: str) -> Quantity:
    try:
        return parse_quantity(text)
    except QuantityError as error:
        raise CelRuntimeError(f"invalid quantity: {error}") from None


@define("isQuantity", "string", "bool")
def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


@define("isInteger", "quantity", "bool", member=True)
def _is_integer(quantity: Quantity) -> bool:
    return quantity.is_integer()


@define("asInteger", "quantity", "int", member=True)
def _as_integer(quantity: Quantity) -> int:
    if not quantity.is_integer():
        raise CelRuntimeError(f"cannot convert value {quantity} to integer")
    return quantity.as_integer()


@define("asApproximateFloat", "quantity", "double", member=True)
def _as_float(quantity: Quantity) -> float:
    return quantity.as_float()


@define("sign", "quantity", "int", member=True)
def _sign(quantity: Quantity) -> int:
    return quantity.sign()


@define("add", "quantity, quantity", "quantity", member=True)
def _add(quantity: Quantity, other: Quantity) -> Quantity:
    return quantity + other


@define("add", "quantity, int", "quantity", member=True)
def _add_int(quantity: Quantity, amount: int) -> Quantity:
    return Quantity(quantity.value + Fraction(amount), quantity.format)


@define("sub", "quantity, quantity", "quantity", member=True)
def _sub(quantity: Quantity, other: Quantity) -> Quantity:
    return quantity - other


@define("sub", "quantity, int", "quantity", member=True)
def _sub_int(quantity: Quantity, amount: int) -> Quantity:
    return Quantity(quantity.value - Fraction(amount), quantity.format)


@define("isLessThan", "quantity, quantity", "bool", member=True)
def _q_less(quantity: Quantity, other: Quantity) -> bool:
    return quantity.compare(other) < 0


@define("isGreaterThan", "quantity, quantity", "bool", member=True)
def _q_greater(quantity: Quantity, other: Quantity) -> bool:
    return quantity.compare(other) > 0


@define("compareTo", "quantity, quantity", "int", member=True)
def _q_compare(quantity: Quantity, other: Quantity) -> int:
    return quantity.compare(other)


# -- semver ------------------------------------------------------------------------------------------
@define("semver", "string", "semver")
def _semver(text: str) -> Semver:
    return _semver_normalized(text, False)


@define("semver", "string, bool", "semver")
def _semver_normalized(text: str, normalize: bool) -> Semver:
    try:
        return parse_semver(text, normalize)
    except SemverError as error:
        raise CelRuntimeError(f"invalid semver: {error}") from None


@define("isSemver", "string", "bool")
def _is_semver(text: str) -> bool:
    return _is_semver_normalized(text, False)


@define("isSemver", "string, bool", "bool")
def _is_semver_normalized(text: str, normalize: bool) -> bool:
    try:
        parse_semver(text, normalize)
    except SemverError:
        return False
    return True


@define("major", "semver", "int", member=True)
def _major(version: Semver) -> int:
    return checked_int(version.major)


@define("minor", "semver", "int", member=True)
def _minor(version: Semver) -> int:
    return checked_int(version.minor)


@define("patch", "semver", "int", member=True)
def _patch(version: Semver) -> int:
    return checked_int(version.patch)


@define("isLessThan", "semver, semver", "bool", member=True)
def _v_less(version: Semver, other: Semver) -> bool:
    return version.compare(other) < 0


@define("isGreaterThan", "semver, semver", "bool", member=True)
def _v_greater(version: Semver, other: Semver) -> bool:
    return version.compare(other) > 0


@define("compareTo", "semver, semver", "int", member=True)
def _v_compare(version: Semver, other: Semver) -> int:
    return version.compare(other)


# -- list attributes (DRAListTypeAttributes) ---------------------------------------------------------
@define("includes", "dyn, dyn", "bool", member=True)
def _includes(value: object, wanted: object) -> bool:
    if isinstance(value, (tuple, list)):
        if len(value) > MAX_LIST_ATTRIBUTE_SIZE:
            raise CelRuntimeError(
                f"includes() on a list of {len(value)} entries (at most {MAX_LIST_ATTRIBUTE_SIZE})")
        return any(equal(item, wanted) for item in value)
    return equal(value, wanted)
