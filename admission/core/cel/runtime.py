"""Evaluation-time helpers: the context, field and index access, and comprehension loops."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.values import NONE, Optional, cel_key, kind, map_key

COST_LIMIT: Final = 1_000_000


class Context:
    """Per-evaluation state: variable values, the cost spent so far, and pre-read device values."""

    __slots__ = ("cost", "limit", "slots", "vars")

    def __init__(self, variables: dict[str, object], slots: tuple[object, ...] = (),
                 limit: int = COST_LIMIT) -> None:
        self.vars = variables
        self.slots = slots
        self.cost = 0
        self.limit = limit

    def charge(self, amount: int) -> None:
        self.cost += amount
        if self.cost > self.limit:
            raise CelRuntimeError(f"operation cancelled: actual cost limit exceeded ({self.limit})")


Closure = Callable[[Context], object]


def no_such_key(key: object) -> CelRuntimeError:
    shown = ("true" if key else "false") if isinstance(key, bool) else key
    return CelRuntimeError(f"no such key: {shown}")


def select(value: object, field: str) -> object:
    if isinstance(value, Mapping):
        try:
            return value[field]
        except KeyError:
            raise no_such_key(field) from None
    if isinstance(value, Optional):
        raise CelRuntimeError(f"no such key: {field} (select on an optional value; use .?{field})")
    raise CelRuntimeError(f"type '{kind(value)}' does not support field selection")


def has_field(value: object, field: str) -> bool:
    if isinstance(value, Mapping):
        return field in value
    raise CelRuntimeError(f"invalid type for field selection: {kind(value)}")


def select_optional(value: object, field: str) -> Optional:
    if isinstance(value, Optional):
        if not value.present:
            return NONE
        value = value.value
    if isinstance(value, Mapping):
        return Optional(True, value[field]) if field in value else NONE
    raise CelRuntimeError(f"type '{kind(value)}' does not support field selection")


def index(container: object, key: object) -> object:
    if isinstance(container, (tuple, list)):
        position = _list_position(key)
        if not 0 <= position < len(container):
            raise CelRuntimeError(f"index out of range: {position}")
        return container[position]
    if isinstance(container, Mapping):
        stored = _map_lookup_key(key)
        try:
            return container[stored]
        except (KeyError, TypeError):
            raise no_such_key(key) from None
    raise CelRuntimeError(f"no such overload: {kind(container)}[{kind(key)}]")


def index_optional(container: object, key: object) -> Optional:
    if isinstance(container, Optional):
        if not container.present:
            return NONE
        container = container.value
    if isinstance(container, (tuple, list)):
        position = _list_position(key)
        return Optional(True, container[position]) if 0 <= position < len(container) else NONE
    if isinstance(container, Mapping):
        stored = _map_lookup_key(key)
        return Optional(True, container[stored]) if stored in container else NONE
    raise CelRuntimeError(f"no such overload: {kind(container)}[?{kind(key)}]")


def _list_position(key: object) -> int:
    key_kind = kind(key)
    if key_kind in ("int", "uint") or (key_kind == "double" and float(key).is_integer()):  # type: ignore[arg-type]
        assert isinstance(key, (int, float))
        return int(key)
    raise CelRuntimeError(f"invalid list index of type {key_kind}: {key}")


def _map_lookup_key(key: object) -> object:
    key_kind = kind(key)
    if key_kind == "double":
        assert isinstance(key, float)
        return int(key) if key.is_integer() else key
    if key_kind not in ("int", "uint", "bool", "string"):
        raise CelRuntimeError(f"unsupported map key type: {key_kind}")
    return map_key(key)


def iteration_items(value: object, two_variables: bool) -> Iterable[tuple[object, object]]:
    """(first, second) loop variables: (index, element) for lists, (key, value) for maps."""
    if isinstance(value, (tuple, list)):
        return enumerate(value) if two_variables else ((item, None) for item in value)
    if isinstance(value, Mapping):
        if two_variables:
            return ((cel_key(k), value[k]) for k in value)
        return ((cel_key(k), None) for k in value)
    raise CelRuntimeError(f"cannot iterate over a value of type {kind(value)}")


def require_bool(value: object, where: str) -> bool:
    if value is True or value is False:
        return value
    raise CelRuntimeError(f"no such overload: {where} applied to {kind(value)} (a bool is needed)")


def build_map(pairs: Iterable[tuple[object, object]]) -> dict[object, object]:
    built: dict[object, object] = {}
    for key, value in pairs:
        key_kind = kind(key)
        if key_kind not in ("int", "uint", "bool", "string"):
            raise CelRuntimeError(f"unsupported map key type: {key_kind}")
        stored = map_key(key)
        if stored in built:
            raise CelRuntimeError(f"Failed with repeated key: {key}")
        built[stored] = value
    return built
