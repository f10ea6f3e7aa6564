"""Compile errors (position and caret, as upstream prints them) and runtime errors."""

from __future__ import annotations

import pytest

from admission.core.cel import CelCompileError, CelError, CelRuntimeError, compile_expression, compile_selector
from admission.core.errors import DraqError


def compile_error(expression: str) -> str:
    with pytest.raises(CelCompileError) as raised:
        compile_expression(expression, {})
    return str(raised.value)


def runtime_error(expression: str, **variables: object) -> str:
    program = compile_expression(expression, {name: object for name in variables})
    with pytest.raises(CelRuntimeError) as raised:
        program.evaluate(variables)
    return str(raised.value)


def test_error_hierarchy() -> None:
    assert issubclass(CelCompileError, CelError)
    assert issubclass(CelRuntimeError, CelError)
    assert issubclass(CelError, DraqError)


def test_undeclared_reference_matches_upstream_format() -> None:
    assert compile_error("noSuchVar") == (
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' (in container '')\n"
        " | noSuchVar\n"
        " | ^"
    )


def test_every_error_is_reported_in_order() -> None:
    message = compile_error("a + b")
    assert message.count("ERROR:") == 2
    assert message.index("'a'") < message.index("'b'")


def test_position_on_a_later_line() -> None:
    message = compile_error("1 +\n  nope")
    assert "<input>:2:3: undeclared reference to 'nope'" in message
    assert " |   nope\n | ..^" in message


@pytest.mark.parametrize(("expression", "fragment"), [
    ("size(1)", "found no matching overload for 'size' applied to '(int)'"),
    ("'a'.contains(1)", "found no matching overload for 'contains' applied to 'string.(int)'"),
    ("true == 1", "found no matching overload for '_==_' applied to '(bool, int)'"),
    ("42 || false", "found no matching overload for '_||_' applied to '(int, bool)'"),
    ("'a' < 1", "found no matching overload for '_<_' applied to '(string, int)'"),
    ("1 + 'a'", "found no matching overload for '_+_' applied to '(int, string)'"),
    ("noSuchFunction(1)", "undeclared reference to 'noSuchFunction'"),
    ("1.noSuchMethod()", "undeclared reference to 'noSuchMethod'"),
    ("1 ? 2 : 3", "found no matching overload for '_?_:_'"),
    ("(1).field", "type 'int' does not support field selection"),
    ("[1].all(x, x + 1)", "predicate must be bool"),
    ("1.exists(x, true)", "cannot be the range of a comprehension"),
    ("{1.5: 1}", "unsupported map key type: double"),
])
def test_static_errors(expression: str, fragment: str) -> None:
    assert fragment in compile_error(expression)


@pytest.mark.parametrize(("expression", "fragment"), [
    ("1 +", "Syntax error"),
    ("(1", "expecting ')'"),
    ("'unterminated", "token recognition error"),
    ("1 # 2", "token recognition error"),
    ("a.if", "reserved identifier"),
    ("'\\q'", "invalid escape sequence"),
    ("9223372036854775808", "invalid int literal"),
    ("-9223372036854775809", "invalid int literal"),
    ("18446744073709551616u", "invalid uint literal"),
    ("has(1)", "invalid argument to has() macro"),
    ("[1].map(1, 2)", "argument must be a simple name"),
    ("Msg{a: 1}", "message construction is not supported"),
    ("(" * 100 + "1" + ")" * 100, "recursion limit"),
])
def test_syntax_errors(expression: str, fragment: str) -> None:
    assert fragment in compile_error(expression)


def test_expression_length_limit() -> None:
    at_limit = "true" + " " * (10 * 1024 - 4)
    assert compile_selector(at_limit).expression == at_limit
    with pytest.raises(CelCompileError, match="longer than the limit of 10240 bytes"):
        compile_selector(at_limit + " ")


def test_long_flat_chains_compile() -> None:
    expression = " && ".join(["true"] * 400)
    assert compile_expression(expression, {}).evaluate({}) is True


@pytest.mark.parametrize(("expression", "fragment"), [
    ("1 / 0 == 0", "division by zero"),
    ("1 % 0 == 0", "modulus by zero"),
    ("9223372036854775807 + 1 > 0", "integer overflow"),
    ("-9223372036854775808 / -1 > 0", "integer overflow"),
    ("0u - 1u > 0u", "unsigned integer overflow"),
    ("[1][3] == 1", "index out of range: 3"),
    ("{'a': 1}['b'] == 1", "no such key: b"),
    ("{'a': 1}.b == 1", "no such key: b"),
    ("int('x') == 1", "cannot convert string 'x' to int"),
    ("int(1e20) == 1", "range error"),
    ("'a'.matches('(') ", "invalid regular expression"),
    ("optional.none().value() == 1", "optional.none() dereference"),
    ("{'a': 1, 'a': 2}.size() == 1", "repeated key"),
])
def test_runtime_errors(expression: str, fragment: str) -> None:
    assert fragment in runtime_error(expression)


