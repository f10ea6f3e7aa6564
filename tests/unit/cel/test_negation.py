"""Negation and int literals as CEL's grammar defines them (and cel-go and cel-cpp parse them).

`Unary = Member | "!" {"!"} Member | "-" {"-"} Member`, and a Member may be a signed number literal.
A single `-` before a number is the literal's sign, so `-9223372036854775808` is the smallest int. A
run of two or more `-` takes every `-`, leaving the unsigned literal, which must be in range by itself:
`--9223372036854775808` is an invalid literal, never a double negation that overflows at run time.
A run of an even number of operators is dropped (`--x` is `x`), an odd one is a single call.
The same expressions are compared with the reference implementation in test_differential.py.
"""

from __future__ import annotations

import pytest

from admission.core.cel import CelCompileError, CelRuntimeError, ast, compile_expression
from admission.core.cel.parser import parse
from admission.core.cel.values import UInt

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def value(expression: str) -> object:
    return compile_expression(expression, {}).evaluate({})


@pytest.mark.parametrize(("expression", "expected"), [
    ("-9223372036854775808", INT64_MIN),
    ("- 9223372036854775808", INT64_MIN),
    ("-0x8000000000000000", INT64_MIN),
    ("--(-9223372036854775808)", INT64_MIN),  # the even run is dropped: no overflow
    ("[-9223372036854775808][0]", INT64_MIN),
    ("--9223372036854775807", INT64_MAX),
    ("---9223372036854775807", -INT64_MAX),
    ("--1", 1),
    ("---1", -1),
    ("--(1)", 1),
    ("--1.5", 1.5),
    ("---1.5", -1.5),
    ("--1u", UInt(1)),
    ('--"a"', "a"),
    ("!!1", 1),
    ("!!-1", -1),
    ("!!!true", False),
])
def test_values(expression: str, expected: object) -> None:
    result = value(expression)
    assert result == expected and type(result) is type(expected), f"{expression} gave {result!r}"


@pytest.mark.parametrize(("expression", "column"), [
    ("--9223372036854775808", 3),
    ("---9223372036854775808", 4),
    ("-(9223372036854775808)", 3),
    ("-9223372036854775809", 1),
    ("--0x8000000000000000", 3),
    ("false && ---9223372036854775808 == 1", 13),  # refused when compiled, not skipped at run time
    ("true || -(9223372036854775808) == 1", 11),
])
def test_out_of_range_int_literals_are_compile_errors(expression: str, column: int) -> None:
    with pytest.raises(CelCompileError) as raised:
        compile_expression(expression, {})
    message = str(raised.value)
    assert "invalid int literal" in message and f"<input>:1:{column}:" in message, message


@pytest.mark.parametrize("expression", ["-(-9223372036854775808)", "-(9223372036854775807 + 1)",
                                        "1 - -9223372036854775808"])
def test_negation_overflow_is_a_runtime_error(expression: str) -> None:
    program = compile_expression(expression, {})
    with pytest.raises(CelRuntimeError, match="integer overflow"):
        program.evaluate({})


@pytest.mark.parametrize(("expression", "fragment"), [
    ("-!true", "Syntax error"),
    ("!-1", "found no matching overload for '!_' applied to '(int)'"),
    ("-1u", "found no matching overload for '-_' applied to '(uint)'"),
])
def test_other_errors(expression: str, fragment: str) -> None:
    with pytest.raises(CelCompileError) as raised:
        compile_expression(expression, {})
    assert fragment in str(raised.value)


def test_runs_of_operators_parse_to_at_most_one_call() -> None:
    assert parse("--x") == ast.Ident(2, "x")
    assert parse("!!!!x") == ast.Ident(4, "x")
    odd = parse("---x")
    assert isinstance(odd, ast.Call) and (odd.function, odd.args) == ("-_", (ast.Ident(3, "x"),))
    literal = parse("-9223372036854775808")
    assert literal == ast.Literal(0, INT64_MIN)
