"""draq's CEL evaluator for DRA device selectors (and general expressions).

Expressions are parsed and type-checked once, compiled into Python closures, and evaluated per
device; see docs/cel.md for what is supported.
"""

from admission.core.cel.device import AttributeValue, DeviceLike
from admission.core.cel.errors import CelCompileError, CelError, CelRuntimeError
from admission.core.cel.expression import Expression, compile_expression
from admission.core.cel.selector import DerivedProgram, Program, compile_derived, compile_selector

__all__ = [
    "AttributeValue",
    "CelCompileError",
    "CelError",
    "CelRuntimeError",
    "DerivedProgram",
    "DeviceLike",
    "Expression",
    "Program",
    "compile_derived",
    "compile_expression",
    "compile_selector",
]
