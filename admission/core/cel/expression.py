"""General expressions over named variables (quota weights, custom-resource checks)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from admission.core.cel.compiler import Environment
from admission.core.cel.device import DeviceView, device_fields
from admission.core.cel.errors import CelCompileError, CelRuntimeError
from admission.core.cel.frontend import compile_checked
from admission.core.cel.runtime import COST_LIMIT, Context
from admission.core.cel.types import (
    BOOL,
    BYTES,
    DEVICE,
    DOUBLE,
    DYN,
    INT,
    QUANTITY,
    SEMVER,
    STRING,
    Type,
    list_of,
    map_of,
    parse_type,
    runtime_kind,
)
from admission.core.cel.values import UINT64_MAX, UInt, cel_key, kind, map_key
from admission.core.quantity import Quantity
from admission.core.semver import Semver

_PYTHON_TYPES: dict[object, Type] = {
    int: INT, float: DOUBLE, str: STRING, bool: BOOL, bytes: BYTES, Quantity: QUANTITY,
    Semver: SEMVER, list: list_of(DYN), tuple: list_of(DYN), dict: map_of(DYN, DYN), object: DYN,
    Any: DYN, UInt: Type("uint"),
}
TypeHint = type | str | Type | object


def static_type(hint: TypeHint) -> Type:
    """A variable's declared type: a Python type, a CEL type name (`map(string, int)`), or `device`."""
    if isinstance(hint, Type):
        return hint
    if isinstance(hint, str):
        return DEVICE if hint == "device" else parse_type(hint)
    found = _PYTHON_TYPES.get(hint)
    if found is None:
        raise CelCompileError(f"compilation failed: unsupported variable type {hint!r}")
    return found


class Expression:
    """A compiled expression; `evaluate(activation)` returns its CEL value as plain Python."""

    def __init__(self, expression: str, variables: Mapping[str, Type], run: Any, result: Type) -> None:
        self.expression = expression
        self.result_type = result
        self._variables = dict(variables)
        self._run = run

    def evaluate(self, activation: Mapping[str, object]) -> object:
        values = {name: _checked(name, _import(value, self._variables.get(name)), self._variables.get(name))
                  for name, value in activation.items()}
        try:
            return _export(self._run(Context(values, (), COST_LIMIT)))
        except RecursionError:
            raise CelRuntimeError("expression nested too deeply to evaluate") from None
        except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError) as error:
            raise CelRuntimeError(f"evaluation failed: {error}") from None

    def __repr__(self) -> str:
        return f"Expression({self.expression!r})"


def compile_expression(expression: str, variables: Mapping[str, TypeHint]) -> Expression:
    declared = tuple((name, static_type(hint)) for name, hint in variables.items())
    return _compile(expression, declared)


@lru_cache(maxsize=1024)
def _compile(expression: str, declared: tuple[tuple[str, Type], ...]) -> Expression:
    variables = dict(declared)
    env = Environment(variables=variables, object_fields={DEVICE: device_fields(True)},
                      list_attributes=True)
    compiled = compile_checked(expression, env)
    if compiled.slots:
        raise CelCompileError("compilation failed: a `device` variable is only available to selectors")
    return Expression(expression, variables, compiled.run, compiled.type)


def _import(value: object, static: Type | None) -> object:
    """Python values into CEL's representation: lists become tuples, bool map keys are tagged."""
    if static == DEVICE:
        return DeviceView(value, True, True)  # type: ignore[arg-type]
    if isinstance(value, list | tuple):
        return tuple(_import(v, None) for v in value)
    if isinstance(value, dict):
        return {map_key(k): _import(v, None) for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool) and value > UINT64_MAX:
        raise CelRuntimeError(f"integer {value} is out of range")
    return value


def _checked(name: str, value: object, static: Type | None) -> object:
    """A value of a declared primitive type must have that kind (ints are accepted for doubles)."""
    if static is None or static.is_dyn:
        return value
    wanted = runtime_kind(static)
    if wanted is None or (wanted == "map" and isinstance(value, Mapping)):
        return value
    actual = kind(value)
    if wanted == "double" and actual == "int":
        return float(value)  # type: ignore[arg-type]
    if wanted == "uint" and actual == "int" and value >= 0:  # type: ignore[operator]
        return UInt(value)  # type: ignore[call-overload]
    if actual != wanted:
        raise CelRuntimeError(f"variable {name}: declared {static}, got a value of type {actual}")
    return value


def _export(value: object) -> object:
    if isinstance(value, tuple):
        return [_export(v) for v in value]
    if isinstance(value, Mapping):
        return {cel_key(k): _export(v) for k, v in value.items()}
    return value
