"""The DRA selector environment: the `device` variable, its maps, and selector-specific errors."""

from __future__ import annotations

import pytest

from admission.core.cel import CelCompileError, CelRuntimeError, Program, compile_selector
from admission.core.semver import parse_semver

from .conftest import DRIVER, FakeDevice, gpu

REALISTIC = (f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "H100" '
             f'&& device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0')


def evaluate(expression: str, device: FakeDevice, **options: bool) -> bool:
    return compile_selector(expression, **options).evaluate(device)


@pytest.mark.parametrize(("device", "expected"), [
    (gpu("H100", "80Gi"), True),
    (gpu("H100", "32Gi"), False),
    (gpu("A100", "80Gi"), False),
    (FakeDevice(driver="other.example.com"), False),
])
def test_realistic_selector(device: FakeDevice, expected: bool) -> None:
    assert evaluate(REALISTIC, device) is expected


def test_program_exposes_its_expression_and_is_cached() -> None:
    program = compile_selector(REALISTIC)
    assert isinstance(program, Program)
    assert program.expression == REALISTIC
    assert compile_selector(REALISTIC) is program
    assert compile_selector(REALISTIC, list_attributes=True) is not program


def test_unknown_domain_is_an_empty_map() -> None:
    assert evaluate('device.attributes["nic.example.com"].size() == 0', gpu())
    assert evaluate('device.capacity["nic.example.com"].size() == 0', gpu())
    assert not evaluate('"x" in device.attributes["nic.example.com"]', gpu())


def test_missing_attribute_is_a_runtime_error() -> None:
    with pytest.raises(CelRuntimeError, match="no such key: missing"):
        evaluate(f'device.attributes["{DRIVER}"].missing == 1', gpu())
    with pytest.raises(CelRuntimeError, match="no such key: missing"):
        evaluate(f'device.attributes["{DRIVER}"]["missing"] == 1', gpu())
    with pytest.raises(CelRuntimeError, match="no such key: memory"):
        evaluate('device.capacity["nic.example.com"].memory.isInteger()', gpu())


@pytest.mark.parametrize("guard", [
    f'has(device.attributes["{DRIVER}"].missing) && device.attributes["{DRIVER}"].missing == 1',
    f'"missing" in device.attributes["{DRIVER}"] && device.attributes["{DRIVER}"].missing == 1',
])
def test_guards_prevent_the_missing_key_error(guard: str) -> None:
    assert evaluate(guard, gpu()) is False
    assert evaluate(guard, gpu(missing=1)) is True


def test_has_and_in_report_presence() -> None:
    assert evaluate(f'has(device.attributes["{DRIVER}"].model)', gpu())
    assert not evaluate(f'has(device.attributes["{DRIVER}"].nope)', gpu())
    assert evaluate(f'"memory" in device.capacity["{DRIVER}"]', gpu())


def test_attribute_value_types() -> None:
    device = gpu(cores=128, virtual=False, index=0)
    assert evaluate(f'device.attributes["{DRIVER}"].cores > 100', device)
    assert evaluate(f'device.attributes["{DRIVER}"].virtual == false', device)
    assert evaluate(f'!device.attributes["{DRIVER}"].virtual', device)
    assert evaluate(f'device.attributes["{DRIVER}"].cores == 128.0', device)


def test_version_attributes_are_semver_objects() -> None:
    base = f'device.attributes["{DRIVER}"].driverVersion'
    assert evaluate(f'{base}.isGreaterThan(semver("1.2.0"))', gpu())
    assert evaluate(f'{base}.compareTo(semver("1.2.3")) == 0', gpu())
    assert evaluate(f'{base} == semver("1.2.3")', gpu())
    assert evaluate(f'{base}.major() == 1 && {base}.minor() == 2 && {base}.patch() == 3', gpu())


def test_non_bool_result_is_a_runtime_error_for_dynamic_values() -> None:
    with pytest.raises(CelRuntimeError, match="CEL result of type string could not be converted to bool"):
        evaluate(f'device.attributes["{DRIVER}"].model', gpu())


def test_statically_non_bool_result_is_a_compile_error() -> None:
    with pytest.raises(CelCompileError, match="must evaluate to bool"):
        compile_selector("device.driver")
    with pytest.raises(CelCompileError, match="must evaluate to bool"):
        compile_selector("1 + 1")


