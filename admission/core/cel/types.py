"""Static CEL types, as far as the checker needs them to reject calls that can never succeed."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True, slots=True)
class Type:
    name: str
    params: tuple[Type, ...] = ()

    def __str__(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}({', '.join(map(str, self.params))})"

    @property
    def is_dyn(self) -> bool:
        return self.name == "dyn"


INT = Type("int")
UINT = Type("uint")
DOUBLE = Type("double")
BOOL = Type("bool")
STRING = Type("string")
BYTES = Type("bytes")
NULL = Type("null_type")
DYN = Type("dyn")
TYPE = Type("type")
QUANTITY = Type("kubernetes.Quantity")
SEMVER = Type("kubernetes.Semver")
DEVICE = Type("kubernetes.DRADevice")
NUMERIC = frozenset({INT, UINT, DOUBLE})


def list_of(element: Type) -> Type:
    return Type("list", (element,))


def map_of(key: Type, value: Type) -> Type:
    return Type("map", (key, value))


def optional_of(value: Type) -> Type:
    return Type("optional_type", (value,))


def element(container: Type) -> Type:
    """Element type of a list, value type of a map or optional, or dyn."""
    if container.name in ("list", "optional_type") and container.params:
        return container.params[0]
    if container.name == "map" and container.params:
        return container.params[1]
    return DYN


def assignable(param: Type, arg: Type) -> bool:
    """Whether a value of static type `arg` may be passed where `param` is expected (dyn matches all)."""
    if param.is_dyn or arg.is_dyn:
        return True
    if param.name != arg.name:
        return False
    if not param.params or not arg.params:
        return True
    return all(assignable(p, a) for p, a in zip(param.params, arg.params, strict=True))


def join(types: list[Type]) -> Type:
    """The common type of list elements or ternary branches: dyn when they differ."""
    if not types:
        return DYN
    first = types[0]
    return first if all(t == first for t in types[1:]) else DYN


@cache
def parse_type(text: str) -> Type:
    """Parse a signature type such as `int`, `list(dyn)` or `map(string, dyn)`."""
    text = text.strip()
    name, _, rest = text.partition("(")
    if not rest:
        return {"null": NULL, "quantity": QUANTITY, "semver": SEMVER}.get(name, Type(name))
    return Type(name, tuple(parse_type(p) for p in split_top_level(rest[:-1])))


def split_top_level(text: str) -> list[str]:
    """Split at the commas that are not inside parentheses: `int, map(string, dyn)` -> two parts."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += (char == "(") - (char == ")")
        current += char
    if current.strip():
        parts.append(current)
    return parts


RUNTIME_KIND = {
    "int": "int", "uint": "uint", "double": "double", "bool": "bool", "string": "string",
    "bytes": "bytes", "null_type": "null", "list": "list", "map": "map", "type": "type",
    "optional_type": "optional", "kubernetes.Quantity": "quantity", "kubernetes.Semver": "semver",
}


def runtime_kind(static: Type) -> str | None:
    """The runtime kind a parameter type demands, or None for dyn."""
    return RUNTIME_KIND.get(static.name)
