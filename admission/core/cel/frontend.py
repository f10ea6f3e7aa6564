"""From source text to a checked, compiled tree, or a CelCompileError in upstream's format."""

from __future__ import annotations

from typing import Final

# Importing the libraries registers their functions.
from admission.core.cel import (  # noqa: F401
    lib_format,
    lib_kubernetes,
    lib_lists,
    lib_optional,
    lib_strings,
    stdlib,
)
from admission.core.cel.compiler import CompiledTree, Environment, compile_tree
from admission.core.cel.errors import CelCompileError, Issue, format_issues
from admission.core.cel.parser import ParseError, parse

MAX_EXPRESSION_BYTES: Final = 10 * 1024


def compile_checked(expression: str, env: Environment) -> CompiledTree:
    if not isinstance(expression, str):
        raise CelCompileError(f"compilation failed: expression must be a string, got {type(expression).__name__}")
    size = len(expression.encode())
    if size > MAX_EXPRESSION_BYTES:
        raise CelCompileError(
            f"compilation failed: expression is {size} bytes long, longer than the limit of "
            f"{MAX_EXPRESSION_BYTES} bytes")
    try:
        tree = parse(expression)
        compiled = compile_tree(tree, env)
    except ParseError as error:
        raise CelCompileError(format_issues(expression, [error.issue])) from None
    except RecursionError:
        raise CelCompileError(format_issues(
            expression, [Issue(0, "expression nested too deeply (recursion limit exceeded)")])) from None
    if compiled.issues:
        raise CelCompileError(format_issues(expression, compiled.issues))
    return compiled
