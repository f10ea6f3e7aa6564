"""DRA device selectors: compile once (cached), evaluate per device, memoise per values read."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final, cast

from admission.core.cel.compiler import CompiledTree, Environment, Slot
from admission.core.cel.device import MISSING, AttributeValue, DeviceLike, DeviceView, attribute_problem, device_fields
from admission.core.cel.errors import CelCompileError, CelRuntimeError
from admission.core.cel.frontend import compile_checked
from admission.core.cel.runtime import COST_LIMIT, Context
from admission.core.cel.types import BOOL, DEVICE, INT, SEMVER, STRING, Type
from admission.core.cel.values import UInt, type_value
from admission.core.quantity import Quantity
from admission.core.semver import Semver

MEMO_SIZE: Final = 4096
_ABSENT: Final = object()


class _Failure:
    """A memoised runtime error: re-raised with the same message on every hit."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


Reader = Callable[[DeviceLike], tuple[object, ...]]
KeyedReader = Callable[[DeviceLike], tuple[tuple[object, ...], tuple[object, ...]]]


class Program:
    """A compiled selector. `evaluate(device)` is True, False, or raises CelRuntimeError."""

    def __init__(self, expression: str, compiled: CompiledTree, allow_multiple_allocations: bool,
                 list_attributes: bool, memoise: bool = True) -> None:
        self.expression = expression
        self._run = compiled.run
        self._read: Reader = _reader(compiled.slots, keyed=False)
        self._read_keyed: KeyedReader = _reader(compiled.slots, keyed=True)
        self._direct = compiled.reads_device_directly
        self._allow_multiple = allow_multiple_allocations
        self._lists = list_attributes
        self._cache: dict[object, object] | None = {} if memoise and not self._direct else None

    @property
    def memoised(self) -> bool:
        return self._cache is not None

    def without_memo(self) -> Program:
        """The same program evaluating every device afresh (for measurements and tests)."""
        clone = Program.__new__(Program)
        clone.__dict__.update(self.__dict__)
        clone._cache = None
        return clone

    def evaluate(self, device: DeviceLike) -> bool:
        # As in Kubernetes, every attribute of the device is converted before evaluation: one
        # without a usable value fails every selector, whatever the selector reads.
        problem = attribute_problem(device, self._lists)
        if problem is not None:
            raise CelRuntimeError(problem)
        cache = self._cache
        if cache is None:
            return self._evaluate(device, self._read(device))
        slots, key = self._read_keyed(device)
        hit = cache.get(key, _ABSENT)
        if hit is True or hit is False:
            return hit
        if hit is not _ABSENT:
            if type(hit) is _Failure:
                raise CelRuntimeError(hit.message)
            return hit  # type: ignore[return-value]
        if len(cache) >= MEMO_SIZE:
            del cache[next(iter(cache))]
        try:
            result = self._evaluate(device, slots)
        except CelRuntimeError as error:
            cache[key] = _Failure(str(error))
            raise
        cache[key] = result
        return result

    def _evaluate(self, device: DeviceLike, slots: tuple[object, ...]) -> bool:
        variables: dict[str, object] = {}
        if self._direct:
            variables["device"] = DeviceView(device, self._allow_multiple, self._lists)
        context = Context(variables, slots, COST_LIMIT)
        try:
            result = self._run(context)
        except RecursionError:
            raise CelRuntimeError("expression nested too deeply to evaluate") from None
        except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError) as error:
            # A device value of a kind the protocol does not allow; never a traceback.
            raise CelRuntimeError(f"evaluation failed: {error}") from None
        return self._result(result)

    def _result(self, result: object) -> bool:
        if result is True or result is False:
            return result
        raise CelRuntimeError(f"CEL result of type {type_value(result)} could not be converted to bool")

    def __repr__(self) -> str:
        return f"Program({self.expression!r})"


def _device_environment(allow_multiple_allocations: bool, list_attributes: bool) -> Environment:
    """What a device expression sees: `device`, its fields, and `includes` only with list attributes."""
    return Environment(
        variables={"device": DEVICE},
        object_fields={DEVICE: device_fields(allow_multiple_allocations)},
        disabled_functions=frozenset() if list_attributes else frozenset({"includes"}),
        device_variable="device",
        list_attributes=list_attributes,
    )


@lru_cache(maxsize=1024)
def compile_selector(expression: str, *, allow_multiple_allocations: bool = False,
                     list_attributes: bool = False) -> Program:
    """Compile a DRA device selector (cached per expression and options)."""
    compiled = compile_checked(expression, _device_environment(allow_multiple_allocations, list_attributes))
    if not (compiled.type.is_dyn or compiled.type == BOOL):
        raise CelCompileError(f"compilation failed: ERROR: <input>:1:1: selector must evaluate to bool, "
                              f"not {compiled.type}\n | {expression.splitlines()[0] if expression else ''}"
                              f"\n | ^")
    return Program(expression, compiled, allow_multiple_allocations, list_attributes)


