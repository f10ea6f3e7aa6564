"""QuotaUnit status (matching devices, total capacity in the unit's terms, Ready) and the ClusterQueue's
Active condition, as the operator writes them."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.allocator import Snapshot
from admission.core.cycle import charging_inventory
from admission.core.errors import DraqError
from admission.core.features import gates_for
from admission.core.models import Node, ResourceSlice, parse_objects
from admission.core.quota import (
    DraCel,
    cluster_queue_active,
    compile_unit,
    device_selected,
    parse_cluster_queue,
    parse_quota_unit,
    pool_counter_sets,
    quota_unit_ready,
    quota_unit_status,
)
from admission.core.quota.status import unit_problem
from tests.support.builders import (
    cluster_queue,
    device,
    device_class,
    gpu,
    node,
    quota,
    quota_unit,
    resource_slice,
)

NOW, EARLIER = "2026-02-01T10:00:00Z", "2026-01-01T00:00:00Z"
CLUSTER = [device_class("gpu"), node("n1", allocatable={"cpu": "96"}),
           node("n2", allocatable={"cpu": "32", "nvidia.com/gpu": "8"}),
           resource_slice("n1", *(gpu(f"gpu-{i}") for i in range(4)), gpu("gpu-4", model="A100", memory="40Gi"))]


def status(unit: dict[str, Any], *objects: dict[str, Any]) -> dict[str, Any]:
    models = parse_objects([*CLUSTER, *objects])
    inventory = charging_inventory(Snapshot.from_models(models), gates_for("1.36"))
    nodes = [m for m in models if isinstance(m, Node)]
    counters = pool_counter_sets(m for m in models if isinstance(m, ResourceSlice))
    compiled = compile_unit(parse_quota_unit(unit), DraCel())
    return quota_unit_status(compiled, inventory, device_selected, nodes, counters)


def test_a_device_unit_counts_devices_and_device_plugin_resources() -> None:
    unit = quota_unit("gpus", devices={"deviceClassNames": ["gpu"]}, extendedResources=[{"name": "nvidia.com/gpu"}])
    assert status(unit) == {"summary": "devices of gpu + nvidia.com/gpu", "matchingDevices": 5, "capacity": "13"}


def test_a_selector_narrows_the_devices() -> None:
    unit = quota_unit("h100s", devices={"deviceClassNames": ["gpu"], "selector": 'device.attributes["gpu.example.com"]'
                                                                                 '.model == "H100"'})
    assert status(unit)["matchingDevices"] == 4
    assert status(unit)["capacity"] == "4"


def test_a_capacity_unit_sums_whole_devices_and_weighs_plugin_resources() -> None:
    # 4 x 80Gi + 40Gi through DRA, 8 x 80Gi through the device plugin on n2.
    unit = quota_unit("gpu-memory", capacity={"deviceClassNames": ["gpu"], "name": "memory"},
                      extendedResources=[{"name": "nvidia.com/gpu", "countsAs": "80Gi"}])
    assert status(unit)["capacity"] == "1000Gi"


def test_a_shared_device_counts_its_whole_capacity_not_one_share() -> None:
    shared = device("shared-0", {"model": "H100"}, allowMultipleAllocations=True,
                    capacity={"memory": {"value": "80Gi", "requestPolicy": {"default": "10Gi"}}})
    unit = quota_unit("gpu-memory", capacity={"deviceClassNames": ["gpu"], "name": "memory"})
    assert status(unit, node("n3"), resource_slice("n3", shared))["capacity"] == "440Gi"


def test_a_counter_unit_counts_each_counter_set_once() -> None:
    # A whole GPU and two halves all draw on gpu-0's 80Gi: the capacity is 80Gi, not 160Gi.
    parts = resource_slice("n3", device("whole", consumes={"gpu-0": {"memory": "80Gi"}}),
                           device("half-0", consumes={"gpu-0": {"memory": "40Gi"}}),
                           device("half-1", consumes={"gpu-0": {"memory": "40Gi"}}),
                           counters={"gpu-0": {"memory": "80Gi"}})
    unit = quota_unit("memory", counters={"deviceClassNames": ["gpu"], "counter": "memory"})
    assert status(unit, node("n3"), parts) == {"summary": "counter memory of gpu", "matchingDevices": 3,
                                               "capacity": "80Gi"}


def test_a_weight_unit_sums_the_weights() -> None:
    unit = quota_unit("weighted", weight={"deviceClassNames": ["gpu"], "expression":
                                          'device.attributes["gpu.example.com"].model == "H100" ? 1.0 : 0.5'})
    assert status(unit)["capacity"] == "4500m"


def test_a_core_unit_sums_the_nodes_allocatable() -> None:
    assert status(quota_unit("cpu", core={"resource": "cpu"})) == {
        "summary": "pod requests of cpu", "matchingDevices": 0, "capacity": "128"}


def test_a_selector_that_fails_on_a_device_is_an_error() -> None:
    unit = quota_unit("broken", devices={"deviceClassNames": ["gpu"],
                                         "selector": 'device.attributes["gpu.example.com"].missing == 1'})
    with pytest.raises(DraqError, match="missing"):
        status(unit)


def test_ready_says_what_the_unit_covers_or_what_is_wrong() -> None:
    counting = {"matchingDevices": 5, "capacity": "13"}
    assert quota_unit_ready(None, counting, NOW) == {
        "type": "Ready", "status": "True", "reason": "Counting", "message": "counts 5 devices, capacity 13",
        "lastTransitionTime": NOW}
    assert quota_unit_ready(None, {"matchingDevices": 0, "capacity": "0"}, NOW)["reason"] == "NothingToCount"
    broken = quota_unit_ready("field spec.devices.selector: does not compile", None, NOW)
    assert (broken["status"], broken["reason"], broken["message"]) == (
        "False", "Invalid", "field spec.devices.selector: does not compile")


def test_the_transition_time_stays_while_the_status_does() -> None:
    before = [{"type": "Ready", "status": "True", "lastTransitionTime": EARLIER}]
    assert quota_unit_ready(None, {"matchingDevices": 1, "capacity": "1"}, NOW, before)["lastTransitionTime"] == EARLIER
    assert quota_unit_ready("broken", None, NOW, before)["lastTransitionTime"] == NOW


def test_a_cluster_queue_is_active_unless_a_unit_is_missing_or_invalid_or_usage_unknown() -> None:
    queue = parse_cluster_queue(cluster_queue("cq", quota("gpus", 8), quota("memory", "640Gi")))
    assert cluster_queue_active(queue, {"gpus", "memory"}, {}, True, NOW)["reason"] == "Ready"
    missing = cluster_queue_active(queue, {"gpus"}, {}, True, NOW)
    assert (missing["status"], missing["reason"]) == ("False", "QuotaUnitMissing")
    assert missing["message"].startswith("admits nothing new: QuotaUnit memory does not exist")
    invalid = cluster_queue_active(queue, {"gpus"}, {"memory": "does not compile"}, True, NOW)
    assert (invalid["reason"], invalid["message"]) == ("QuotaUnitInvalid",
                                                       "admits nothing new: QuotaUnit memory (does not compile)")
    assert cluster_queue_active(queue, {"gpus", "memory"}, {}, False, NOW)["reason"] == "UsageUnknown"


def problem(unit: dict[str, Any], *objects: dict[str, Any]) -> str:
    models = parse_objects([*CLUSTER, *objects])
    inventory = charging_inventory(Snapshot.from_models(models), gates_for("1.36"))
    return unit_problem(compile_unit(parse_quota_unit(unit), DraCel()), inventory, device_selected)


def test_a_unit_that_fails_on_a_device_names_the_unit_the_device_and_the_cel_error() -> None:
    weighted = quota_unit("weighted", weight={"deviceClassNames": ["gpu"],
                                              "expression": 'device.attributes["gpu.example.com"].missing * 2'})
    assert problem(weighted) == ("QuotaUnit weighted: expression fails on device gpu.example.com/n1/gpu-0: "
                                 "no such key: missing")
    selected = quota_unit("h100s", devices={"deviceClassNames": ["gpu"],
                                            "selector": 'device.attributes["gpu.example.com"].missing == 1'})
    assert problem(selected).startswith("QuotaUnit h100s: selector fails on device gpu.example.com/n1/gpu-0: ")
    memory = quota_unit("memory", capacity={"deviceClassNames": ["gpu"], "name": "bandwidth"})
    assert problem(memory) == ("QuotaUnit memory: device gpu.example.com/n1/gpu-0 has no capacity "
                               "gpu.example.com/bandwidth")


def test_a_unit_that_works_on_every_device_has_no_problem() -> None:
    weighted = quota_unit("weighted", weight={"deviceClassNames": ["gpu"], "expression":
                                              'device.attributes["gpu.example.com"].model == "H100" ? 1.0 : 0.5'})
    assert problem(weighted) == ""
    assert problem(quota_unit("gpus", devices={"deviceClassNames": ["gpu"]})) == ""


def test_a_device_class_whose_selector_fails_is_not_the_units_fault() -> None:
    failing = device_class("bad", expression='device.attributes["gpu.example.com"].missing == 1')
    unit = quota_unit("weighted", weight={"deviceClassNames": ["bad"], "expression": "1"})
    assert problem(unit, failing) == ""  # the groups that use the class wait with its error
    assert status(unit, failing)["matchingDevices"] == 0
