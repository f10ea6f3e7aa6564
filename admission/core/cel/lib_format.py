"""The ext strings `format` function: `"%s has %d GPUs".format([name, count])`."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from admission.core.cel.errors import CelRuntimeError
from admission.core.cel.functions import define
from admission.core.cel.values import CelType, cel_key, format_double, kind

_CLAUSE = re.compile(r"%(?:\.(\d+))?([sdfeboxX%])|%")


@define("format", "string, list(dyn)", "string", member=True)
def _format(template: str, args: tuple[object, ...]) -> str:
    out: list[str] = []
    position = 0
    last = 0
    for clause in _CLAUSE.finditer(template):
        out.append(template[last:clause.start()])
        last = clause.end()
        precision, verb = clause.groups()
        if verb is None:
            raise CelRuntimeError(f"could not parse formatting clause at {clause.start()}: {template!r}")
        if verb == "%":
            out.append("%")
            continue
        if position >= len(args):
            raise CelRuntimeError(f"index {position} out of range")
        out.append(_clause(verb, None if precision is None else int(precision), args[position]))
        position += 1
    out.append(template[last:])
    return "".join(out)


def _clause(verb: str, precision: int | None, value: object) -> str:
    value_kind = kind(value)
    if verb == "s":
        if value_kind == "string":
            return str(value)
        if isinstance(value, bytes):
            return value.decode(errors="replace")
        return _show(value)
    if verb in "fe":
        if value_kind not in ("int", "uint", "double"):
            raise CelRuntimeError(f"{_VERB_NAMES[verb]} clause can only be used on numbers, was given {value_kind}")
        number = float(value)  # type: ignore[arg-type]
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "Infinity" if number > 0 else "-Infinity"
        return f"{number:.{6 if precision is None else precision}{verb}}"
    if verb == "d":
        if value_kind not in ("int", "uint"):
            raise CelRuntimeError(f"decimal clause can only be used on integers, was given {value_kind}")
        return str(int(value))  # type: ignore[call-overload]
    if verb in "xX" and value_kind in ("string", "bytes"):
        data = value.encode() if isinstance(value, str) else bytes(value)  # type: ignore[call-overload]
        text = data.hex()
        return text.upper() if verb == "X" else text
    if value_kind not in ("int", "uint"):
        raise CelRuntimeError(f"{_VERB_NAMES[verb]} clause can only be used on integers, was given {value_kind}")
    number = int(value)  # type: ignore[call-overload]
    return ("-" if number < 0 else "") + format(abs(number), {"b": "b", "o": "o", "x": "x", "X": "X"}[verb])


_VERB_NAMES = {"f": "fixed-point", "e": "scientific", "b": "binary", "o": "octal", "x": "hex", "X": "hex"}


def _show(value: object) -> str:
    """A value as `%s` shows it inside a list or map (strings quoted)."""
    value_kind = kind(value)
    if value_kind == "string":
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bytes):
        return 'b"' + value.decode(errors="replace") + '"'
    if value_kind == "bool":
        return "true" if value else "false"
    if value_kind == "null":
        return "null"
    if value_kind == "double":
        return format_double(value)  # type: ignore[arg-type]
    if value_kind in ("int", "uint"):
        return str(int(value))  # type: ignore[call-overload]
    if value_kind == "list":
        return "[" + ", ".join(_show(item) for item in value) + "]"  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        entries = sorted((_show(cel_key(k)), _show(v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in entries) + "}"
    if isinstance(value, CelType):
        return value.name
    return str(value)
