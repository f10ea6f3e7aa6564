"""DeviceTaintRules: their taint lands on the devices they select, as if the driver had written it; with
DRADeviceTaints on, the allocator then avoids those devices unless a request tolerates the taint."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.allocator import Allocator, Snapshot
from admission.core.errors import InvalidInput
from admission.core.features import exactly as gates
from admission.core.models import parse_object
from admission.core.models.device_taint_rule import DeviceTaintRule, apply_taint_rules
from tests.support.builders import DRIVER, claim, device_class, exactly, gpu, models, node, resource_slice

TAINT = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}


def rule(name: str, **selector: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": TAINT}}


def snapshot(*extra: dict[str, Any]) -> Snapshot:
    return Snapshot.from_models(models(node("n1"), device_class("gpu"),
                                       resource_slice("n1", gpu("gpu-0"), gpu("gpu-1")), *extra))


def test_a_rule_taints_only_the_devices_its_selector_names() -> None:
    pools = snapshot(rule("r", driver=DRIVER, device="gpu-1")).inventory.slices_by_pool.values()
    taints = {d.name: [t.key for t in d.taints] for slices in pools for s in slices for d in s.devices}
    assert taints == {"gpu-0": [], "gpu-1": ["maintenance"]}


def test_an_empty_selector_matches_every_device_and_no_selector_none() -> None:
    [every] = [parse_object(rule("all"))]
    none = parse_object({**rule("none"), "spec": {"taint": TAINT}})
    assert isinstance(every, DeviceTaintRule) and isinstance(none, DeviceTaintRule)
    slices = [m for m in models(resource_slice("n1", gpu("gpu-0"))) if hasattr(m, "devices")]
    assert [len(d.taints) for s in apply_taint_rules(slices, [every]) for d in s.devices] == [1]  # type: ignore[attr-defined]
    assert [len(d.taints) for s in apply_taint_rules(slices, [none]) for d in s.devices] == [0]  # type: ignore[attr-defined]


def test_selectors_of_the_134_alpha_are_refused_with_the_field() -> None:
    with pytest.raises(InvalidInput, match="deviceClassName"):
        parse_object(rule("old", deviceClassName="gpu"))


def test_with_device_taints_on_the_allocator_avoids_a_tainted_device_unless_tolerated() -> None:
    taint_gates = gates("1.35", ["DRADeviceTaints"])
    tainted = snapshot(rule("r", device="gpu-0"))
    two = claim("two", exactly("gpu", count=2))
    one = claim("one", exactly("gpu", count=1))
    assert not Allocator(tainted, taint_gates).allocate("n1", models(two)).allocatable  # type: ignore[arg-type]
    picked = Allocator(tainted, taint_gates).allocate("n1", models(one))  # type: ignore[arg-type]
    assert [r.device for r in picked.allocations["default/one"].results] == ["gpu-1"]
    tolerant = claim("t", exactly("gpu", count=2, tolerations=[{"key": "maintenance", "operator": "Exists"}]))
    assert Allocator(tainted, taint_gates).allocate("n1", models(tolerant)).allocatable  # type: ignore[arg-type]
    untainted_gates = gates("1.35", [])
    assert Allocator(tainted, untainted_gates).allocate("n1", models(two)).allocatable  # type: ignore[arg-type]