def test_dynamic_type_mismatch_is_a_runtime_error() -> None:
    assert "no such overload" in runtime_error("x + 1 == 2", x="a")
    assert "no such overload" in runtime_error("x || false", x=42)
    assert "no such overload" in runtime_error("x < 1", x="a")


def test_missing_activation_value_is_a_runtime_error() -> None:
    program = compile_expression("x + 1", {"x": int})
    with pytest.raises(CelRuntimeError, match="no such attribute: x"):
        program.evaluate({})


def test_error_absorption_in_logic() -> None:
    assert compile_expression("false && x", {"x": object}).evaluate({"x": 42}) is False
    assert compile_expression("x && false", {"x": object}).evaluate({"x": 42}) is False
    assert compile_expression("x || true", {"x": object}).evaluate({"x": 42}) is True
    assert compile_expression("1 / 0 == 1 || true", {}).evaluate({}) is True
    assert "division by zero" in runtime_error("1 / 0 == 1 || false")
    assert "division by zero" in runtime_error("1 / 0 == 1 && true")


def test_error_absorption_in_quantifiers() -> None:
    assert compile_expression("[0, 1].exists(x, 1 / x == 1)", {}).evaluate({}) is True
    assert compile_expression("[0, 1].all(x, 1 / x == 2)", {}).evaluate({}) is False
    assert "division by zero" in runtime_error("[0, 1].all(x, 1 / x == 1)")
    assert "division by zero" in runtime_error("[0, 1].exists_one(x, 1 / x == 1)")


def test_cost_limit_stops_runaway_loops() -> None:
    ten = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
    nested = f"{ten}.map(a, {ten}.map(b, {ten}.map(c, {ten}.map(d, {ten}.map(e, {ten}.map(f, f))))))"
    assert "cost limit exceeded" in runtime_error(nested + ".size() > 0")


def test_cost_limit_stops_runaway_strings() -> None:
    doubling = "cel.bind(s0, 'xxxxxxxxxxxxxxxx', "
    closing = ")"
    for n in range(1, 40):
        doubling += f"cel.bind(s{n}, s{n - 1} + s{n - 1}, "
        closing += ")"
    assert "cost limit exceeded" in runtime_error(doubling + "s39.size() > 0" + closing)


def test_cost_is_per_evaluation() -> None:
    ten = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
    moderate = compile_expression(f"{ten}.map(a, {ten}.map(b, {ten}.map(c, c))).size()", {})
    for _ in range(5):
        assert moderate.evaluate({}) == 10


def test_constant_folding_does_not_build_huge_values() -> None:
    expression = "'aaaa'" + ".replace('a', 'aaaa')" * 20 + ".size() > 0"
    assert "cost limit exceeded" in runtime_error(expression)


def test_multiplying_replace_is_stopped_before_it_allocates() -> None:
    grow = "cel.bind(s, 'xxxxxxxxxx'" + " + 'xxxxxxxxxx'" * 99 + ", cel.bind(t, s + s + s + s + s, "
    assert "cost limit exceeded" in runtime_error(grow + "t.replace('', t + t + t).size() > 0))")


@pytest.mark.parametrize("pattern", [r"(a)\\1", "a(?=b)", "a(?!b)", "(?<=a)b", "(?>a+)", "a++", "a*+"])
def test_regex_syntax_outside_re2_is_rejected(pattern: str) -> None:
    assert "invalid regular expression" in runtime_error(f"'ab'.matches('{pattern}')")


def test_regex_runs_in_linear_time_on_a_catastrophic_pattern() -> None:
    # A backtracking engine needs exponential time here; RE2 answers at once.
    expression = compile_expression("s.matches('(a+)+$')", {"s": str})
    assert expression.evaluate({"s": "a" * 50_000 + "b"}) is False


def test_regex_end_of_text() -> None:
    assert compile_expression(r"'ab\n'.matches('b\\z')", {}).evaluate({}) is False
    assert compile_expression(r"'ab'.matches('b\\z')", {}).evaluate({}) is True


def test_the_smallest_int_modulo_minus_one_overflows_as_in_cel_go() -> None:
    """cel-go refuses `math.MinInt64 % -1` (its quotient overflows); found by the differential test."""
    with pytest.raises(CelRuntimeError, match="integer overflow"):
        compile_expression("-9223372036854775808 % -1", {}).evaluate({})
