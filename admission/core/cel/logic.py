"""`&&` and `||` with CEL's commutative error absorption (`false && error` is false, `error || true`
is true), for two operands and for flattened chains."""

from __future__ import annotations

from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.runtime import Closure, Context
from admission.core.cel.values import kind


def conjunction_of(left: Closure, right: Closure) -> Closure:
    def conjunction(c: Context) -> object:
        try:
            a = left(c)
        except CelRuntimeError as error:
            if right(c) is False:
                return False
            raise error from None
        if a is False:
            return False
        b = right(c)
        if b is False:
            return False
        if a is True and b is True:
            return True
        return _logic_error("_&&_", a, b)
    return conjunction


def disjunction_of(left: Closure, right: Closure) -> Closure:
    def disjunction(c: Context) -> object:
        try:
            a = left(c)
        except CelRuntimeError as error:
            if right(c) is True:
                return True
            raise error from None
        if a is True:
            return True
        b = right(c)
        if b is True:
            return True
        if a is False and b is False:
            return False
        return _logic_error("_||_", a, b)
    return disjunction


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
