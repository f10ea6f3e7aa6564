"""Lexing and parsing: literals, escapes, comments, precedence, macros, reserved words."""

from __future__ import annotations

import pytest

import admission.core.cel as cel_package
from admission.core.cel import ast
from admission.core.cel.parser import ParseError, parse
from admission.core.cel.values import UInt


def value(expression: str) -> object:
    return cel_package.compile_expression(expression, {}).evaluate({})


@pytest.mark.parametrize(("expression", "expected"), [
    ("0x1F", 31),
    ("0x1Fu", UInt(31)),
    ("42u", UInt(42)),
    ("1.5e3", 1500.0),
    (".5", 0.5),
    ("1e-2", 0.01),
    ("-9223372036854775808", -(2**63)),
    ("'single'", "single"),
    ('"double"', "double"),
    ("'''tri\nple'''", "tri\nple"),
    ('"""a "quoted" word"""', 'a "quoted" word'),
    (r"r'\n'", "\\n"),
    (r"'\a\b\f\n\r\t\v\\\'\"\`\?'", "\a\b\f\n\r\t\v\\'\"`?"),
    (r"'\x41\101\u00e9\U0001F600'", "AAé\U0001F600"),
    (r"b'\xff\101'", b"\xffA"),
    ("b'é'", "é".encode()),
    (r"rb'\x41'", b"\\x41"),
    ("null", None),
    ("1 + // comment\n 2", 3),
])
def test_literals(expression: str, expected: object) -> None:
    result = value(expression)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(("expression", "expected"), [
    ("1 + 2 * 3", 7),
    ("(1 + 2) * 3", 9),
    ("10 - 4 - 3", 3),
    ("2 * 3 % 4", 2),
    ("-2 * 3", -6),
    ("!true || true", True),
    ("true || false && false", True),
    ("1 < 2 == true", True),
    ("false ? 1 : true ? 2 : 3", 2),
    ("--1", 1),
    ("!!true", True),
    ("[1, 2, 3,][2]", 3),
    ("{'a': 1,}.a", 1),
    (".size('abc')", 3),
])
def test_precedence_and_grammar(expression: str, expected: object) -> None:
    assert value(expression) == expected


def test_macros_become_their_own_nodes() -> None:
    assert isinstance(parse("[1].all(x, x > 0)"), ast.Comprehension)
    assert isinstance(parse("cel.bind(x, 1, x)"), ast.Bind)
    has = parse("has(a.b)")
    assert isinstance(has, ast.Select)
    assert has.test_only
    # Not a macro when the shape does not fit: an ordinary call.
    assert isinstance(parse("a.all(1)"), ast.Call)
    assert isinstance(parse("cel.bind(x, 1)"), ast.Call)


def test_positions_point_at_operators_and_calls() -> None:
    tree = parse("a + b.c(d)")
    assert isinstance(tree, ast.Call)
    assert tree.pos == 2
    call = tree.args[1]
    assert isinstance(call, ast.Call)
    assert call.pos == 7


@pytest.mark.parametrize("expression", ["", "1 +", "(", "[1, 2", "{1: }", "a.", "a..b", "1 2", "while"])
def test_malformed_input_is_a_parse_error(expression: str) -> None:
    with pytest.raises(ParseError):
        parse(expression)


def test_public_api_is_pinned() -> None:
    assert set(cel_package.__all__) == {
        "AttributeValue", "CelCompileError", "CelError", "CelRuntimeError", "DerivedProgram", "DeviceLike",
        "Expression", "Program", "compile_derived", "compile_expression", "compile_selector",
    }
    for name in cel_package.__all__:
        assert getattr(cel_package, name) is not None
