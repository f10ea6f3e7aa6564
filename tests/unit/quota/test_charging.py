"""Every claim shape, charged in every kind of unit, with numbers checkable by hand.

Inventory: node-a has four H100 (80Gi each), node-b two A100 (40Gi each). Units: gpus (devices),
gpu-memory (capacity), gpu-weight (H100 1, others 0.5), h100s (devices selected by model), cpu.
"""

from fractions import Fraction
from typing import Any

import pytest

from admission.core.models import parse_object
from admission.core.quota.amounts import Amounts
from admission.core.quota.charging import Placement
from admission.core.quota.problems import Unchargeable
from tests.support.builders import (
    CREATED,
    claim,
    device,
    device_class,
    exactly,
    first_available,
    gpu,
    node,
    pod,
    resource_slice,
    result,
    template,
)
from tests.unit.quota.charging_harness import NS, charge, unit

GI = 2**30
CLUSTER: list[dict[str, Any]] = [
    device_class("gpu", created=CREATED),
    resource_slice("node-a", *(gpu(f"gpu-{i}") for i in range(4))),
    resource_slice("node-b", *(gpu(f"gpu-{i}", "A100", "40Gi") for i in range(2))),
]


def amounts(**values: int | Fraction) -> Amounts:
    return Amounts.of({k.replace("_", "-"): v for k, v in values.items()})


def test_template_claims_are_charged_per_pod() -> None:
    objects = [*CLUSTER, template("two-gpus", exactly("gpu", count=2), namespace=NS),
               pod("p0", NS, templates={"g": "two-gpus"}, requests={"cpu": "500m"}),
               pod("p1", NS, templates={"g": "two-gpus"}, requests={"cpu": "500m"})]
    # Worst case per pod: two H100 = 2 devices, 160Gi, weight 2, 2 H100s.
    assert charge(objects).total == amounts(gpus=4, gpu_memory=320 * GI, gpu_weight=4, h100s=4, cpu=1)


def test_a_claim_shared_by_several_pods_is_charged_once() -> None:
    objects = [*CLUSTER, claim("shared", exactly("gpu"), namespace=NS),
               pod("p0", NS, claims={"g": "shared"}), pod("p1", NS, claims={"g": "shared"})]
    assert charge(objects).total == amounts(gpus=1, gpu_memory=80 * GI, gpu_weight=1, h100s=1)


def test_direct_claim_with_allocation_is_charged_by_its_devices() -> None:
    objects = [*CLUSTER, claim("c", exactly("gpu", count=2), namespace=NS,
                               allocation=[result("gpu", "gpu-0", "node-b"), result("gpu", "gpu-1", "node-b")]),
               pod("p0", NS, claims={"g": "c"})]
    # Two A100: 2 devices, 80Gi, weight 0.5 + 0.5, no H100.
    assert charge(objects).total == amounts(gpus=2, gpu_memory=80 * GI, gpu_weight=1)


def test_first_available_is_charged_by_the_worst_subrequest_while_unknown() -> None:
    request = first_available("gpu", exactly("big", count=1, selector='model == "H100"'),
                              exactly("small", count=2, selector='model == "A100"'))
    objects = [*CLUSTER, claim("c", request, namespace=NS), pod("p0", NS, claims={"g": "c"})]
    # big: 1 device, 80Gi, weight 1, 1 H100; small: 2 devices, 80Gi, weight 1, 0 H100.
    assert charge(objects).total == amounts(gpus=2, gpu_memory=80 * GI, gpu_weight=1, h100s=1)


def test_first_available_is_charged_by_the_chosen_subrequest() -> None:
    request = first_available("gpu", exactly("big", count=1, selector='model == "H100"'),
                              exactly("small", count=2, selector='model == "A100"'))
    objects = [*CLUSTER, claim("c", request, namespace=NS), pod("p0", NS, claims={"g": "c"})]
    plan = Placement({"ns/p0": "node-b"}, {"ns/c": parse_object(claim("x", namespace=NS, allocation=[
        result("gpu/small", "gpu-0", "node-b"), result("gpu/small", "gpu-1", "node-b")])).allocation})
    assert charge(objects, placement=plan).total == amounts(gpus=2, gpu_memory=80 * GI, gpu_weight=1)


