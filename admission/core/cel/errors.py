"""CEL errors: compile-time problems (with position and caret) and evaluation-time problems."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from admission.core.errors import DraqError


class CelError(DraqError):
    """Base class of every CEL problem."""


class CelCompileError(CelError):
    """Syntax errors, undeclared references, unknown functions or overloads, over-long expressions."""


class CelRuntimeError(CelError):
    """An evaluation failed: no such key, no matching overload, overflow, non-bool result, cost limit."""


@dataclass(frozen=True, slots=True)
class Issue:
    """One compile problem at a character offset of the expression."""

    offset: int
    message: str


def format_issues(expression: str, issues: Sequence[Issue]) -> str:
    """Render issues as upstream CEL does: `ERROR: <input>:line:col: message` plus the line and a caret."""
    lines = expression.split("\n")
    rendered = []
    for issue in sorted(issues, key=lambda i: i.offset):
        line_no, column = _line_and_column(expression, issue.offset)
        text = lines[line_no - 1] if line_no - 1 < len(lines) else ""
        rendered.append(
            f"ERROR: <input>:{line_no}:{column + 1}: {issue.message}\n | {text}\n | {'.' * column}^"
        )
    return "compilation failed: " + "\n".join(rendered)


def _line_and_column(expression: str, offset: int) -> tuple[int, int]:
    before = expression[:offset]
    line_no = before.count("\n") + 1
    column = offset - (before.rfind("\n") + 1)
    return line_no, column
