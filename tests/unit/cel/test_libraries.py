"""Kubernetes libraries (quantity, semver, lists, sets, regex), string extensions, optionals."""

from __future__ import annotations

import re

import pytest

from admission.core.cel import CelCompileError, CelRuntimeError, compile_expression
from admission.core.cel.values import UInt
from admission.core.quantity import Quantity, parse_quantity
from admission.core.semver import Semver

from .conftest import DRIVER, gpu


def run(expression: str, **variables: object) -> object:
    return compile_expression(expression, {name: object for name in variables}).evaluate(variables)


def fails(expression: str, fragment: str, **variables: object) -> None:
    with pytest.raises(CelRuntimeError) as raised:
        run(expression, **variables)
    assert fragment in str(raised.value)


# -- quantity ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("expression", "expected"), [
    ("quantity('1Gi') == quantity('1024Mi')", True),
    ("quantity('1Gi').compareTo(quantity('1G'))", 1),
    ("quantity('500m').compareTo(quantity('0.5'))", 0),
    ("quantity('1').isLessThan(quantity('2'))", True),
    ("quantity('3').isGreaterThan(quantity('2'))", True),
    ("quantity('1.5').isInteger()", False),
    ("quantity('2k').isInteger()", True),
    ("quantity('2k').asInteger()", 2000),
    ("quantity('1.5').asApproximateFloat()", 1.5),
    ("quantity('-3').sign()", -1),
    ("quantity('0').sign()", 0),
    ("quantity('1Gi').add(quantity('1Gi')) == quantity('2Gi')", True),
    ("quantity('10').add(5) == quantity('15')", True),
    ("quantity('10').sub(quantity('500m')) == quantity('9.5')", True),
    ("quantity('10').sub(20).sign()", -1),
    ("isQuantity('80Gi')", True),
    ("isQuantity('80 gigs')", False),
    ("type(quantity('1')) == type(quantity('2'))", True),
])
def test_quantity_library(expression: str, expected: object) -> None:
    assert run(expression) == expected


def test_quantity_errors() -> None:
    fails("quantity('lots').sign() == 1", "invalid quantity")
    fails("quantity('1.5').asInteger() == 1", "cannot convert value 1500m to integer")
    fails("quantity('1e30').asInteger() == 1", "cannot convert")


def test_quantity_values_from_variables() -> None:
    assert run("q.compareTo(quantity('40Gi')) >= 0", q=parse_quantity("80Gi")) is True
    result = run("q.add(quantity('1Gi'))", q=parse_quantity("1Gi"))
    assert isinstance(result, Quantity)
    assert result == parse_quantity("2Gi")


# -- semver ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("expression", "expected"), [
    ("semver('1.2.3').major()", 1),
    ("semver('1.2.3').minor()", 2),
    ("semver('1.2.3').patch()", 3),
    ("semver('1.2.3').isLessThan(semver('1.10.0'))", True),
    ("semver('2.0.0').isGreaterThan(semver('2.0.0-rc.1'))", True),
    ("semver('1.0.0-alpha').compareTo(semver('1.0.0-alpha.1'))", -1),
    ("semver('1.2.3') == semver('1.2.3+build')", True),
    ("semver('v1.2', true) == semver('1.2.0')", True),
    ("isSemver('1.2.3')", True),
    ("isSemver('1.2')", False),
    ("isSemver('v1.2', true)", True),
    ("isSemver('01.2.3')", False),
])
def test_semver_library(expression: str, expected: object) -> None:
    assert run(expression) == expected


def test_semver_errors() -> None:
    fails("semver('1.2').major() == 1", "invalid semver")
    fails("semver('1.2.3').isLessThan(dyn(quantity('1')))", "no such overload")


def test_semver_result_is_a_semver() -> None:
    assert isinstance(run("semver('1.2.3')"), Semver)


