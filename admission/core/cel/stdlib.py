"""Standard CEL: arithmetic, sizes, string tests, membership and type conversions."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.functions import define
from admission.core.cel.regex import compiled
from admission.core.cel.values import (
    INT64_MAX,
    INT64_MIN,
    UINT64_MAX,
    UInt,
    equal,
    format_double,
    kind,
    map_key,
    type_value,
)

_INT_TEXT = re.compile(r"[+-]?\d+")
_UINT_TEXT = re.compile(r"\+?\d+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf|infinity|nan)",
                         re.IGNORECASE)
_BOOL_TEXT = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
              "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def checked_int(value: int) -> int:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise CelRuntimeError("integer overflow")


def checked_uint(value: int) -> UInt:
    if 0 <= value <= UINT64_MAX:
        return UInt(value)
    raise CelRuntimeError("unsigned integer overflow")


# -- arithmetic --------------------------------------------------------------------------------------
@define("_+_", "int, int", "int")
def _add_int(a: int, b: int) -> int:
    return checked_int(a + b)


@define("_+_", "uint, uint", "uint")
def _add_uint(a: int, b: int) -> UInt:
    return checked_uint(a + b)


@define("_+_", "double, double", "double")
def _add_double(a: float, b: float) -> float:
    return a + b


@define("_+_", "string, string", "string")
def _concat_string(a: str, b: str) -> str:
    return a + b


@define("_+_", "bytes, bytes", "bytes")
def _concat_bytes(a: bytes, b: bytes) -> bytes:
    return a + b


@define("_+_", "list(dyn), list(dyn)", "$0")
def _concat_list(a: tuple[object, ...], b: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(a) + tuple(b)


@define("_-_", "int, int", "int")
def _sub_int(a: int, b: int) -> int:
    return checked_int(a - b)


@define("_-_", "uint, uint", "uint")
def _sub_uint(a: int, b: int) -> UInt:
    return checked_uint(a - b)


@define("_-_", "double, double", "double")
def _sub_double(a: float, b: float) -> float:
    return a - b


@define("_*_", "int, int", "int")
def _mul_int(a: int, b: int) -> int:
    return checked_int(a * b)


@define("_*_", "uint, uint", "uint")
def _mul_uint(a: int, b: int) -> UInt:
    return checked_uint(a * b)


@define("_*_", "double, double", "double")
def _mul_double(a: float, b: float) -> float:
    return a * b


@define("_/_", "int, int", "int")
def _div_int(a: int, b: int) -> int:
    if b == 0:
        raise CelRuntimeError("division by zero")
    quotient = abs(a) // abs(b)
    return checked_int(quotient if (a < 0) == (b < 0) else -quotient)


@define("_/_", "uint, uint", "uint")
def _div_uint(a: int, b: int) -> UInt:
    if b == 0:
        raise CelRuntimeError("division by zero")
    return UInt(a // b)


@define("_/_", "double, double", "double")
def _div_double(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


@define("_%_", "int, int", "int")
def _mod_int(a: int, b: int) -> int:
    if b == 0:
        raise CelRuntimeError("modulus by zero")
    if a == INT64_MIN and b == -1:  # as cel-go: the quotient would overflow, so the modulus is an error too
        raise CelRuntimeError("integer overflow")
    remainder = abs(a) % abs(b)
    return -remainder if a < 0 else remainder


@define("_%_", "uint, uint", "uint")
def _mod_uint(a: int, b: int) -> UInt:
    if b == 0:
        raise CelRuntimeError("modulus by zero")
    return UInt(a % b)


@define("-_", "int", "int")
def _negate_int(a: int) -> int:
    return checked_int(-a)


@define("-_", "double", "double")
def _negate_double(a: float) -> float:
    return -a


@define("!_", "bool", "bool")
def _not(a: bool) -> bool:
    return not a


# -- size, strings, membership -----------------------------------------------------------------------
def _size(value: object) -> int:
    return len(value)  # type: ignore[arg-type]


for _kind in ("string", "bytes", "list(dyn)", "map(dyn, dyn)"):
    define("size", _kind, "int")(_size)
    define("size", _kind, "int", member=True)(_size)


@define("contains", "string, string", "bool", member=True)
def _contains(text: str, part: str) -> bool:
    return part in text


@define("startsWith", "string, string", "bool", member=True)
def _starts_with(text: str, prefix: str) -> bool:
    return text.startswith(prefix)


@define("endsWith", "string, string", "bool", member=True)
def _ends_with(text: str, suffix: str) -> bool:
    return text.endswith(suffix)


@define("matches", "string, string", "bool", member=True)
@define("matches", "string, string", "bool")
def _matches(text: str, pattern: str) -> bool:
    return compiled(pattern).search(text) is not None


@define("@in", "dyn, list(dyn)", "bool")
def _in_list(item: object, items: tuple[object, ...]) -> bool:
    return any(equal(item, candidate) for candidate in items)


@define("@in", "dyn, map(dyn, dyn)", "bool")
def _in_map(key: object, mapping: Mapping[object, object]) -> bool:
    if isinstance(key, float):
        if not key.is_integer():
            return False
        key = int(key)
    elif kind(key) not in ("int", "uint", "bool", "string"):
        return False
    return map_key(key) in mapping


# -- conversions -------------------------------------------------------------------------------------
@define("int", "int", "int")
def _int_of_int(value: int) -> int:
    return value


@define("int", "uint", "int")
def _int_of_uint(value: int) -> int:
    if value > INT64_MAX:
        raise CelRuntimeError("range error converting uint to int")
    return int(value)


@define("int", "double", "int")
def _int_of_double(value: float) -> int:
    if math.isnan(value) or not -(2.0**63) < value < 2.0**63:
        raise CelRuntimeError("range error converting double to int")
    return int(value)


@define("int", "string", "int")
def _int_of_string(text: str) -> int:
    if not _INT_TEXT.fullmatch(text):
        raise CelRuntimeError(f"cannot convert string {text!r} to int")
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise CelRuntimeError(f"cannot convert string {text!r} to int: out of range")
    return value


@define("uint", "uint", "uint")
def _uint_of_uint(value: int) -> UInt:
    return UInt(value)


@define("uint", "int", "uint")
def _uint_of_int(value: int) -> UInt:
    if value < 0:
        raise CelRuntimeError("range error converting int to uint")
    return UInt(value)


@define("uint", "double", "uint")
def _uint_of_double(value: float) -> UInt:
    if math.isnan(value) or not -1.0 < value < 2.0**64:
        raise CelRuntimeError("range error converting double to uint")
    return UInt(int(value))


@define("uint", "string", "uint")
def _uint_of_string(text: str) -> UInt:
    if not _UINT_TEXT.fullmatch(text) or int(text) > UINT64_MAX:
        raise CelRuntimeError(f"cannot convert string {text!r} to uint")
    return UInt(int(text))


@define("double", "double", "double")
def _double_of_double(value: float) -> float:
    return value


@define("double", "int", "double")
@define("double", "uint", "double")
def _double_of_integer(value: int) -> float:
    return float(value)


@define("double", "string", "double")
def _double_of_string(text: str) -> float:
    if not _FLOAT_TEXT.fullmatch(text):
        raise CelRuntimeError(f"cannot convert string {text!r} to double")
    return float(text)


@define("string", "string", "string")
def _string_of_string(value: str) -> str:
    return value


@define("string", "int", "string")
@define("string", "uint", "string")
def _string_of_integer(value: int) -> str:
    return str(int(value))


@define("string", "double", "string")
def _string_of_double(value: float) -> str:
    return format_double(value)


@define("string", "bool", "string")
def _string_of_bool(value: bool) -> str:
    return "true" if value else "false"


@define("string", "bytes", "string")
def _string_of_bytes(value: bytes) -> str:
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise CelRuntimeError("invalid UTF-8 in bytes, cannot convert to string") from None


@define("bytes", "bytes", "bytes")
def _bytes_of_bytes(value: bytes) -> bytes:
    return value


@define("bytes", "string", "bytes")
def _bytes_of_string(value: str) -> bytes:
    return value.encode()


@define("bool", "bool", "bool")
def _bool_of_bool(value: bool) -> bool:
    return value


@define("bool", "string", "bool")
def _bool_of_string(text: str) -> bool:
    if text not in _BOOL_TEXT:
        raise CelRuntimeError(f"cannot convert string {text!r} to bool")
    return _BOOL_TEXT[text]


@define("dyn", "dyn", "dyn")
def _dyn(value: object) -> object:
    return value


@define("type", "dyn", "type")
def _type(value: object) -> object:
    return type_value(value)