def test_all_mode_is_charged_by_the_biggest_node_while_unknown_and_by_the_planned_node() -> None:
    objects = [*CLUSTER, claim("c", exactly("gpu", allocationMode="All"), namespace=NS),
               pod("p0", NS, claims={"g": "c"})]
    assert charge(objects).total == amounts(gpus=4, gpu_memory=320 * GI, gpu_weight=4, h100s=4)
    planned = charge(objects, placement=Placement({"ns/p0": "node-b"}))
    assert planned.total == amounts(gpus=2, gpu_memory=80 * GI, gpu_weight=1)


def test_all_mode_with_no_matching_device_anywhere_is_refused() -> None:
    objects = [*CLUSTER, claim("c", exactly("gpu", allocationMode="All", selector='model == "A100"'), namespace=NS),
               pod("p0", NS, claims={"g": "c"})]
    with pytest.raises(Unchargeable, match="allocationMode All matches no device of class gpu on node node-a"):
        charge(objects, placement=Placement({"ns/p0": "node-a"}))


def test_admin_access_is_not_charged() -> None:
    objects = [*CLUSTER, claim("c", exactly("gpu", count=3, adminAccess=True), namespace=NS),
               pod("p0", NS, claims={"g": "c"})]
    assert charge(objects).total == Amounts()
    allocated = [*CLUSTER, claim("c", exactly("gpu", adminAccess=True), namespace=NS,
                                 allocation=[result("gpu", "gpu-0", "node-a", adminAccess=True)]),
                 pod("p0", NS, claims={"g": "c"})]
    outcome = charge(allocated)
    assert outcome.total == Amounts()
    assert "admin access is not charged" in outcome.explain()