# -- strings -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("expression", "expected"), [
    ("'Hello'.lowerAscii()", "hello"),
    ("'ÄbC'.upperAscii()", "ÄBC"),
    ("'a-b-c'.split('-')", ["a", "b", "c"]),
    ("'a-b-c'.split('-', 2)", ["a", "b-c"]),
    ("'a-b-c'.split('-', 0)", []),
    ("['a', 'b'].join('/')", "a/b"),
    ("'banana'.replace('a', 'o')", "bonono"),
    ("'banana'.replace('a', 'o', 1)", "bonana"),
    ("'  x  '.trim()", "x"),
    ("'hello'.substring(1, 3)", "el"),
    ("'hello'.indexOf('l')", 2),
    ("'hello'.indexOf('l', 3)", 3),
    ("'hello'.indexOf('z')", -1),
    ("'hello'.lastIndexOf('l')", 3),
    ("'héllo'.charAt(1)", "é"),
    ("'abc'.reverse()", "cba"),
    ("strings.quote('a\"b')", '"a\\"b"'),
    ("'gpu-0 gpu-12'.find('[0-9]+')", "0"),
    ("'gpu-0 gpu-12'.findAll('[0-9]+')", ["0", "12"]),
    ("'a1b2c3'.findAll('[0-9]', 2)", ["1", "2"]),
    ("'nothing'.find('[0-9]')", ""),
    ("'H100'.matches('^H[0-9]+$')", True),
    ("matches('H100', 'A')", False),
])
def test_string_functions(expression: str, expected: object) -> None:
    assert run(expression) == expected


def test_string_errors() -> None:
    fails("'abc'.substring(4) == ''", "index out of range")
    fails("'abc'.substring(2, 1) == ''", "invalid substring range")
    fails("'abc'.charAt(-1) == ''", "index out of range")
    fails("[dyn(1), 2].join() == ''", "not a string")


# -- lists and sets ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("expression", "expected"), [
    ("[1, 2, 3].isSorted()", True),
    ("[3, 1].isSorted()", False),
    ("['a', 'b'].isSorted()", True),
    ("[1, 2, 3].sum()", 6),
    ("[1.5, 2.5].sum()", 4.0),
    ("[].sum()", 0),
    ("[3, 1, 2].min()", 1),
    ("[3, 1, 2].max()", 3),
    ("[1, 2, 1].indexOf(1)", 0),
    ("[1, 2, 1].lastIndexOf(1)", 2),
    ("[1, 2].indexOf(3)", -1),
    ("[1, 2, 3, 4].slice(1, 3)", [2, 3]),
    ("[[1], [2, [3]]].flatten()", [1, 2, [3]]),
    ("[[1], [2, [3]]].flatten(2)", [1, 2, 3]),
    ("[1, 2, 1, 1.0].distinct()", [1, 2]),
    ("[3, 1, 2].sort()", [1, 2, 3]),
    ("[1, 2].reverse()", [2, 1]),
    ("lists.range(3)", [0, 1, 2]),
    ("[1, 2].first().value()", 1),
    ("[].last().hasValue()", False),
    ("sets.contains([1, 2, 3], [3, 1])", True),
    ("sets.contains([1], [2])", False),
    ("sets.equivalent([1, 2, 2], [2, 1])", True),
    ("sets.intersects([1, 2], [2, 5])", True),
    ("sets.intersects([1], [])", False),
    ("[1, 2, 3].all(i, v, v == i + 1)", True),
    ("{'a': 1, 'b': 2}.exists(k, v, v == 2 && k == 'b')", True),
    ("[5, 6].transformList(i, v, v * i)", [0, 6]),
    ("{'a': 1}.transformMap(k, v, v + 1)", {"a": 2}),
])
def test_list_functions(expression: str, expected: object) -> None:
    assert run(expression) == expected


def test_list_errors() -> None:
    fails("[].min() == 0", "empty list")
    fails("[1, 'a'].isSorted()", "not comparable")
    fails("[1, 2].slice(1, 5).size() == 0", "cannot slice")
    fails("dyn(['a']).sum() == 0", "sum() needs numbers")
    fails("[9223372036854775807, 1].sum() == 0", "integer overflow")


