"""Charging a gang with the real allocator's plan, as the admission cycle does: exact where the worst case
was an upper bound."""

from admission.core.allocator import Allocator, Snapshot, members_for, place_gang
from admission.core.cycle import charging_inventory
from admission.core.features import gates_for
from admission.core.models import parse_objects
from admission.core.quota import GroupObjects, Placement, charge_group, device_selected
from tests.support.builders import (
    CREATED,
    HOSTNAME_LABEL,
    device_class,
    exactly,
    first_available,
    gpu,
    node,
    pod,
    resource_slice,
    template,
)
from tests.unit.quota.charging_harness import NS, STANDARD_UNITS

GI = 2**30


def test_plan_from_the_allocator_makes_first_available_exact() -> None:
    big = 'device.attributes["gpu.example.com"].model == "H100"'
    small = 'device.attributes["gpu.example.com"].model == "A100"'
    request = first_available("gpu", exactly("big", count=2, selector=big), exactly("small", count=2, selector=small))
    objects = [
        *(node(n, {HOSTNAME_LABEL: n}, allocatable={"cpu": "64"}) for n in ("node-a", "node-b")),
        device_class("gpu", created=CREATED),
        resource_slice("node-a", gpu("gpu-0"), gpu("gpu-1")),
        resource_slice("node-b", *(gpu(f"gpu-{i}", "A100", "40Gi") for i in range(2))),
        template("t", request, namespace=NS), pod("p0", NS, templates={"g": "t"}), pod("p1", NS, templates={"g": "t"}),
    ]
    snapshot = Snapshot.from_models(parse_objects(objects))
    gates = gates_for("1.35")
    allocator = Allocator(snapshot, gates)
    pods = list(snapshot.pods.values())
    gang = place_gang(allocator, members_for(pods, snapshot.claims, snapshot.templates))
    assert gang.feasible, gang.reason
    group = GroupObjects(tuple(pods), snapshot.claims, snapshot.templates)
    inventory = charging_inventory(snapshot, gates)
    worst = charge_group(group, STANDARD_UNITS, inventory, device_selected)
    plan = Placement(dict(gang.placements), dict(gang.allocations))
    exact = charge_group(group, STANDARD_UNITS, inventory, device_selected, plan)
    # Worst case per pod: two H100 (2 devices, 160Gi, weight 2, 2 H100s) for each of two pods.
    assert worst.total.as_dict() == {"gpus": 4, "gpu-memory": 320 * GI, "gpu-weight": 4, "h100s": 4}
    # Real plan: one pod gets the two H100 on node-a, the other the two A100 on node-b.
    assert exact.total.as_dict() == {"gpus": 4, "gpu-memory": 240 * GI, "gpu-weight": 3, "h100s": 2}