SHARED_GPU = device("gpu-0", {"model": "H100"}, capacity={"memory": {"value": "80Gi", "requestPolicy": {
    "default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}}}, allowMultipleAllocations=True)


@pytest.mark.parametrize(("capacity", "expected"), [("25Gi", 30 * GI), ("10Gi", 10 * GI), (None, 10 * GI),
                                                    ("5Gi", 10 * GI)])
def test_consumable_capacity_is_charged_by_the_rounded_share(capacity: str | None, expected: int) -> None:
    extra = {"capacity": {"requests": {"gpu.example.com/memory": capacity}}} if capacity else {}
    objects = [device_class("gpu", created=CREATED), resource_slice("node-a", SHARED_GPU),
               claim("c", exactly("gpu", **extra), namespace=NS), pod("p0", NS, claims={"g": "c"})]
    assert charge(objects).total.get("gpu-memory") == expected
    # A device unit counts the share as one device.
    assert charge(objects).total.get("gpus") == 1


def test_consumable_capacity_allocation_is_charged_by_the_consumed_capacity() -> None:
    objects = [device_class("gpu", created=CREATED), resource_slice("node-a", SHARED_GPU),
               claim("c", exactly("gpu"), namespace=NS, allocation=[
                   result("gpu", "gpu-0", "node-a", shareID="s1", consumedCapacity={"memory": "30Gi"})]),
               pod("p0", NS, claims={"g": "c"})]
    assert charge(objects).total.get("gpu-memory") == 30 * GI


def test_a_dedicated_device_is_charged_whole_even_with_a_capacity_request() -> None:
    objects = [*CLUSTER, claim("c", exactly("gpu", capacity={"requests": {"memory": "10Gi"}}), namespace=NS),
               pod("p0", NS, claims={"g": "c"}, node="node-b")]
    assert charge(objects).total.get("gpu-memory") == 40 * GI


def test_partitions_are_charged_by_their_counters() -> None:
    partitions = [gpu(f"gpu-0-part-{i}", consumes={"gpu-0": {"memory": f"{20 * (i + 1)}Gi"}}) for i in range(2)]
    counters = unit("partition-memory", {"counters": {"deviceClassNames": ["gpu"], "counter": "memory"}})
    objects = [device_class("gpu", created=CREATED), resource_slice("node-a", *partitions),
               claim("c", exactly("gpu"), namespace=NS, allocation=[result("gpu", "gpu-0-part-1", "node-a")]),
               claim("d", exactly("gpu"), namespace=NS), pod("p0", NS, claims={"a": "c", "b": "d"})]
    # c holds the 40Gi partition; d could get either, worst case 40Gi.
    assert charge(objects, units=(counters,)).total == Amounts.of({"partition-memory": 80 * GI})


def test_counter_unit_refuses_devices_without_the_counter() -> None:
    counters = unit("partition-memory", {"counters": {"deviceClassNames": ["gpu"], "counter": "memory"}})
    objects = [*CLUSTER, claim("c", exactly("gpu"), namespace=NS), pod("p0", NS, claims={"a": "c"})]
    with pytest.raises(Unchargeable, match="consumes no counter memory") as err:
        charge(objects, units=(counters,))
    assert err.value.permanent


def test_dra_extended_resource_charges_like_devices_of_its_class() -> None:
    objects = [device_class("gpu", extended_resource="nvidia.com/gpu", created=CREATED), *CLUSTER[1:],
               pod("p0", NS, requests={"nvidia.com/gpu": "2"})]
    # Node unknown: DRA (2 H100: 160Gi) or device plugin (2 x 24Gi): the worse counts.
    assert charge(objects).total == amounts(gpus=2, gpu_memory=160 * GI, gpu_weight=2, h100s=2)
    # Placed on node-b, where no device plugin serves it: two A100.
    on_b = charge(objects, placement=Placement({"ns/p0": "node-b"}))
    assert on_b.total == amounts(gpus=2, gpu_memory=80 * GI, gpu_weight=1)


def test_extended_resource_on_a_device_plugin_node_is_charged_by_counts_as() -> None:
    plugin_node = node("node-c", allocatable={"nvidia.com/gpu": "8", "cpu": "64"})
    objects = [device_class("gpu", extended_resource="nvidia.com/gpu", created=CREATED), *CLUSTER[1:], plugin_node,
               pod("p0", NS, requests={"nvidia.com/gpu": "2"}, node="node-c")]
    assert charge(objects).total == amounts(gpus=2, gpu_memory=48 * GI)


def test_implicit_extended_resource_name_maps_to_the_class() -> None:
    objects = [*CLUSTER, pod("p0", NS, requests={"deviceclass.resource.kubernetes.io/gpu": "1"}, node="node-b")]
    assert charge(objects).total == amounts(gpus=1, gpu_memory=40 * GI, gpu_weight=Fraction(1, 2))


def test_core_units_count_pod_requests_with_init_containers() -> None:
    objects = [pod("p0", NS, requests={"cpu": "1"}, init_requests={"cpu": "2"}),
               pod("p1", NS, requests={"cpu": "250m"})]
    assert charge(objects).total == amounts(cpu=Fraction(9, 4))


def test_unknown_allocation_mode_is_never_free() -> None:
    objects = [*CLUSTER, claim("c", exactly("gpu", allocationMode="Some"), namespace=NS),
               pod("p0", NS, claims={"g": "c"})]
    with pytest.raises(Unchargeable, match="allocationMode Some is not understood") as err:
        charge(objects)
    assert err.value.permanent


def test_missing_objects_are_transient_problems() -> None:
    with pytest.raises(Unchargeable, match="DeviceClass gpu does not exist") as err:
        charge([*CLUSTER[1:], claim("c", exactly("gpu"), namespace=NS), pod("p0", NS, claims={"g": "c"})])
    assert not err.value.permanent
    with pytest.raises(Unchargeable, match="ResourceClaim ns/nope, which does not exist"):
        charge([*CLUSTER, pod("p0", NS, claims={"g": "nope"})])
    with pytest.raises(Unchargeable, match="ResourceClaimTemplate ns/nope, which does not exist"):
        charge([*CLUSTER, pod("p0", NS, templates={"g": "nope"})])


def test_claim_of_a_class_no_unit_counts_is_free_and_says_so() -> None:
    objects = [*CLUSTER, device_class("nic", "nic.example.com", created=CREATED),
               claim("c", exactly("nic", "nic"), namespace=NS), pod("p0", NS, claims={"g": "c"})]
    outcome = charge(objects)
    assert outcome.total == Amounts()
    assert "no quota unit counts devices of class nic" in outcome.explain()


def test_claim_held_by_pods_outside_the_group_is_charged_where_it_was_admitted() -> None:
    objects = [*CLUSTER, claim("c", exactly("gpu"), namespace=NS, allocation=[result("gpu", "gpu-0", "node-a")],
                               reserved_for=("other",)), pod("p0", NS, claims={"g": "c"})]
    outcome = charge(objects)
    assert outcome.total == Amounts()
    assert "outside the group" in outcome.explain()


def test_template_claim_planned_before_it_exists() -> None:
    objects = [*CLUSTER, template("t", exactly("gpu", count=2), namespace=NS), pod("p0", NS, templates={"g": "t"})]
    pod_model = parse_object(objects[-1])
    allocation = parse_object(claim("x", namespace=NS, allocation=[result("gpu", "gpu-0", "node-b"),
                                                                   result("gpu", "gpu-1", "node-b")])).allocation
    plan = Placement({"ns/p0": "node-b"}, {pod_model.pending_claim_key("g"): allocation})  # type: ignore[arg-type]
    assert charge(objects, placement=plan).total == amounts(gpus=2, gpu_memory=80 * GI, gpu_weight=1)


def test_weight_expression_must_not_be_negative() -> None:
    negative = unit("w", {"weight": {"deviceClassNames": ["gpu"], "expression": "-1"}})
    with pytest.raises(Unchargeable, match="must not be negative"):
        charge([*CLUSTER, claim("c", exactly("gpu"), namespace=NS), pod("p0", NS, claims={"g": "c"})],
               units=(negative,))


def test_allocated_only_lists_claims_without_allocation() -> None:
    objects = [*CLUSTER, claim("c", exactly("gpu"), namespace=NS),
               claim("d", exactly("gpu"), namespace=NS, allocation=[result("gpu", "gpu-1", "node-a")]),
               pod("p0", NS, claims={"a": "c", "b": "d"})]
    outcome = charge(objects, allocated_only=True)
    assert outcome.unallocated == ("ResourceClaim ns/c",)
    assert outcome.total.get("gpus") == 1


def test_each_pod_is_charged_its_own_extended_resource_count() -> None:
    objects = [device_class("gpu", extended_resource="nvidia.com/gpu", created=CREATED), *CLUSTER[1:],
               *(pod(f"p{i}", NS, requests={"nvidia.com/gpu": str(i + 1)}, node="node-a") for i in range(4))]
    assert charge(objects).total.get("gpus") == 1 + 2 + 3 + 4


def test_quota_unit_status_counts_the_devices_it_covers() -> None:
    from admission.core.models import DeviceClass, ResourceSlice, parse_objects
    from admission.core.quota import Inventory, quota_unit_status
    from tests.unit.quota.charging_harness import STANDARD_UNITS, matches

    models = parse_objects(CLUSTER)
    inventory = Inventory.of([m for m in models if isinstance(m, DeviceClass)],
                             {m.node_name or "": m.devices for m in models if isinstance(m, ResourceSlice)})
    by_name = {u.name: quota_unit_status(u, inventory, matches) for u in STANDARD_UNITS}
    assert by_name["gpus"] == {"summary": "devices of gpu + nvidia.com/gpu", "matchingDevices": 6, "capacity": "6"}
    assert by_name["h100s"]["matchingDevices"] == 4
    assert by_name["cpu"] == {"summary": "pod requests of cpu", "matchingDevices": 0, "capacity": "0"}


def test_the_schedulers_extended_resource_claim_is_charged_by_its_allocation() -> None:
    made = claim("p0-extended-resources-x", exactly("container-0-request-0", count=1), namespace=NS,
                 allocation=[result("container-0-request-0", "gpu-1", "node-b")], reserved_for=("p0",),
                 annotations={"resource.kubernetes.io/extended-resource-claim": "true"})
    objects = [device_class("gpu", extended_resource="nvidia.com/gpu", created=CREATED), *CLUSTER[1:], made,
               pod("p0", NS, requests={"nvidia.com/gpu": "1"}, node="node-b")]
    outcome = charge(objects)
    assert outcome.total == amounts(gpus=1, gpu_memory=40 * GI, gpu_weight=Fraction(1, 2))
    assert "extended resources of pod ns/p0" in outcome.explain()
