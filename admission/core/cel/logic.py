"""`&&` and `||` with CEL's commutative error absorption (`false && error` is false, `error || true`
is true), for two operands and for flattened chains."""

from __future__ import annotations

from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.runtime import Closure, Context
from admission.core.cel.values import kind


def conjunction_of(left: Closure, right: Closure) -> Closure:
    return _short_circuit(left, right, False, "_&&_")


def disjunction_of(left: Closure, right: Closure) -> Closure:
    return _short_circuit(left, right, True, "_||_")


def _short_circuit(left: Closure, right: Closure, absorbing: bool, name: str) -> Closure:
    """CEL's commutative `&&` (absorbing False) and `||` (absorbing True): either side's absorbing value
    decides, even when the other side is an error; otherwise both must be booleans."""
    other = not absorbing

    def logic(c: Context) -> object:
        try:
            a = left(c)
        except CelRuntimeError as error:
            if right(c) is absorbing:
                return absorbing
            raise error from None
        if a is absorbing:
            return absorbing
        b = right(c)
        if b is absorbing:
            return absorbing
        if a is other and b is other:
            return other
        return _logic_error(name, a, b)
    return logic


def chain_of(runs: list[Closure], stop_on: bool, name: str) -> Closure:
    """`a && b && ...` (stop_on False) or `a || b || ...` (stop_on True), absorbing errors as CEL does."""
    def chain(c: Context) -> object:
        error: CelRuntimeError | None = None
        for run in runs:
            try:
                value = run(c)
            except CelRuntimeError as failure:
                error = error or failure
                continue
            if value is stop_on:
                return stop_on
            if value is not (not stop_on) and error is None:
                error = CelRuntimeError(f"no such overload: {name} applied to {kind(value)}")
        if error is not None:
            raise CelRuntimeError(str(error))
        return not stop_on
    return chain


def _logic_error(name: str, a: object, b: object) -> object:
    raise CelRuntimeError(f"no such overload: {name}({kind(a)}, {kind(b)})")
