"""DRADerivedAttributes (1.37 alpha): requests compute attributes for their constraints with CEL.

The scheduler's answers for these shapes are pinned by the conformance cases `derived-attributes-*`
(tests/cases/allocator); these tests cover the parsing, the bad input and what the cases leave out.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from admission.core.allocator import Status
from admission.core.cel import CelCompileError, CelRuntimeError, compile_derived
from admission.core.errors import InvalidInput
from admission.core.features import exactly as gates_exactly
from admission.core.models import DerivedAttribute
from admission.core.semver import parse_semver
from tests.support.builders import DRIVER, claim, device_class, exactly, model, node
from tests.unit.allocator.builders import allocator, devices_of, gpus

ON = gates_exactly("1.37", ["DRADerivedAttributes"])
HALF = {"name": "derived/half", "expression": f'device.attributes["{DRIVER}"].index / 2'}


def _distinct_claim(count: int, *derived: dict[str, str], attribute: str = "derived/half") -> dict[str, Any]:
    return claim("c", exactly("gpu", count=count, allocationMode="ExactCount", derivedAttributes=list(derived)),
                 constraints=[{"requests": ["gpu"], "distinctAttribute": attribute}])


def test_a_request_keeps_its_derived_attributes_in_order() -> None:
    manifest = _distinct_claim(2, HALF, {"name": "example.com/x", "expression": "1"})
    manifest["spec"]["devices"]["constraints"].append({"matchAttribute": "example.com/x"})  # for every request
    parsed = model(manifest)
    selection = parsed.spec.requests[0].exactly
    assert selection.derived_attributes == (DerivedAttribute("derived/half", HALF["expression"]),
                                            DerivedAttribute("example.com/x", "1"))


@pytest.mark.parametrize(("entry", "field", "reason"), [
    ({"expression": "1"}, "derivedAttributes[0].name", "is required"),
    ({"name": "numa", "expression": "1"}, "derivedAttributes[0].name", "not a fully qualified attribute name"),
    ({"name": "Derived/numa", "expression": "1"}, "derivedAttributes[0].name", "DNS subdomain"),
    ({"name": "derived/numa"}, "derivedAttributes[0].expression", "is required"),
    ({"name": "derived/numa", "expression": "x" * 10241}, "derivedAttributes[0].expression", "at most 10240"),
])
def test_bad_derived_attributes_name_the_claim_and_field(entry: dict[str, str], field: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        model(_distinct_claim(1, entry, attribute=entry.get("name", "derived/numa")))
    assert raised.value.obj == "ResourceClaim default/c"
    assert raised.value.field.endswith(f"requests[0].exactly.{field}")
    assert reason in str(raised.value)


def test_a_duplicate_or_unused_derived_attribute_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"derivedAttributes\[1\]\.name.*duplicate derived attribute derived/half"):
        model(_distinct_claim(1, HALF, HALF))
    with pytest.raises(InvalidInput, match=r"requests\[0\]\.exactly\.derivedAttributes\[0\]\.name.*not used by any "
                                           r"matchAttribute or distinctAttribute constraint for this request"):
        model(_distinct_claim(1, HALF, attribute="derived/other"))
    with pytest.raises(InvalidInput, match="at most 32 derived attributes"):
        model(_distinct_claim(1, *({"name": f"derived/a{i}", "expression": "1"} for i in range(33))))


def test_a_constraint_on_the_parent_request_counts_for_a_subrequest() -> None:
    request = {"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu", "derivedAttributes": [HALF]}]}
    parsed = model(claim("c", request, constraints=[{"requests": ["gpu"], "matchAttribute": "derived/half"}]))
    assert parsed.spec.requests[0].first_available[0].derived_attributes[0].name == "derived/half"


def _objects(*claims: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    return (node("n1"), device_class(), gpus("n1", 4), *claims)


def test_the_derived_value_decides_the_constraint() -> None:
    # index / 2 pairs gpu-0 with gpu-1 and gpu-2 with gpu-3: two distinct values at most.
    alloc = allocator(*_objects(_distinct_claim(2, HALF)), gates=ON)
    outcome = alloc.allocate("n1", [alloc.snapshot.claims["default/c"]])
    assert devices_of(outcome, "default/c") == {"gpu": [f"{DRIVER}/n1/gpu-0", f"{DRIVER}/n1/gpu-2"]}
    alloc = allocator(*_objects(_distinct_claim(3, HALF)), gates=ON)
    assert alloc.allocate("n1", [alloc.snapshot.claims["default/c"]]).status is Status.UNFIT


def test_the_gate_off_refuses_on_1_37_and_earlier_releases_ignore_the_field() -> None:
    for gates, status in ((gates_exactly("1.37", []), Status.ERROR), (gates_exactly("1.36", ["DRAConsumableCapacity"]),
                                                                       Status.UNFIT)):
        alloc = allocator(*_objects(_distinct_claim(1, HALF)), gates=gates)
        outcome = alloc.allocate("n1", [alloc.snapshot.claims["default/c"]])
        assert outcome.status is status, (gates, outcome.message)
    assert "cannot handle request with derived attributes, the feature is disabled" in (
        allocator(*_objects(_distinct_claim(1, HALF)), gates=gates_exactly("1.37", []))
        .allocate("n1", [model(_distinct_claim(1, HALF))]).message or "")


class _Device:
    driver = "d"
    attributes: ClassVar[dict[str, dict[str, Any]]] = {
        "d": {"numa": 3, "version": parse_semver("1.2.3"), "name": "a-b"}}
    capacity: ClassVar[dict[str, Any]] = {}
    allow_multiple_allocations = False


@pytest.mark.parametrize(("expression", "value"), [
    ('device.attributes["d"].numa', 3),
    ('device.attributes["d"].version', parse_semver("1.2.3")),
    ('device.attributes["d"].name.startsWith("a")', True),
    ('[device.attributes["d"].numa, 4]', (3, 4)),
    ("dyn([])", ()),
])
def test_derived_values_are_scalars_or_lists_of_one_kind(expression: str, value: object) -> None:
    assert compile_derived(expression).value(_Device()) == value


@pytest.mark.parametrize(("expression", "error", "message"), [
    ("1.5", CelCompileError, "not double"),
    ('{"a": 1}', CelCompileError, r"not map\(string, int\)"),
    ("dyn(1.5)", CelRuntimeError, "unsupported CEL return type: float64"),
    ('dyn([1, "a"])', CelRuntimeError, "expected list element at index 1 to be int64, got string"),
    ('device.attributes["d"].missing', CelRuntimeError, "no such key: missing"),
])
def test_other_results_are_errors(expression: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        compile_derived(expression).value(_Device())
