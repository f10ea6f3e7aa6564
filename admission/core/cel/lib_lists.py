"""Kubernetes' list library, CEL's ext lists, and the sets library."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.functions import define
from admission.core.cel.stdlib import checked_int, checked_uint
from admission.core.cel.values import NONE, Optional, compare, equal, kind

Items = tuple[object, ...]


def _ordered(items: Items) -> None:
    kinds = {kind(item) for item in items}
    numeric = kinds <= {"int", "uint", "double"}
    if (len(kinds) > 1 and not numeric) or kinds - {"int", "uint", "double", "string", "bytes", "bool"}:
        raise CelRuntimeError(f"list elements are not comparable: {', '.join(sorted(kinds))}")


@define("isSorted", "list(dyn)", "bool", member=True)
def _is_sorted(items: Items) -> bool:
    _ordered(items)
    return all(compare(a, b) <= 0 for a, b in pairwise(items))


@define("sum", "list(dyn)", "$e0", member=True)
def _sum(items: Items) -> object:
    kinds = {kind(item) for item in items}
    if not items:
        return 0
    if len(kinds) != 1 or not kinds <= {"int", "uint", "double"}:
        raise CelRuntimeError(f"sum() needs numbers of one type, got {', '.join(sorted(kinds))}")
    total = sum(items)  # type: ignore[arg-type]
    if kinds == {"int"}:
        return checked_int(total)
    return checked_uint(total) if kinds == {"uint"} else float(total)


def _extreme(items: Items, pick: Callable[[int], bool], name: str) -> object:
    if not items:
        raise CelRuntimeError(f"{name}() called on empty list")
    _ordered(items)
    best = items[0]
    for item in items[1:]:
        if pick(compare(item, best)):
            best = item
    return best


@define("min", "list(dyn)", "$e0", member=True)
def _min(items: Items) -> object:
    return _extreme(items, lambda c: c < 0, "min")


@define("max", "list(dyn)", "$e0", member=True)
def _max(items: Items) -> object:
    return _extreme(items, lambda c: c > 0, "max")


@define("indexOf", "list(dyn), dyn", "int", member=True)
def _list_index_of(items: Items, wanted: object) -> int:
    return next((i for i, item in enumerate(items) if equal(item, wanted)), -1)


@define("lastIndexOf", "list(dyn), dyn", "int", member=True)
def _list_last_index_of(items: Items, wanted: object) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if equal(items[i], wanted)), -1)


@define("slice", "list(dyn), int, int", "$0", member=True)
def _slice(items: Items, start: int, end: int) -> Items:
    if start < 0 or end < 0 or start > end or end > len(items):
        raise CelRuntimeError(f"cannot slice({start}, {end}) a list of size {len(items)}")
    return tuple(items[start:end])


@define("flatten", "list(dyn)", "list(dyn)", member=True)
def _flatten(items: Items) -> Items:
    return _flatten_depth(items, 1)


@define("flatten", "list(dyn), int", "list(dyn)", member=True)
def _flatten_depth(items: Items, depth: int) -> Items:
    if depth < 0:
        raise CelRuntimeError("flatten(): level must be non-negative")
    out: list[object] = []
    for item in items:
        if depth > 0 and isinstance(item, (tuple, list)):
            out.extend(_flatten_depth(tuple(item), depth - 1))
        else:
            out.append(item)
    return tuple(out)


@define("distinct", "list(dyn)", "$0", member=True)
def _distinct(items: Items) -> Items:
    out: list[object] = []
    for item in items:
        if not any(equal(item, seen) for seen in out):
            out.append(item)
    return tuple(out)


@define("sort", "list(dyn)", "$0", member=True)
def _sort(items: Items) -> Items:
    _ordered(items)
    out = list(items)
    for i in range(1, len(out)):  # insertion sort: stable, and uses CEL's ordering
        j = i
        while j > 0 and compare(out[j - 1], out[j]) > 0:
            out[j - 1], out[j] = out[j], out[j - 1]
            j -= 1
    return tuple(out)


@define("reverse", "list(dyn)", "$0", member=True)
def _reverse(items: Items) -> Items:
    return tuple(reversed(items))


@define("first", "list(dyn)", "optional_type(dyn)", member=True)
def _first(items: Items) -> Optional:
    return Optional(True, items[0]) if items else NONE


@define("last", "list(dyn)", "optional_type(dyn)", member=True)
def _last(items: Items) -> Optional:
    return Optional(True, items[-1]) if items else NONE


@define("lists.range", "int", "list(int)")
def _range(count: int) -> Items:
    if count > 1_000_000:
        raise CelRuntimeError("lists.range(): size limit exceeded")
    return tuple(range(max(count, 0)))


@define("sets.contains", "list(dyn), list(dyn)", "bool")
def _sets_contains(items: Items, wanted: Items) -> bool:
    return all(any(equal(w, item) for item in items) for w in wanted)


@define("sets.equivalent", "list(dyn), list(dyn)", "bool")
def _sets_equivalent(left: Items, right: Items) -> bool:
    return _sets_contains(left, right) and _sets_contains(right, left)


@define("sets.intersects", "list(dyn), list(dyn)", "bool")
def _sets_intersects(left: Items, right: Items) -> bool:
    return any(any(equal(a, b) for b in right) for a in left)
