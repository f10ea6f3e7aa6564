"""Optional values: `optional.of`, `optional.none`, `hasValue`, `value`, `orValue`, `or`."""

from __future__ import annotations

from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.functions import define
from admission.core.cel.values import NONE, Optional


@define("optional.of", "dyn", "optional_type(dyn)")
def _of(value: object) -> Optional:
    return Optional(True, value)


@define("optional.none", "", "optional_type(dyn)")
def _none() -> Optional:
    return NONE


@define("optional.ofNonZeroValue", "dyn", "optional_type(dyn)")
def _of_non_zero(value: object) -> Optional:
    zero = value is None or value is False or (not value and not isinstance(value, bool))
    return NONE if zero else Optional(True, value)


@define("hasValue", "optional_type(dyn)", "bool", member=True)
def _has_value(optional: Optional) -> bool:
    return optional.present


@define("value", "optional_type(dyn)", "$e0", member=True)
def _value(optional: Optional) -> object:
    if not optional.present:
        raise CelRuntimeError("optional.none() dereference")
    return optional.value


@define("orValue", "optional_type(dyn), dyn", "dyn", member=True)
def _or_value(optional: Optional, default: object) -> object:
    return optional.value if optional.present else default


@define("or", "optional_type(dyn), optional_type(dyn)", "$0", member=True)
def _or(optional: Optional, other: Optional) -> Optional:
    return optional if optional.present else other
