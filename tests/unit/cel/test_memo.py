"""Memoisation of selector results by the device values an expression reads."""

from __future__ import annotations

import pytest

from admission.core.cel import CelRuntimeError, compile_selector
from admission.core.cel import selector as selector_module
from admission.core.quantity import parse_quantity
from admission.core.semver import parse_semver

from .conftest import DRIVER, gpu

MODEL = f'device.attributes["{DRIVER}"].model == "H100"'


def test_constant_paths_are_memoised_and_dynamic_access_is_not() -> None:
    assert compile_selector(MODEL).memoised
    assert compile_selector(f'device.driver == "{DRIVER}"').memoised
    assert compile_selector(f'has(device.attributes["{DRIVER}"].model)').memoised
    assert not compile_selector("device.attributes.exists(d, d == 'x')").memoised
    assert not compile_selector("cel.bind(d, 'x', device.attributes[d].size() == 0)").memoised
    assert not compile_selector(MODEL).without_memo().memoised


def test_memoised_results_equal_fresh_results() -> None:
    program = compile_selector(MODEL + f' && device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("40Gi"))')
    fresh = program.without_memo()
    devices = [gpu("H100", "80Gi"), gpu("A100", "80Gi"), gpu("H100", "16Gi"), gpu("H100", "40Gi")] * 3
    assert [program.evaluate(d) for d in devices] == [fresh.evaluate(d) for d in devices]


def test_hits_do_not_evaluate_again(monkeypatch: pytest.MonkeyPatch) -> None:
    program = compile_selector(MODEL + " && 1 + 1 == 2")
    calls = []
    original = program._evaluate

    def counting(device: object, slots: tuple[object, ...]) -> bool:
        calls.append(slots)
        return original(device, slots)  # type: ignore[arg-type]

    monkeypatch.setattr(program, "_evaluate", counting)
    for _ in range(5):
        assert program.evaluate(gpu("H100"))
        assert not program.evaluate(gpu("A100"))
    assert len(calls) == 2


def test_errors_are_memoised_and_raised_again_identically() -> None:
    program = compile_selector(f'device.attributes["{DRIVER}"].cores > 4')
    messages = []
    for _ in range(3):
        with pytest.raises(CelRuntimeError) as raised:
            program.evaluate(gpu())
        messages.append(str(raised.value))
    assert messages == ["no such key: cores"] * 3
    assert program.evaluate(gpu(cores=8))


def test_true_and_one_are_different_memo_keys() -> None:
    program = compile_selector(f'device.attributes["{DRIVER}"].flag == true')
    assert program.evaluate(gpu(flag=True))
    assert not program.evaluate(gpu(flag=1))
    assert program.evaluate(gpu(flag=True))
    lists = compile_selector(f'device.attributes["{DRIVER}"].l.includes(true)', list_attributes=True)
    assert lists.evaluate(gpu(l=(True,)))
    assert not lists.evaluate(gpu(l=(1,)))


def test_missing_and_present_values_are_different_memo_keys() -> None:
    program = compile_selector(f'has(device.attributes["{DRIVER}"].x)')
    assert not program.evaluate(gpu())
    assert program.evaluate(gpu(x="anything"))


def test_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selector_module, "MEMO_SIZE", 8)
    program = compile_selector(f'device.attributes["{DRIVER}"].index >= 0 && 2 > 1')
    for i in range(50):
        assert program.evaluate(gpu(index=i))
    assert program._cache is not None
    assert len(program._cache) <= 8


def test_quantities_and_versions_are_keyed_by_value() -> None:
    memory = compile_selector(f'device.capacity["{DRIVER}"].memory.compareTo(quantity("1Gi")) == 0')
    assert memory.evaluate(gpu(memory="1Gi"))
    assert memory.evaluate(gpu(memory="1024Mi"))
    assert not memory.evaluate(gpu(memory="1025Mi"))
    assert memory._cache is not None
    assert len(memory._cache) == 2
    assert parse_quantity("1Gi") == parse_quantity("1024Mi")

    version = compile_selector(f'device.attributes["{DRIVER}"].v.isLessThan(semver("1.0.0"))')
    assert version.evaluate(gpu(v=parse_semver("1.0.0-rc.1")))
    assert not version.evaluate(gpu(v=parse_semver("1.0.0")))
    assert not version.evaluate(gpu(v=parse_semver("1.0.0+build.7")))