class DerivedProgram(Program):
    """A derived attribute's expression (DRADerivedAttributes): `value(device)` is the attribute value it
    computes (a scalar, or a tuple of scalars of one kind), or raises CelRuntimeError."""

    def value(self, device: DeviceLike) -> AttributeValue:
        return cast(AttributeValue, self.evaluate(device))

    def _result(self, result: object) -> bool:
        # Program's evaluate and memo carry the value; it is an attribute value here, not a bool.
        return cast(bool, derived_value(result))


_DERIVED_SCALARS: Final = (bool, int, str, Semver)
_GO_TYPES: Final = {bool: "bool", int: "int64", str: "string", Semver: "semver.Version", UInt: "uint64",
                    float: "float64"}


def derived_value(result: object) -> AttributeValue:
    """A CEL result as an attribute value, as Kubernetes converts it: a scalar, or a list whose elements all
    have the kind of its first one (an empty list is an empty list of strings)."""
    kind = type(result)
    if kind in _DERIVED_SCALARS:
        return cast(AttributeValue, result)
    if kind is not tuple:
        raise CelRuntimeError(f"unsupported CEL return type: {_GO_TYPES.get(kind, type_value(result))}")
    items: tuple[object, ...] = result  # type: ignore[assignment]
    if not items:
        return ()
    first = type(items[0])
    if first not in _DERIVED_SCALARS:
        raise CelRuntimeError(f"unsupported list element type: {_GO_TYPES.get(first, type_value(items[0]))}")
    for index, item in enumerate(items):
        if type(item) is not first:
            raise CelRuntimeError(f"expected list element at index {index} to be {_GO_TYPES[first].split('.')[0]}"
                                  f", got {_GO_TYPES.get(type(item), type_value(item))}")
    return items  # type: ignore[return-value]


_DERIVED_TYPES: Final = frozenset({BOOL, INT, STRING, SEMVER})


def _derived_type(result: Type) -> bool:
    if result.is_dyn or result in _DERIVED_TYPES:
        return True
    return result.name == "list" and len(result.params) == 1 and (result.params[0].is_dyn
                                                                  or result.params[0] in _DERIVED_TYPES)


@lru_cache(maxsize=1024)
def compile_derived(expression: str, *, allow_multiple_allocations: bool = False,
                    list_attributes: bool = False) -> DerivedProgram:
    """Compile a derived attribute's expression (cached per expression and options): it must evaluate to
    a string, int, bool or semver, or a list of one of them (the scheduler compiles it as a stored
    expression, which may return lists whatever DRAListTypeAttributes says)."""
    compiled = compile_checked(expression, _device_environment(allow_multiple_allocations, list_attributes))
    if not _derived_type(compiled.type):
        raise CelCompileError("must evaluate to a primitive scalar (string, integer, boolean, semver) or a list "
                              f"of these scalars, not {compiled.type}")
    return DerivedProgram(expression, compiled, allow_multiple_allocations, list_attributes)


def _key_part(value: object) -> object:
    """A memo-key stand-in for a value: cheap to hash, and apart from values Python would
    confuse (True and 1). Quantities and versions hash slowly, so they are keyed by their parts."""
    kind = type(value)
    if kind is str or kind is int:
        return value
    if kind is Quantity:
        number = value.value  # type: ignore[attr-defined]
        return (Quantity, number.numerator, number.denominator)
    if kind is Semver:
        return (Semver, value.major, value.minor, value.patch, value.prerelease)  # type: ignore[attr-defined]
    if kind is bool:
        return (bool, value)
    if kind is tuple:
        return (tuple, tuple(_key_part(v) for v in value))  # type: ignore[attr-defined]
    return value


def _reader(slots: tuple[Slot, ...], keyed: bool) -> Any:
    """Generate a function reading every slot of a device (and, if keyed, the memo key made of them)."""
    lines = ["def read(device):"]
    names = []
    for position, slot in enumerate(slots):
        name = f"v{position}"
        names.append(name)
        if slot.field == "driver":
            lines.append(f"    {name} = device.driver")
        elif slot.field == "allowMultipleAllocations":
            lines.append(f"    {name} = device.allow_multiple_allocations")
        else:
            lines.append(f"    d = device.{slot.field}.get({slot.domain!r})")
            lines.append(f"    {name} = MISSING if d is None else d.get({slot.name!r}, MISSING)")
    values = "".join(f"{n}, " for n in names)
    attribute_keys = [n if s.field == "driver" else f"({n} if type({n}) is str else key_part({n}))"
                      for n, s in zip(names, slots, strict=True)]
    if keyed:
        lines.append(f"    return ({values}), ({''.join(k + ', ' for k in attribute_keys)})")
    else:
        lines.append(f"    return ({values})")
    namespace: dict[str, object] = {"MISSING": MISSING, "key_part": _key_part}
    exec("\n".join(lines), namespace)
    return namespace["read"]