def test_allow_multiple_allocations_needs_the_option() -> None:
    with pytest.raises(CelCompileError, match="undefined field 'allowMultipleAllocations'"):
        compile_selector("device.allowMultipleAllocations")
    shared = FakeDevice(allow_multiple_allocations=True)
    assert evaluate("device.allowMultipleAllocations", shared, allow_multiple_allocations=True)
    assert not evaluate("device.allowMultipleAllocations", FakeDevice(), allow_multiple_allocations=True)


def test_unknown_device_field_is_a_compile_error_with_position() -> None:
    with pytest.raises(CelCompileError) as raised:
        compile_selector("device.vendor == 'x'")
    assert str(raised.value) == (
        "compilation failed: ERROR: <input>:1:7: undefined field 'vendor'\n"
        " | device.vendor == 'x'\n"
        " | ......^"
    )


def test_list_attributes_are_an_error_without_the_gate() -> None:
    device = gpu(links=(1, 2, 3))
    with pytest.raises(CelRuntimeError, match=r"^attribute links: unsupported attribute value$"):
        evaluate(f'device.attributes["{DRIVER}"].links.size() == 3', device)
    with pytest.raises(CelCompileError, match="undeclared reference to 'includes'"):
        compile_selector(f'device.attributes["{DRIVER}"].links.includes(2)')


def test_list_attributes_with_the_gate() -> None:
    device = gpu(links=(1, 2, 3), zone="a")
    base = f'device.attributes["{DRIVER}"]'
    assert evaluate(f"{base}.links.includes(2)", device, list_attributes=True)
    assert not evaluate(f"{base}.links.includes(7)", device, list_attributes=True)
    assert evaluate(f'{base}.zone.includes("a")', device, list_attributes=True)
    assert evaluate(f"{base}.links.exists(l, l == 3)", device, list_attributes=True)
    assert evaluate(f"{base}.links.all(l, l > 0)", device, list_attributes=True)


def test_includes_rejects_lists_longer_than_48() -> None:
    device = gpu(links=tuple(range(49)))
    with pytest.raises(CelRuntimeError, match="at most 48"):
        evaluate(f'device.attributes["{DRIVER}"].links.includes(1)', device, list_attributes=True)


def test_dynamic_access_to_the_device() -> None:
    device = FakeDevice(attributes={DRIVER: {"a": 1, "b": 2}, "nic.example.com": {"c": 3}})
    assert evaluate("device.attributes.exists(d, d == 'nic.example.com')", device)
    assert evaluate(f"device.attributes['{DRIVER}'].all(k, device.attributes['{DRIVER}'][k] > 0)", device)
    assert evaluate("cel.bind(dom, 'nic.' + 'example.com', device.attributes[dom].c == 3)", device)
    assert evaluate("device.attributes.size() == 2", device)


@pytest.mark.parametrize("expression", [
    f'device.driver == "{DRIVER}"',
    "true",
    f"device.attributes['{DRIVER}'].all(k, device.attributes['{DRIVER}'][k] != 0)",
])
def test_any_unusable_attribute_fails_every_selector(expression: str) -> None:
    # Kubernetes converts all attributes before evaluating: the selector need not read the bad one.
    with pytest.raises(CelRuntimeError, match=r"^attribute links: unsupported attribute value$"):
        evaluate(expression, gpu(links=(1, 2)))
    with pytest.raises(CelRuntimeError, match=r"^attribute nic\.example\.com/empty: unsupported attribute value$"):
        evaluate(expression, FakeDevice(attributes={"nic.example.com": {"empty": None}}))
    with pytest.raises(CelRuntimeError, match=r"^attribute links: unsupported attribute value$"):
        evaluate(expression, gpu(links=(1, None)), list_attributes=True)
    assert evaluate(expression, gpu(links=(1, 2)), list_attributes=True)


def test_comprehension_variable_may_shadow_device() -> None:
    assert evaluate("[1, 2].all(device, device > 0)", gpu())


def test_version_compare_of_mixed_attribute_kinds_is_an_error() -> None:
    device = gpu(driverVersion=parse_semver("2.0.0"))
    with pytest.raises(CelRuntimeError, match="no such overload"):
        evaluate(f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(quantity("1"))', device)
