"""The parsed form of a CEL expression. Every node remembers the offset it is reported at."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Node:
    pos: int


@dataclass(frozen=True, slots=True)
class Literal(Node):
    value: object


@dataclass(frozen=True, slots=True)
class Ident(Node):
    name: str


@dataclass(frozen=True, slots=True)
class Select(Node):
    """`operand.field`; `test_only` for `has(operand.field)`, `optional` for `operand.?field`."""

    operand: Node
    field: str
    test_only: bool = False
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Index(Node):
    """`operand[index]`, or `operand[?index]` when `optional`."""

    operand: Node
    index: Node
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Call(Node):
    """A function or operator call. Operators use CEL's internal names (`_+_`, `!_`, `_?_:_`...)."""

    function: str
    target: Node | None
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class ListLit(Node):
    elements: tuple[Node, ...]
    optional_indices: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class MapEntry:
    key: Node
    value: Node
    optional: bool = False


@dataclass(frozen=True, slots=True)
class MapLit(Node):
    entries: tuple[MapEntry, ...]


@dataclass(frozen=True, slots=True)
class Comprehension(Node):
    """A macro over a list or map: `all`, `exists`, `exists_one`, `map`, `filter` (one or two variables)."""

    macro: str
    target: Node
    variables: tuple[str, ...]
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Bind(Node):
    """`cel.bind(name, init, body)`."""

    name: str
    init: Node
    body: Node


def count_nodes(node: Node) -> int:
    """Size of a tree, used as the static cost of evaluating it once."""
    return 1 + sum(count_nodes(child) for child in children(node))


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Select):
        return (node.operand,)
    if isinstance(node, Index):
        return (node.operand, node.index)
    if isinstance(node, Call):
        return ((node.target,) if node.target is not None else ()) + node.args
    if isinstance(node, ListLit):
        return node.elements
    if isinstance(node, MapLit):
        return tuple(part for entry in node.entries for part in (entry.key, entry.value))
    if isinstance(node, Comprehension):
        return (node.target, *node.args)
    if isinstance(node, Bind):
        return (node.init, node.body)
    return ()
