"""The function registry: overloads with static signatures (for the checker) and implementations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.types import DYN, Type, assignable, element, parse_type, runtime_kind, split_top_level
from admission.core.cel.values import kind

Impl = Callable[..., Any]
ResultRule = Callable[[Sequence[Type]], Type]
F = TypeVar("F", bound=Impl)


@dataclass(frozen=True, slots=True)
class Overload:
    name: str
    member: bool
    params: tuple[Type, ...]  # the receiver first, for member functions
    result: ResultRule
    impl: Impl
    kinds: tuple[str | None, ...]


FUNCTIONS: dict[str, list[Overload]] = {}


def define(name: str, signature: str, result: str, *, member: bool = False) -> Callable[[F], F]:
    """Register an implementation. `signature` lists parameter types (receiver first for methods);
    `result` is a type, `$N` (the type of argument N) or `$eN` (its element type)."""
    params = tuple(parse_type(p) for p in split_top_level(signature))

    def register(impl: F) -> F:
        overload = Overload(name, member, params, _result_rule(result), impl,
                            tuple(runtime_kind(p) for p in params))
        FUNCTIONS.setdefault(name, []).append(overload)
        return impl

    return register


def _result_rule(result: str) -> ResultRule:
    if result.startswith("$e"):
        position = int(result[2:])
        return lambda args: element(args[position])
    if result.startswith("$"):
        position = int(result[1:])
        return lambda args: args[position]
    fixed = parse_type(result)
    return lambda args: fixed


def candidates(name: str, member: bool, arg_types: Sequence[Type]) -> list[Overload] | None:
    """Overloads that may accept these argument types; None when no function has that name/style."""
    declared = [o for o in FUNCTIONS.get(name, ()) if o.member == member]
    if not declared:
        return None
    return [o for o in declared if len(o.params) == len(arg_types)
            and all(assignable(p, a) for p, a in zip(o.params, arg_types, strict=True))]


def result_type(overloads: Sequence[Overload], arg_types: Sequence[Type]) -> Type:
    results = {o.result(arg_types) for o in overloads}
    return results.pop() if len(results) == 1 else DYN


def dispatcher(name: str, overloads: Sequence[Overload], arg_types: Sequence[Type]) -> Impl:
    """The callable to run: the implementation itself when the static types settle it."""
    if len(overloads) == 1:
        only = overloads[0]
        if all(not a.is_dyn and (k is None or runtime_kind(a) == k)
               for a, k in zip(arg_types, only.kinds, strict=True)):
            return only.impl
    table = [(o.kinds, o.impl) for o in overloads]

    def dispatch(*args: object) -> object:
        kinds = [kind(a) for a in args]
        for wanted, impl in table:
            if all(w is None or w == k for w, k in zip(wanted, kinds, strict=True)):
                return impl(*args)
        raise CelRuntimeError(f"no such overload: {name}({', '.join(kinds)})")

    return dispatch