# -- optionals, types, conversions --------------------------------------------------------------------
@pytest.mark.parametrize(("expression", "expected"), [
    ("optional.of(1).hasValue()", True),
    ("optional.none().orValue(5)", 5),
    ("optional.ofNonZeroValue('').hasValue()", False),
    ("optional.none().or(optional.of(2)).value()", 2),
    ("{'a': 1}.?a.value()", 1),
    ("{'a': 1}.?b.hasValue()", False),
    ("{'a': {'b': 2}}.?a.?b.orValue(0)", 2),
    ("[1, 2][?5].orValue(-1)", -1),
    ("{'a': 1}[?'a'].value()", 1),
    ("[1, ?optional.none(), ?optional.of(3)]", [1, 3]),
    ("{'a': 1, ?'b': optional.none()}", {"a": 1}),
    ("type(1u) == uint", True),
    ("type(1) != type(1u)", True),
    ("type(optional.of(1)) == type(optional.none())", True),
    ("uint(3)", UInt(3)),
    ("dyn(1u) == 1", True),
    ("double(1u)", 1.0),
    ("bytes('a') == b'a'", True),
    ("{true: 'yes', 1: 'one'}[true]", "yes"),
    ("{true: 'yes', 1: 'one'}[1]", "one"),
])
def test_optionals_types_and_conversions(expression: str, expected: object) -> None:
    result = run(expression)
    assert result == expected
    assert type(result) is type(expected)


def test_compile_expression_accepts_type_hints() -> None:
    weight = compile_expression("gpus * 2 + extra.size()", {"gpus": int, "extra": "list(int)"})
    assert weight.evaluate({"gpus": 3, "extra": [1, 2]}) == 8
    assert compile_expression("m['k'] > 1.5", {"m": dict}).evaluate({"m": {"k": 2}}) is True
    assert compile_expression("x.size()", {"x": str}).evaluate({"x": "abc"}) == 3


def test_statically_wrong_library_calls_are_compile_errors() -> None:
    with pytest.raises(CelCompileError, match=re.escape("'kubernetes.Semver.(kubernetes.Quantity)'")):
        compile_expression("semver('1.2.3').isLessThan(quantity('1'))", {})
    with pytest.raises(CelCompileError, match=re.escape("'join' applied to 'list(int).()'")):
        compile_expression("[1, 2].join()", {})


def test_compile_expression_checks_declared_types() -> None:
    with pytest.raises(CelCompileError, match="found no matching overload"):
        compile_expression("x.startsWith('a')", {"x": int})


def test_activation_values_must_match_declared_types() -> None:
    program = compile_expression("x >= 1", {"x": int})
    with pytest.raises(CelRuntimeError, match="variable x: declared int, got a value of type string"):
        program.evaluate({"x": "a"})
    assert compile_expression("x > 1.5", {"x": float}).evaluate({"x": 2}) is True


@pytest.mark.parametrize(("expression", "expected"), [
    ("'%s has %d GPUs'.format(['node-1', 8])", "node-1 has 8 GPUs"),
    ("'%.2f|%f|%e'.format([3.14159, 1.5, 12345.678])", "3.14|1.500000|1.234568e+04"),
    ("'%b %o %x %X %%'.format([5, 8, 255, 255])", "101 10 ff FF %"),
    ("'%x'.format(['hi'])", "6869"),
    ("'%x'.format([-255])", "-ff"),
    ("'%s'.format([[1, 'a', true, null, 1.5]])", '[1, "a", true, null, 1.5]'),
    ("'%s'.format([{'b': 1, 'a': 2}])", '{"a": 2, "b": 1}'),
    ("'%f'.format([double('inf')])", "Infinity"),
])
def test_format(expression: str, expected: str) -> None:
    assert run(expression) == expected


def test_format_errors() -> None:
    fails("'%d'.format([1.5]) == ''", "decimal clause can only be used on integers")
    fails("'%s %s'.format([1]) == ''", "index 1 out of range")
    fails("'%5d'.format([1]) == ''", "could not parse formatting clause")


def test_compile_expression_with_a_device_variable() -> None:
    weight = compile_expression(
        f'device.capacity["{DRIVER}"].memory.asApproximateFloat() / 1073741824.0', {"device": "device"})
    assert weight.evaluate({"device": gpu(memory="80Gi")}) == 80.0
    with pytest.raises(CelCompileError, match="undefined field 'vendor'"):
        compile_expression("device.vendor", {"device": "device"})
