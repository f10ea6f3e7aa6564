"""Type-check a parsed expression and turn it into nested Python closures, in one pass.

Static types are used only to reject what can never work (undeclared names, calls without a
matching overload, fields an object does not have); everything typed `dyn` is checked at runtime.
Reads of `device.driver` and of constant attribute/capacity paths become slots, which the caller
fills before evaluation (and can memoise on).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from admission.core.cel import ast
from admission.core.cel import functions as fn
from admission.core.cel import runtime as rt
from admission.core.cel.device import MISSING, unsupported_list
from admission.core.cel.errors import CelRuntimeError, Issue
from admission.core.cel.logic import chain_of, conjunction_of, disjunction_of
from admission.core.cel.loops import UNBOUND, Loop, restore
from admission.core.cel.runtime import Closure, Context
from admission.core.cel.types import (
    BOOL,
    BYTES,
    DEVICE,
    DOUBLE,
    DYN,
    INT,
    NULL,
    NUMERIC,
    QUANTITY,
    STRING,
    TYPE,
    UINT,
    Type,
    assignable,
    element,
    join,
    list_of,
    map_of,
    optional_of,
)
from admission.core.cel.values import CelType, Optional, UInt, compare, equal, kind

_NOT_CONSTANT = object()
_TYPE_NAMES = ("int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type")
_ORDERED = frozenset({"string", "bytes", "bool"})
_SIZED_RESULTS = frozenset({"_+_", "replace", "join", "split", "flatten", "lists.range", "findAll",
                            "strings.quote", "reverse", "sort", "distinct"})
_PYTHON_RELATIONS: dict[str, Callable[[Any, Any], bool]] = {
    "_<_": operator.lt, "_<=_": operator.le, "_>_": operator.gt, "_>=_": operator.ge,
}
_RELATIONS: dict[str, Callable[[int], bool]] = {
    "_<_": lambda c: c < 0, "_<=_": lambda c: c <= 0, "_>_": lambda c: c > 0, "_>=_": lambda c: c >= 0,
}


@dataclass(frozen=True, slots=True)
class Slot:
    """A device value read before evaluation: `driver`, or (`attributes`|`capacity`, domain, name)."""

    field: str
    domain: str = ""
    name: str = ""


@dataclass(frozen=True)
class Environment:
    variables: Mapping[str, Type]
    object_fields: Mapping[Type, Mapping[str, Type]] = field(default_factory=dict)
    disabled_functions: frozenset[str] = frozenset()
    device_variable: str | None = None
    list_attributes: bool = False


@dataclass(frozen=True, slots=True)
class Code:
    type: Type
    run: Closure
    constant: object = _NOT_CONSTANT


@dataclass(frozen=True)
class CompiledTree:
    type: Type
    run: Closure
    slots: tuple[Slot, ...]
    reads_device_directly: bool
    issues: tuple[Issue, ...]


def compile_tree(tree: ast.Node, env: Environment) -> CompiledTree:
    compiler = _Compiler(env)
    code = compiler.compile(tree)
    return CompiledTree(code.type, code.run, tuple(compiler.slots), compiler.direct_device,
                        tuple(compiler.issues))


def _constant(value: object, static: Type) -> Code:
    return Code(static, lambda c: value, value)


def _literal_type(value: object) -> Type:
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, UInt):
        return UINT
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, str):
        return STRING
    if isinstance(value, bytes):
        return BYTES
    return NULL


def _raising(error: CelRuntimeError) -> Closure:
    def fail(c: Context) -> object:
        raise CelRuntimeError(str(error))
    return fail


class _Compiler:
    def __init__(self, env: Environment) -> None:
        self.env = env
        self.issues: list[Issue] = []
        self.scopes: list[dict[str, Type]] = []
        self.slots: dict[Slot, int] = {}
        self.direct_device = False

    # -- helpers ------------------------------------------------------------------------------------
    def error(self, pos: int, message: str) -> Code:
        self.issues.append(Issue(pos, message))
        return Code(DYN, _raising(CelRuntimeError(message)))

    def local(self, name: str) -> Type | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def is_device(self, node: ast.Node) -> bool:
        return (isinstance(node, ast.Ident) and node.name == self.env.device_variable
                and self.local(node.name) is None)

    def compile(self, node: ast.Node) -> Code:
        method: Callable[[ast.Node], Code] = getattr(self, "visit_" + type(node).__name__)
        return method(node)

    # -- leaves -------------------------------------------------------------------------------------
    def visit_Literal(self, node: ast.Literal) -> Code:
        return _constant(node.value, _literal_type(node.value))

    def visit_Ident(self, node: ast.Ident) -> Code:
        name = node.name
        local = self.local(name)
        if local is not None:
            return Code(local, lambda c: c.vars[name])
        declared = self.env.variables.get(name)
        if declared is not None:
            if name == self.env.device_variable:
                self.direct_device = True

            def variable(c: Context) -> object:
                try:
                    return c.vars[name]
                except KeyError:
                    raise CelRuntimeError(f"no such attribute: {name} (no value given)") from None
            return Code(declared, variable)
        if name in _TYPE_NAMES:
            return _constant(CelType(name), TYPE)
        return self.error(node.pos, f"undeclared reference to '{name}' (in container '')")

    # -- device slots -------------------------------------------------------------------------------
    def device_slot(self, node: ast.Node) -> Slot | None:
        """The slot a node reads, if it is `device.driver` or a constant attribute/capacity path."""
        if isinstance(node, ast.Select) and not node.optional and self.is_device(node.operand):
            return Slot(node.field) if node.field in ("driver", "allowMultipleAllocations") else None
        if isinstance(node, ast.Select) and not node.optional:
            domain = self.device_domain(node.operand)
            return Slot(domain[0], domain[1], node.field) if domain else None
        if isinstance(node, ast.Index) and not node.optional and isinstance(node.index, ast.Literal) \
                and isinstance(node.index.value, str):
            domain = self.device_domain(node.operand)
            return Slot(domain[0], domain[1], node.index.value) if domain else None
        return None

    def device_domain(self, node: ast.Node) -> tuple[str, str] | None:
        if not (isinstance(node, ast.Index) and not node.optional and isinstance(node.index, ast.Literal)
                and isinstance(node.index.value, str)):
            return None
        inner = node.operand
        if isinstance(inner, ast.Select) and not inner.optional and not inner.test_only \
                and inner.field in ("attributes", "capacity") and self.is_device(inner.operand):
            return inner.field, node.index.value
        return None

    def slot_index(self, slot: Slot) -> int:
        return self.slots.setdefault(slot, len(self.slots))

    def slot_read(self, slot: Slot, test_only: bool, pos: int) -> Code:
        if slot.field == "allowMultipleAllocations" and slot.field not in self.fields_of(DEVICE):
            return self.error(pos, "undefined field 'allowMultipleAllocations'")
        position = self.slot_index(slot)
        if test_only:
            return Code(BOOL, lambda c: c.slots[position] is not MISSING)
        if slot.field == "driver":
            return Code(STRING, lambda c: c.slots[position])
        if slot.field == "allowMultipleAllocations":
            return Code(BOOL, lambda c: c.slots[position])
        name, lists = slot.name, self.env.list_attributes

        def read(c: Context) -> object:
            value = c.slots[position]
            if value is MISSING:
                raise rt.no_such_key(name)
            if type(value) is tuple and not lists:
                raise unsupported_list(name)
            return value
        return Code(QUANTITY if slot.field == "capacity" else DYN, read)

    def fields_of(self, static: Type) -> Mapping[str, Type]:
        return self.env.object_fields.get(static, {})

    # -- selection and indexing ---------------------------------------------------------------------
    def visit_Select(self, node: ast.Select) -> Code:
        slot = self.device_slot(node)
        if slot is not None:
            return self.slot_read(slot, node.test_only, node.pos)
        operand = self.compile(node.operand)
        result = self.field_type(node, operand.type)
        run, name = operand.run, node.field
        if node.test_only:
            return Code(BOOL, lambda c: rt.has_field(run(c), name))
        if node.optional:
            return Code(optional_of(result), lambda c: rt.select_optional(run(c), name))
        return Code(result, lambda c: rt.select(run(c), name))

    def field_type(self, node: ast.Select, static: Type) -> Type:
        if static in self.env.object_fields:
            fields = self.env.object_fields[static]
            if node.field not in fields:
                self.error(node.pos, f"undefined field '{node.field}'")
                return DYN
            return fields[node.field]
        if static.name == "map":
            return element(static)
        if static.name == "optional_type" and node.optional:
            return self.field_type(node, element(static))
        if not static.is_dyn:
            self.error(node.pos, f"type '{static}' does not support field selection")
        return DYN

    def visit_Index(self, node: ast.Index) -> Code:
        slot = self.device_slot(node)
        if slot is not None:
            return self.slot_read(slot, False, node.pos)
        operand, key = self.compile(node.operand), self.compile(node.index)
        static = operand.type.params[0] if node.optional and operand.type.name == "optional_type" \
            else operand.type
        bad_list_index = static.name == "list" and not (key.type.is_dyn or key.type in NUMERIC)
        bad_map_key = static.name == "map" and not _comparable_for_equality(static.params[0], key.type)
        if bad_list_index or bad_map_key or not (static.is_dyn or static.name in ("list", "map")):
            self.error(node.pos, f"found no matching overload for '_[_]' applied to '({static}, {key.type})'")
        run, key_run = operand.run, key.run
        if node.optional:
            return Code(optional_of(element(static)), lambda c: rt.index_optional(run(c), key_run(c)))
        if key.constant is not _NOT_CONSTANT:
            constant = key.constant
            return Code(element(static), lambda c: rt.index(run(c), constant))
        return Code(element(static), lambda c: rt.index(run(c), key_run(c)))

    # -- aggregates ---------------------------------------------------------------------------------
    def visit_ListLit(self, node: ast.ListLit) -> Code:
        items = [self.compile(e) for e in node.elements]
        types = [element(i.type) if n in node.optional_indices else i.type for n, i in enumerate(items)]
        static = list_of(join(types))
        if not node.optional_indices and all(i.constant is not _NOT_CONSTANT for i in items):
            return _constant(tuple(i.constant for i in items), static)
        runs = [(i.run, n in node.optional_indices) for n, i in enumerate(items)]

        def build(c: Context) -> object:
            out = []
            for run, optional in runs:
                value = run(c)
                if optional:
                    if not isinstance(value, Optional):
                        raise CelRuntimeError("optional list element is not an optional value")
                    if value.present:
                        out.append(value.value)
                else:
                    out.append(value)
            return tuple(out)
        return Code(static, build)

    def visit_MapLit(self, node: ast.MapLit) -> Code:
        entries = [(self.compile(e.key), self.compile(e.value), e.optional) for e in node.entries]
        for (key, _, _), entry in zip(entries, node.entries, strict=True):
            if not (key.type.is_dyn or key.type in (INT, UINT, BOOL, STRING)):
                self.error(entry.key.pos, f"unsupported map key type: {key.type}")
        key_type = join([k.type for k, _, _ in entries])
        value_type = join([element(v.type) if o else v.type for _, v, o in entries])
        runs = [(k.run, v.run, o) for k, v, o in entries]

        def build(c: Context) -> object:
            pairs = []
            for key_run, value_run, optional in runs:
                key, value = key_run(c), value_run(c)
                if optional:
                    if not isinstance(value, Optional):
                        raise CelRuntimeError("optional map entry is not an optional value")
                    if not value.present:
                        continue
                    value = value.value
                pairs.append((key, value))
            return rt.build_map(pairs)
        if all(k.constant is not _NOT_CONSTANT and v.constant is not _NOT_CONSTANT and not o
               for k, v, o in entries):
            try:
                return _constant(build(Context({})), map_of(key_type, value_type))
            except CelRuntimeError:
                pass
        return Code(map_of(key_type, value_type), build)

    # -- calls --------------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> Code:
        special = {"_&&_": self.logic, "_||_": self.logic, "_?_:_": self.conditional,
                   "_==_": self.equality, "_!=_": self.equality}.get(node.function)
        if special is not None and node.target is None:
            return special(node)
        if node.function in _RELATIONS and node.target is None:
            return self.relation(node)
        if node.function == "@in" and node.target is None:
            in_slot = self.membership_slot(node)
            if in_slot is not None:
                return self.slot_read(in_slot, True, node.pos)
        name, target = node.function, node.target
        if isinstance(target, ast.Ident) and self.local(target.name) is None \
                and target.name not in self.env.variables and f"{target.name}.{name}" in fn.FUNCTIONS:
            name, target = f"{target.name}.{name}", None
        args = ([self.compile(target)] if target is not None else []) + [self.compile(a) for a in node.args]
        return self.call(node, name, target is not None, args)

    def membership_slot(self, node: ast.Call) -> Slot | None:
        needle, haystack = node.args
        if isinstance(needle, ast.Literal) and isinstance(needle.value, str):
            domain = self.device_domain(haystack)
            if domain is not None:
                return Slot(domain[0], domain[1], needle.value)
        return None

    def call(self, node: ast.Call, name: str, member: bool, args: Sequence[Code]) -> Code:
        types = [a.type for a in args]
        found = None if name in self.env.disabled_functions else fn.candidates(name, member, types)
        if found is None:
            return self.error(node.pos, f"undeclared reference to '{name}' (in container '')")
        if not found:
            shown = (f"{types[0]}.({', '.join(map(str, types[1:]))})" if member
                     else f"({', '.join(map(str, types))})")
            return self.error(node.pos, f"found no matching overload for '{name}' applied to '{shown}'")
        impl = fn.dispatcher(name, found, types)
        static = fn.result_type(found, types)
        if all(a.constant is not _NOT_CONSTANT and _small(a.constant) for a in args):
            try:
                return _constant(impl(*(a.constant for a in args)), static)
            except CelRuntimeError:
                pass  # reported when (and if) evaluation reaches it
        run = _call_closure(impl, [a.run for a in args])
        if name in _SIZED_RESULTS:
            run = _charged(run)
        return Code(static, run)

    def logic(self, node: ast.Call) -> Code:
        # A chain `a && b && c` is compiled as one n-ary node: no recursion per operand.
        operands: list[ast.Node] = []
        pending: list[ast.Node] = [node]
        while pending:
            current = pending.pop()
            if isinstance(current, ast.Call) and current.function == node.function and current.target is None:
                pending.extend(reversed(current.args))
            else:
                operands.append(current)
        compiled = [self.compile(operand) for operand in operands]
        for side in compiled:
            if not (side.type.is_dyn or side.type == BOOL):
                shown = ", ".join(str(c.type) for c in compiled[:2]) if len(compiled) == 2 else str(side.type)
                return self.error(node.pos, f"found no matching overload for '{node.function}' applied to "
                                            f"'({shown})'")
        runs = [c.run for c in compiled]
        conjunction = node.function == "_&&_"
        if len(runs) == 2:
            run = conjunction_of(*runs) if conjunction else disjunction_of(*runs)
        else:
            run = chain_of(runs, stop_on=not conjunction, name=node.function)
        return Code(BOOL, run)

    def conditional(self, node: ast.Call) -> Code:
        condition, when_true, when_false = (self.compile(a) for a in node.args)
        if not (condition.type.is_dyn or condition.type == BOOL):
            return self.error(node.pos, f"found no matching overload for '_?_:_' applied to "
                                        f"'({condition.type}, {when_true.type}, {when_false.type})'")
        test, yes, no = condition.run, when_true.run, when_false.run

        def choose(c: Context) -> object:
            flag = test(c)
            if flag is True:
                return yes(c)
            if flag is False:
                return no(c)
            raise CelRuntimeError(f"no such overload: _?_:_ applied to a condition of type {kind(flag)}")
        return Code(join([when_true.type, when_false.type]), choose)

    def equality(self, node: ast.Call) -> Code:
        left, right = (self.compile(a) for a in node.args)
        if not _comparable_for_equality(left.type, right.type):
            return self.error(node.pos, f"found no matching overload for '{node.function}' applied to "
                                        f"'({left.type}, {right.type})'")
        a, b = left.run, right.run
        if right.constant is not _NOT_CONSTANT and type(right.constant) is str:
            text = right.constant

            def equal_text(c: Context) -> bool:
                value = a(c)
                return value == text if type(value) is str else False
            run: Closure = equal_text
        else:
            def equal_values(c: Context) -> bool:
                return equal(a(c), b(c))
            run = equal_values
        if node.function == "_!=_":
            positive = run
            run = lambda c: not positive(c)  # noqa: E731
        return Code(BOOL, run)

    def relation(self, node: ast.Call) -> Code:
        left, right = (self.compile(a) for a in node.args)
        lt, rtype = left.type, right.type
        numeric = lt in NUMERIC and rtype in NUMERIC
        same_ordered = lt == rtype and lt.name in _ORDERED
        if not (lt.is_dyn or rtype.is_dyn or numeric or same_ordered):
            return self.error(node.pos, f"found no matching overload for '{node.function}' applied to "
                                        f"'({lt}, {rtype})'")
        if numeric or same_ordered:
            # Both kinds are known: Python's own operators order them exactly as CEL does
            # (ints against doubles exactly, strings by code point, false < true).
            return Code(BOOL, _direct_relation(node.function, left, right))
        test, a, b = _RELATIONS[node.function], left.run, right.run
        name = node.function

        def relate(c: Context) -> bool:
            try:
                return test(compare(a(c), b(c)))
            except TypeError as error:
                raise CelRuntimeError(str(error).replace("<", name)) from None
        return Code(BOOL, relate)

    # -- macros -------------------------------------------------------------------------------------
    def visit_Bind(self, node: ast.Bind) -> Code:
        init = self.compile(node.init)
        self.scopes.append({node.name: init.type})
        body = self.compile(node.body)
        self.scopes.pop()
        name, init_run, body_run = node.name, init.run, body.run

        def bind(c: Context) -> object:
            saved = c.vars.get(name, UNBOUND)
            c.vars[name] = init_run(c)
            try:
                return body_run(c)
            finally:
                restore(c.vars, name, saved)
        return Code(body.type, bind)

    def visit_Comprehension(self, node: ast.Comprehension) -> Code:
        target = self.compile(node.target)
        static = target.type
        if not (static.is_dyn or static.name in ("list", "map")):
            return self.error(node.pos, f"expression of type '{static}' cannot be the range of a "
                                        f"comprehension (must be list, map, or dynamic)")
        two = len(node.variables) == 2
        if static.name == "list":
            first, second = (INT, element(static)) if two else (element(static), DYN)
        elif static.name == "map":
            first, second = static.params[0], static.params[1]
        else:
            first, second = DYN, DYN
        scope = {node.variables[0]: first}
        if two:
            scope[node.variables[1]] = second
        self.scopes.append(scope)
        bodies = [self.compile(arg) for arg in node.args]
        self.scopes.pop()
        cost = ast.count_nodes(node) - ast.count_nodes(node.target)
        loop = Loop(node.variables, two, target.run, [b.run for b in bodies], cost)
        macro = node.macro
        if macro in ("all", "exists", "exists_one", "existsOne", "filter") or \
                (macro == "map" and len(bodies) == 2):
            predicate = bodies[0].type
            if not (predicate.is_dyn or predicate == BOOL):
                return self.error(node.args[0].pos, f"{macro}() predicate must be bool, not {predicate}")
        if macro == "all":
            return Code(BOOL, loop.all)
        if macro == "exists":
            return Code(BOOL, loop.exists)
        if macro in ("exists_one", "existsOne"):
            return Code(BOOL, loop.exists_one)
        if macro == "filter":
            return Code(list_of(first), loop.filter)
        if macro == "map":
            return Code(list_of(bodies[-1].type), loop.map)
        if macro == "transformList":
            return Code(list_of(bodies[-1].type), loop.map)
        return Code(map_of(first, bodies[-1].type), loop.transform_map)


def _small(constant: object) -> bool:
    """Whether a constant is small enough to fold calls on it at compile time (where no cost is charged)."""
    return not isinstance(constant, (str, bytes, tuple)) or len(constant) <= 4096


def _direct_relation(name: str, left: Code, right: Code) -> Closure:
    compare_values = _PYTHON_RELATIONS[name]
    a, b = left.run, right.run
    if right.constant is not _NOT_CONSTANT:
        bound = right.constant
        return lambda c: compare_values(a(c), bound)
    return lambda c: compare_values(a(c), b(c))


def _comparable_for_equality(left: Type, right: Type) -> bool:
    if left.is_dyn or right.is_dyn or NULL in (left, right):
        return True
    if left in NUMERIC and right in NUMERIC:
        return True
    return left.name == right.name and assignable(left, right)


def _call_closure(impl: fn.Impl, runs: list[Closure]) -> Closure:
    if len(runs) == 0:
        return lambda c: impl()
    if len(runs) == 1:
        (a,) = runs
        return lambda c: impl(a(c))
    if len(runs) == 2:
        a, b = runs
        return lambda c: impl(a(c), b(c))
    return lambda c: impl(*[r(c) for r in runs])


def _charged(run: Closure) -> Closure:
    def charged(c: Context) -> object:
        result = run(c)
        if isinstance(result, (str, bytes, tuple)):
            c.charge(len(result) // 10 + 1)
        return result
    return charged
