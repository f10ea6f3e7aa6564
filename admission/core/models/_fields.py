"""Typed reading of manifest fields: every failure names the object, the field path and the reason."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from admission.core.errors import InvalidInput
from admission.core.quantity import Quantity, QuantityError, parse_quantity

# Aliases: the reader's method names shadow the builtins inside the class body.
Text = str
Int = int
Bool = bool
List = list


class _EmptyMap(dict[Any, Any]):
    """The one empty mapping the models share for absent maps (most pods have no node selector, overhead,
    pod-level resources or limits: five empty dicts a pod, a third of a bound pod's model). A dict, so that it
    compares, copies and serializes as one; it refuses every change."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise TypeError("a model's empty mapping is shared and cannot be changed")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = __ior__ = _refuse


EMPTY_MAP: dict[Any, Any] = _EmptyMap()


def empty_map() -> dict[Any, Any]:
    """`EMPTY_MAP`, as a dataclass field's default (`field(default_factory=empty_map)`)."""
    return EMPTY_MAP


class Fields:
    """A view on one mapping inside a manifest, remembering where it sits."""

    __slots__ = ("data", "obj", "path")

    def __init__(self, obj: Text, data: object, path: Text = "") -> None:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise InvalidInput(obj, path or "(root)", f"expected a mapping, got {_kind(data)}")
        self.obj = obj
        self.data: Mapping[Text, Any] = data
        self.path = path

    def where(self, key: Text) -> Text:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: Text, reason: Text) -> InvalidInput:
        return InvalidInput(self.obj, self.where(key), reason)

    def has(self, key: Text) -> Bool:
        return self.data.get(key) is not None

    def raw(self, key: Text) -> Any:
        return self.data.get(key)

    def str(self, key: Text, *, required: Bool = False, default: Text = "") -> Text:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.fail(key, "is required")
            return default
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {_kind(value)}")
        if required and not value:
            raise self.fail(key, "must not be empty")
        return value

    def opt_str(self, key: Text) -> Text | None:
        return self.str(key) if self.has(key) else None

    def int(self, key: Text, *, required: Bool = False, default: Int = 0) -> Int:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.fail(key, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {_kind(value)}")
        return value

    def opt_int(self, key: Text) -> Int | None:
        return self.int(key) if self.has(key) else None

    def bool(self, key: Text, *, default: Bool = False) -> Bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {_kind(value)}")
        return value

    def opt_bool(self, key: Text) -> Bool | None:
        return self.bool(key) if self.has(key) else None

    def map(self, key: Text) -> Fields:
        return Fields(self.obj, self.data.get(key), self.where(key))

    def items(self) -> Iterator[tuple[Text, Any]]:
        return iter(self.data.items())

    def list(self, key: Text) -> List[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list, got {_kind(value)}")
        return value

    def maps(self, key: Text) -> Iterator[Fields]:
        """Each entry of a list of mappings, addressed as `key[i]`."""
        for index, item in enumerate(self.list(key)):
            yield Fields(self.obj, item, f"{self.where(key)}[{index}]")

    def str_list(self, key: Text) -> tuple[Text, ...]:
        values = self.list(key)
        for index, value in enumerate(values):
            if not isinstance(value, str):
                raise InvalidInput(self.obj, f"{self.where(key)}[{index}]",
                                   f"expected a string, got {_kind(value)}")
        return tuple(values)

    def str_map(self, key: Text) -> dict[Text, Text]:
        result: dict[Text, Text] = {}
        for name, value in self.map(key).items():
            if not isinstance(value, str):
                raise InvalidInput(self.obj, f"{self.where(key)}.{name}",
                                   f"expected a string, got {_kind(value)}")
            result[Text(name)] = value
        return result or EMPTY_MAP

    def quantity(self, key: Text) -> Quantity:
        return to_quantity(self.obj, self.where(key), self.data.get(key))

    def quantity_list(self, key: Text) -> List[Quantity]:
        return [to_quantity(self.obj, f"{self.where(key)}[{i}]", v) for i, v in enumerate(self.list(key))]

    def quantity_map(self, key: Text) -> dict[Text, Quantity]:
        inner = self.map(key)
        return {str(name): to_quantity(self.obj, inner.where(str(name)), value)
                for name, value in inner.items()} or EMPTY_MAP


def to_quantity(obj: Text, where: Text, value: object) -> Quantity:
    if value is None:
        raise InvalidInput(obj, where, "is required")
    if isinstance(value, bool) or not isinstance(value, str | Int | float):
        raise InvalidInput(obj, where, f"expected a quantity, got {_kind(value)}")
    try:
        return parse_quantity(value)
    except QuantityError as err:
        raise InvalidInput(obj, where, str(err)) from None


def _kind(value: object) -> Text:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"
