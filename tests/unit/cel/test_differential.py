"""Differential tests: standard CEL expressions give the same value (or both an error) here and in
the cel-cpp based reference implementation `cel_expr_python`.

The reference type-checks without cross-type numeric comparisons; where it rejects an expression at
check time that draq accepts (`1 == 1.0`, `1 < 1.5`), draq's value must equal the reference's
unchecked evaluation, which implements CEL's runtime semantics.

The reference is a dev dependency (`pip install -e '.[dev]'`). Where it is missing these tests are
skipped, with the reason, on a developer's machine; under CI they fail, so a broken install cannot
pass unseen.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from admission.core.cel import CelError, compile_expression
from admission.core.cel.parser import ParseError, parse
from admission.core.cel.values import UInt
from tests.support.environment import in_ci

REFERENCE: Any = None
MISSING: str | None = None
try:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_bindings, ext_strings
except ImportError as error:
    MISSING = (f"the reference CEL implementation cel-expr-python cannot be imported ({error}); "
               "install the dev extras: pip install -e '.[dev]'")
else:
    REFERENCE = cel.NewEnv(extensions=[ext_strings.ExtStrings(), ext_bindings.ExtBindings()])

if MISSING is not None and not in_ci():
    pytest.skip(MISSING, allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def reference_present() -> None:
    """Under CI (where the dev extras are installed) a missing reference fails every test here."""
    if MISSING is not None:
        pytest.fail(f"{MISSING}; CI must run the CEL differential tests", pytrace=False)


INTS = ["0", "1", "-1", "2", "3", "7", "-13", "100", "9223372036854775807", "-9223372036854775808"]
UINTS = ["0u", "1u", "7u", "18446744073709551615u"]
DOUBLES = ["0.0", "1.0", "-1.5", "2.5", "0.1", "1e300", "-0.0"]
STRINGS = ['""', '"a"', '"abc"', '"Hello World"', '"ß"', '"a,b,c"', "'x'", '"aBc"', '" pad "']
LISTS = ["[]", "[1, 2, 3]", "[3, 1, 2]", "[0]", "[-1, 7]"]


@cache
def _ints(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(INTS)
    if depth <= 0:
        return leaf
    sub = _ints(depth - 1)
    return st.one_of(
        leaf,
        st.builds(lambda a, op, b: f"({a} {op} {b})", sub, st.sampled_from("+-*/%"), sub),
        st.builds(lambda a: f"-{a}", sub),
        st.builds(lambda s: f"size({s})", _strings(depth - 1)),
        st.builds(lambda s: f"{s}.size()", _lists(depth - 1)),
        st.builds(lambda d: f"int({d})", st.sampled_from(DOUBLES + UINTS + ['"42"', '"-7"', '"x"'])),
        st.builds(lambda c, a, b: f"({c} ? {a} : {b})", _bools(depth - 1), sub, sub),
        st.builds(lambda lst, i: f"{lst}[{i}]", _lists(depth - 1), sub),
        st.builds(lambda s, t: f"{s}.indexOf({t})", _strings(depth - 1), _strings(depth - 1)),
        st.builds(lambda a: f"cel.bind(v, {a}, v * v)", sub),
    )


@cache
def _uints(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(UINTS)
    if depth <= 0:
        return leaf
    sub = _uints(depth - 1)
    return st.one_of(leaf, st.builds(lambda a, op, b: f"({a} {op} {b})", sub, st.sampled_from("+-*/%"), sub),
                     st.builds(lambda i: f"uint({i})", _ints(depth - 1)))


@cache
def _doubles(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(DOUBLES)
    if depth <= 0:
        return leaf
    sub = _doubles(depth - 1)
    return st.one_of(leaf, st.builds(lambda a, op, b: f"({a} {op} {b})", sub, st.sampled_from("+-*/"), sub),
                     st.builds(lambda i: f"double({i})", _ints(depth - 1)),
                     st.builds(lambda a: f"-{a}", sub))


@cache
def _strings(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(STRINGS)
    if depth <= 0:
        return leaf
    sub = _strings(depth - 1)
    return st.one_of(
        leaf,
        st.builds(lambda a, b: f"{a} + {b}", sub, sub),
        st.builds(lambda i: f"string({i})", _ints(depth - 1)),
        st.builds(lambda s, m: f"{s}.{m}()", sub, st.sampled_from(["lowerAscii", "upperAscii", "trim"])),
        st.builds(lambda s, i: f"{s}.substring({i})", sub, st.sampled_from(["0", "1", "3", "-1"])),
        st.builds(lambda s, i: f"{s}.charAt({i})", sub, st.sampled_from(["0", "1", "5"])),
        st.builds(lambda s, a, b: f"{s}.replace({a}, {b})", sub, leaf, leaf),
        st.builds(lambda c, a, b: f"({c} ? {a} : {b})", _bools(depth - 1), sub, sub),
        st.builds(lambda s: f"{s}.split(\",\").join(\"-\")", sub),
    )


@cache
def _lists(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(LISTS)
    if depth <= 0:
        return leaf
    sub = _lists(depth - 1)
    ints = _ints(depth - 1)
    return st.one_of(
        leaf,
        st.builds(lambda a, b: f"[{a}, {b}]", ints, ints),
        st.builds(lambda a, b: f"{a} + {b}", sub, sub),
        st.builds(lambda a, k: f"{a}.map(x, x * {k})", sub, st.sampled_from(INTS)),
        st.builds(lambda a, k: f"{a}.filter(x, x > {k})", sub, st.sampled_from(INTS)),
        st.builds(lambda a, k: f"{a}.map(x, x > {k}, x + 1)", sub, st.sampled_from(INTS)),
    )


@cache
def _bools(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(["true", "false"])
    if depth <= 0:
        return leaf
    sub = _bools(depth - 1)
    numbers = st.one_of(_ints(depth - 1), _uints(depth - 1), _doubles(depth - 1))
    relation = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])
    return st.one_of(
        leaf,
        st.builds(lambda a, op, b: f"({a} {op} {b})", sub, st.sampled_from(["&&", "||"]), sub),
        st.builds(lambda a: f"!{a}", sub),
        st.builds(lambda a, op, b: f"({a} {op} {b})", numbers, relation, numbers),
        st.builds(lambda a, op, b: f"({a} {op} {b})", _strings(depth - 1), relation, _strings(depth - 1)),
        st.builds(lambda a, op, b: f"(dyn({a}) {op} {b})", sub, st.sampled_from(["==", "!="]), numbers),
        st.builds(lambda s, m, t: f"{s}.{m}({t})", _strings(depth - 1),
                  st.sampled_from(["contains", "startsWith", "endsWith", "matches"]), _strings(depth - 1)),
        st.builds(lambda i, lst: f"({i} in {lst})", _ints(depth - 1), _lists(depth - 1)),
        st.builds(lambda lst, m, k: f"{lst}.{m}(x, x > {k})", _lists(depth - 1),
                  st.sampled_from(["all", "exists", "exists_one"]), st.sampled_from(INTS)),
        st.builds(lambda lst, m: f"{lst}.{m}(x, 10 / x > 1)", _lists(depth - 1),
                  st.sampled_from(["all", "exists"])),
        st.builds(lambda a, b: f"({{\"a\": {a}}}.a == {b})", _ints(depth - 1), _ints(depth - 1)),
        st.builds(lambda k: f"has({{\"a\": 1, \"b\": 2}}.{k})", st.sampled_from(["a", "b", "c"])),
        st.builds(lambda k: f"({k} in {{\"a\": 1, 2: 3}})", st.sampled_from(['"a"', "2", "2.0", '"z"', "2u"])),
        st.builds(lambda a, b: f"({a} == {b})", _lists(depth - 1), _lists(depth - 1)),
        st.builds(lambda a, b: f"(type({a}) == type({b}))", numbers, numbers),
    )


MAPS = ['{}', '{"a": 1}', '{"a": 1, "b": 2}', '{1: "x", 2: "y"}', '{true: 1, false: 0}', '{"k": [1, 2]}']


@cache
def _maps(depth: int) -> st.SearchStrategy[str]:
    leaf = st.sampled_from(MAPS)
    if depth <= 0:
        return leaf
    ints = _ints(depth - 1)
    return st.one_of(
        leaf,
        st.builds(lambda a, b: f'{{"x": {a}, "y": {b}}}', ints, ints),
        st.builds(lambda s, a: f"{{{s}: {a}}}", _strings(depth - 1), ints),
    )


@cache
def _map_queries(depth: int) -> st.SearchStrategy[str]:
    maps = _maps(depth)
    keys = st.sampled_from(['"a"', '"x"', "1", "1u", "1.0", "1.5", "true", '"k"'])
    return st.one_of(
        st.builds(lambda m, k: f"{m}[{k}]", maps, keys),
        st.builds(lambda m, k: f"({k} in {m})", maps, keys),
        st.builds(lambda m, f: f"has({m}.{f})", maps, st.sampled_from(["a", "x", "k", "z"])),
        st.builds(lambda m, f: f"{m}.{f}", maps, st.sampled_from(["a", "x", "k", "z"])),
        st.builds(lambda m: f"{m}.size()", maps),
        st.builds(lambda m, op: f"{m}.{op}(k, k == \"a\" || k == 1)", maps,
                  st.sampled_from(["all", "exists", "exists_one"])),
        st.builds(lambda m: f"{m}.map(k, type(k) == string).size()", maps),
        st.builds(lambda a, b: f"({a} == {b})", maps, maps),
        st.builds(lambda b, t: f"{b} + {t}", st.sampled_from(['b"ab"', "b'\\xff'", 'b""']),
                  st.sampled_from(['b"c"', 'b"\\x00"'])),
        st.builds(lambda b: f"size({b})", st.sampled_from(['b"ab"', "b'\\xff'", 'b""', "bytes('é')"])),
        st.builds(lambda x: f"string({x})", st.sampled_from(DOUBLES + UINTS + ['b"ab"', "true"])),
    )


MACROS = (".all(", ".exists", ".map(", ".filter(")
EXPRESSIONS = st.one_of(_bools(3), _ints(3), _strings(2), _lists(2), _doubles(2), _uints(2), _map_queries(2))


def _reference(expression: str) -> tuple[str, Any]:
    """('value', canonical) or ('error', message), checked first, then unchecked if the check fails."""
    try:
        compiled = REFERENCE.compile(expression)
        checked = True
    except RuntimeError:
        checked = False
        try:
            compiled = REFERENCE.compile(expression, disable_check=True)
        except RuntimeError as error:
            return ("error", str(error))
    try:
        value = compiled.eval()
    except RuntimeError as error:
        return ("error", str(error))
    if value.type().name() == "ERROR":
        return ("error", value.plain_value())
    return ("value" if checked else "unchecked", _canonical_reference(value))


def _canonical_reference(value: Any) -> Any:
    name = value.type().name()
    if name.startswith("LIST"):
        return ("list", tuple(_canonical_reference(v) for v in value.value()))
    if name.startswith("MAP"):
        return ("map", frozenset((_canonical_key(k), _canonical_reference(v)) for k, v in value.value().items()))
    plain = value.plain_value()
    kinds = {"INT": "int", "UINT": "uint", "DOUBLE": "double", "BOOL": "bool", "STRING": "string",
             "BYTES": "bytes", "NULL_TYPE": "null", "TYPE": "type"}
    kind = kinds.get(name, name)
    if kind == "double":
        return ("double", "nan" if math.isnan(plain) else plain)
    if kind == "bytes":
        return ("bytes", bytes(plain))
    if kind == "type":
        return ("type", str(plain.name()).lower())
    return (kind, plain)


def _canonical_key(key: Any) -> Any:
    return ("bool" if isinstance(key, bool) else type(key).__name__, key)


def _canonical_ours(value: Any) -> Any:
    if isinstance(value, list):
        return ("list", tuple(_canonical_ours(v) for v in value))
    if isinstance(value, dict):
        return ("map", frozenset((_canonical_key(k), _canonical_ours(v)) for k, v in value.items()))
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, UInt):
        return ("uint", int(value))
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("double", "nan" if math.isnan(value) else value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, bytes):
        return ("bytes", value)
    if value is None:
        return ("null", None)
    return ("type", str(value).lower())


def _ours(expression: str) -> tuple[str, Any]:
    try:
        return ("value", _canonical_ours(compile_expression(expression, {}).evaluate({})))
    except CelError as error:
        return ("error", str(error))


def check_against_reference(expression: str) -> None:
    ours_kind, ours = _ours(expression)
    ref_kind, ref = _reference(expression)
    if ours_kind == "error":
        assert ref_kind in ("error", "unchecked"), f"{expression}: draq error {ours!r}, reference {ref!r}"
        return
    assert ref_kind != "error", f"{expression}: draq {ours!r}, reference error {ref!r}"
    assert ours == ref, f"{expression}: draq {ours!r}, reference {ref!r}"


@settings(max_examples=400, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(EXPRESSIONS)
def test_generated_expressions_agree_with_reference(expression: str) -> None:
    # The reference reuses a comprehension's variable slot for a later cel.bind variable after an
    # early exit (`[1, 2].exists(x, x > 0) ? cel.bind(v, 0, v * v) : 0` gives 4 there): skip those.
    assume(not ("cel.bind" in expression and any(m in expression for m in MACROS)))
    check_against_reference(expression)


def _reference_parses(expression: str) -> bool:
    try:
        REFERENCE.compile(expression, disable_check=True)
    except RuntimeError:
        return False
    return True


def _ours_parse(expression: str) -> str | None:
    """None when draq parses the expression, else the parse error."""
    try:
        parse(expression)
    except ParseError as error:
        return str(error)
    return None


# Negation runs and int literals at the edge of the range (a generated `---9223372036854775808` was
# accepted by draq and refused by the reference): both must parse the same and then agree.
@pytest.mark.parametrize("expression", [
    "-9223372036854775808", "--9223372036854775808", "---9223372036854775808", "----9223372036854775808",
    "-(9223372036854775808)", "-(-9223372036854775808)", "--(-9223372036854775808)", "- 9223372036854775808",
    "-9223372036854775809", "--9223372036854775807", "---9223372036854775807", "-0x8000000000000000",
    "--0x8000000000000000", "1 - -9223372036854775808", "1--9223372036854775808",
    "false && ---9223372036854775808 == 1", "true || --9223372036854775808 == 1",
    "--1", "---1", "--1.5", "-1u", "--1u", '--"a"', "!!1", "!-1", "!!-1", "-!true", "!!!true",
])
def test_negation_and_int_literal_range_agree_with_reference(expression: str) -> None:
    ours_error = _ours_parse(expression)
    reference_parses = _reference_parses(expression)
    assert (ours_error is None) == reference_parses, (
        f"{expression}: the reference {'parses' if reference_parses else 'refuses'} it, "
        f"draq {'parses it' if ours_error is None else 'refuses it: ' + ours_error}")
    check_against_reference(expression)


@pytest.mark.parametrize("expression", [
    "1 + 2 * 3 - 4 / 2 % 3",
    "9223372036854775807 + 1",
    "-9223372036854775808 - 1",
    "-9223372036854775808 / -1",
    "18446744073709551615u + 1u",
    "0u - 1u",
    "7 / 0", "7 % 0", "7.0 / 0.0", "-7 / 2", "-7 % 2", "7 % -2",
    "1.0 == 1", "dyn(1) == 1.0", "dyn(1u) == 1", "dyn(true) == 1",
    "[1, 2] == [1.0, 2.0]", "{'a': 1} == {'a': 1.0}", "[dyn(true)] == [1]",
    "'abc' < 'abd'", "b'a' < b'b'", "false < true", "1 < 1.5", "1u < -1",
    "false && 1 / 0 == 1", "1 / 0 == 1 && false", "true || 1 / 0 == 1", "1 / 0 == 1 || true",
    "1 / 0 == 1 || false", "false || 1 / 0 == 1", "1 / 0 == 1 && 2 / 0 == 1",
    "[1, 2, 3].all(x, x > 0)", "[0, 1].all(x, 1 / x > 0)", "[0, 1].exists(x, 1 / x > 0)",
    "[0, 1].exists_one(x, x == 1)", "[1, 2].exists_one(x, x > 0)",
    "{'a': 1}.map(k, k + '!')", "{'a': 1}.exists(k, k == 'a')",
    "[1, 2, 3].map(x, x % 2 == 1, x * 10)",
    "int('42')", "int('-9223372036854775809')", "uint('18446744073709551616')", "int(1e19)",
    "int(-1.5)", "uint(-1)", "double('1e3')", "double('inf')", "string(1.5)", "string(100000.0)",
    "string(1e6)", "string(0.000015)", "string(-0.0)", "string(1e21)", "string(123456789.0)",
    "string(b'abc')", "bytes('ÿ')", "bool('true')", "bool('TRUE')", "bool('yes')",
    "size('héllo')", "size(b'h\\xffllo')", "'héllo'.size()",
    "type(1) == int", "type(1u) == uint", "type('a') == string", "type([]) == list", "type(null) == null_type",
    "type(type(1)) == type", "type({}) == map",
    "'abc'.contains('')", "'abc'.startsWith('ab')", "'abc'.endsWith('bc')", "'abc'.matches('^a.c$')",
    "'a1b2'.matches('[0-9]')", "'ab'.matches('(')",
    "[1, 2][2]", "[1, 2][-1]", "{'a': 1}['b']", "{'a': 1}.b", "{1: 'x'}[1.0]", "{1: 'x'}[1u]",
    "{'a': 1, 'a': 2}", "{true: 1, 1: 2}.size()", "2 in {1: 'a', 2: 'b'}", "'z' in {'a': 1}",
    "'\\x41\\u00e9\\101' == 'Aé' + 'A'", "r'\\d' == '\\\\d'", "'''a\nb''' == 'a\\nb'",
    "cel.bind(x, 'ab', x + x)", "cel.bind(x, 2, cel.bind(y, x * 3, x + y))",
    "'Hello'.lowerAscii()", "'hello'.upperAscii()", "'  a b  '.trim()", "'abc'.charAt(3)", "'abc'.charAt(4)",
    "'abcabc'.indexOf('c')", "'abcabc'.lastIndexOf('c')", "'abcabc'.indexOf('c', 3)",
    "'abcabc'.lastIndexOf('b', 3)", "'abc'.substring(1)", "'abc'.substring(1, 2)", "'abc'.substring(2, 1)",
    "'a,b,,c'.split(',')", "'a,b,c'.split(',', 2)", "'abc'.split('')", "['a', 'b'].join()",
    "['a', 'b'].join(', ')", "'aaa'.replace('a', 'b', 2)", "'aaa'.replace('a', 'b', -1)",
    "'aaa'.replace('', '-')",
    "null == null", "[null] == [null]", "{}.size() == 0",
    "0.1 + 0.2", "1e308 * 10.0", "-(1e308 * 10.0)", "(0.0 / 0.0) == (0.0 / 0.0)",
    "[1, 2, 3].filter(x, x > 1).map(x, x * x)", "[[1], [2, 3]].map(l, l.size())",
])
def test_edge_cases_agree_with_reference(expression: str) -> None:
    check_against_reference(expression)
