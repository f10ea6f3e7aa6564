"""Comprehension loops (`all`, `exists`, `exists_one`, `map`, `filter`, `transformList`,
`transformMap`) and the binding of loop and `cel.bind` variables."""

from __future__ import annotations

from collections.abc import Callable

from admission.core.cel import runtime as rt
from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.runtime import Closure, Context
from admission.core.cel.values import kind

UNBOUND = object()


def restore(variables: dict[str, object], name: str, saved: object) -> None:
    if saved is UNBOUND:
        variables.pop(name, None)
    else:
        variables[name] = saved


class Loop:
    """Runs a comprehension body per element, charging the body's cost per iteration.

    Loop variables are bound in the context's variables and restored afterwards, also when the
    loop stops early or fails.
    """

    def __init__(self, variables: tuple[str, ...], two: bool, target: Closure, bodies: list[Closure],
                 cost: int) -> None:
        self.variables, self.two, self.target, self.bodies, self.cost = variables, two, target, bodies, cost

    def run(self, c: Context, step: Callable[[object], bool]) -> None:
        """Call `step(first_variable)` per element until it returns True."""
        items = rt.iteration_items(self.target(c), self.two)
        first = self.variables[0]
        second = self.variables[1] if self.two else None
        saved = [c.vars.get(v, UNBOUND) for v in self.variables]
        try:
            for key, value in items:
                c.charge(self.cost)
                c.vars[first] = key
                if second is not None:
                    c.vars[second] = value
                if step(key):
                    return
        finally:
            for variable, old in zip(self.variables, saved, strict=True):
                restore(c.vars, variable, old)

    def all(self, c: Context) -> object:
        return self._quantifier(c, stop_on=False)

    def exists(self, c: Context) -> object:
        return self._quantifier(c, stop_on=True)

    def _quantifier(self, c: Context, stop_on: bool) -> object:
        predicate = self.bodies[0]
        pending: list[CelRuntimeError] = []
        decided = [False]

        def step(_: object) -> bool:
            try:
                outcome = predicate(c)
            except CelRuntimeError as error:
                pending.append(error)
                return False
            if outcome is stop_on:
                decided[0] = True
                return True
            if outcome is not (not stop_on):
                pending.append(CelRuntimeError(f"no such overload: predicate of type {kind(outcome)}"))
            return False

        self.run(c, step)
        if decided[0]:
            return stop_on
        if pending:
            raise CelRuntimeError(str(pending[0]))
        return not stop_on

    def exists_one(self, c: Context) -> object:
        predicate = self.bodies[0]
        count = [0]

        def step(_: object) -> bool:
            if rt.require_bool(predicate(c), "exists_one"):
                count[0] += 1
            return False

        self.run(c, step)
        return count[0] == 1

    def filter(self, c: Context) -> object:
        predicate = self.bodies[0]
        kept: list[object] = []

        def step(key: object) -> bool:
            if rt.require_bool(predicate(c), "filter"):
                kept.append(key)
            return False

        self.run(c, step)
        return tuple(kept)

    def map(self, c: Context) -> object:
        transform = self.bodies[-1]
        predicate = self.bodies[0] if len(self.bodies) == 2 else None
        mapped: list[object] = []

        def step(_: object) -> bool:
            if predicate is None or rt.require_bool(predicate(c), "map"):
                mapped.append(transform(c))
            return False

        self.run(c, step)
        return tuple(mapped)

    def transform_map(self, c: Context) -> object:
        transform = self.bodies[-1]
        predicate = self.bodies[0] if len(self.bodies) == 2 else None
        pairs: list[tuple[object, object]] = []

        def step(key: object) -> bool:
            if predicate is None or rt.require_bool(predicate(c), "transformMap"):
                pairs.append((key, transform(c)))
            return False

        self.run(c, step)
        return rt.build_map(pairs)
