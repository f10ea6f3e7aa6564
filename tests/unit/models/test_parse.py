"""Parsing manifests into models: qualified names, typed values, and errors that name object and field."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from admission.core.errors import InvalidInput
from admission.core.models import (
    ALL,
    Device,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    parse_object,
    parse_objects,
)
from admission.core.quantity import parse_quantity
from admission.core.semver import parse_semver
from tests.support.builders import DRIVER, exactly, model, pod, resource_slice, template


def slice_manifest(devices: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return resource_slice("node-1", *devices, name="gpu-node-1", generation=3, **spec)


def parsed_slice(devices: list[dict[str, Any]], **spec: Any) -> ResourceSlice:
    model = parse_object(slice_manifest(devices, **spec))
    assert isinstance(model, ResourceSlice)
    return model


def test_attributes_without_domain_belong_to_the_driver() -> None:
    (gpu,) = parsed_slice([{"name": "gpu-0", "attributes": {
        "model": {"string": "H100"}, "example.org/rack": {"int": 7},
        "driverVersion": {"version": "1.2.3"}, "ready": {"bool": True},
    }, "capacity": {"memory": {"value": "80Gi"}}}]).devices
    assert isinstance(gpu, Device)
    assert gpu.attributes[DRIVER] == {"model": "H100", "driverVersion": parse_semver("1.2.3"), "ready": True}
    assert gpu.attributes["example.org"] == {"rack": 7}
    assert gpu.capacity == {DRIVER: {"memory": parse_quantity("80Gi")}}
    assert gpu.attribute(f"{DRIVER}/model") == "H100"
    assert gpu.id == f"{DRIVER}/node-1/gpu-0"


def test_list_attributes_are_tuples_and_valueless_attributes_are_remembered() -> None:
    (gpu,) = parsed_slice([{"name": "gpu-0", "attributes": {"links": {"ints": [1, 2]}, "empty": {}}}]).devices
    assert gpu.attributes[DRIVER]["links"] == (1, 2)
    assert gpu.valueless_attributes == ("empty",)


def test_slice_fields_and_advanced_device_fields() -> None:
    item = parsed_slice([{
        "name": "part-0", "consumesCounters": [{"counterSet": "gpu-0", "counters": {"mem": {"value": "10Gi"}}}],
        "taints": [{"key": "k", "effect": "NoSchedule"}], "bindsToNode": True,
        "bindingConditions": ["Ready"], "allowMultipleAllocations": True,
        "capacity": {"memory": {"value": "8", "requestPolicy": {"default": "1",
                                                                 "validRange": {"min": "1", "step": "1"}}}},
    }], sharedCounters=[{"name": "gpu-0", "counters": {"mem": {"value": "80Gi"}}}])
    assert (item.pool_name, item.pool_generation, item.resource_slice_count) == ("node-1", 3, 1)
    assert item.shared_counters[0].counters["mem"] == parse_quantity("80Gi")
    part = item.devices[0]
    assert part.consumes_counters[0].counters["mem"] == parse_quantity("10Gi")
    assert part.taints[0].effect == "NoSchedule" and part.binds_to_node and part.allow_multiple_allocations
    policy = part.capacities["memory"].request_policy
    assert policy is not None and policy.valid_range is not None and policy.default == parse_quantity("1")


@pytest.mark.parametrize(("devices", "field", "reason"), [
    ([{"name": "gpu-3"}, {"name": "gpu-3"}], "spec.devices[1].name", "duplicate device name gpu-3"),
    ([{"name": "gpu-0", "attributes": {"model": {"int": "x"}}}], "spec.devices[0].attributes.model.int",
     "expected an integer"),
    ([{"name": "gpu-0", "attributes": {"m": {"int": 1, "string": "x"}}}], "spec.devices[0].attributes.m.string",
     "exactly one value"),
    ([{"name": "gpu-0", "attributes": {"v": {"version": "one"}}}], "spec.devices[0].attributes.v.version",
     "not a semantic version"),
    ([{"name": "gpu-0", "capacity": {"memory": {"value": "lots"}}}], "spec.devices[0].capacity.memory.value",
     "is not a quantity"),
    ([{}], "spec.devices[0].name", "is required"),
])
def test_bad_slices_name_the_object_field_and_reason(devices: list[dict[str, Any]], field: str,
                                                      reason: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_object(slice_manifest(devices))
    assert caught.value.obj == "ResourceSlice gpu-node-1"
    assert caught.value.field == field
    assert reason in caught.value.reason


def test_claim_requests_constraints_and_allocation() -> None:
    model = parse_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
        "spec": {"devices": {
            "requests": [
                {"name": "a", "exactly": {"deviceClassName": "gpu", "allocationMode": "All", "adminAccess": False,
                                          "tolerations": [{"key": "k", "operator": "Exists"}],
                                          "capacity": {"requests": {"memory": "1Gi"}}}},
                {"name": "b", "firstAvailable": [{"name": "big", "deviceClassName": "gpu", "count": 2},
                                                 {"name": "small", "deviceClassName": "gpu"}]},
            ],
            "constraints": [{"requests": ["a"], "matchAttribute": f"{DRIVER}/model"}],
            "config": [{"opaque": {"driver": DRIVER, "parameters": {"x": 1}}}],
        }},
        "status": {"allocation": {"devices": {"results": [
            {"request": "a", "driver": DRIVER, "pool": "p", "device": "d", "shareID": "s",
             "consumedCapacity": {"memory": "1Gi"}}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]},
    }, default_namespace="team")
    assert isinstance(model, ResourceClaim)
    assert model.key == "team/c"
    first, second = model.requests
    assert first.exactly is not None and first.exactly.allocation_mode == ALL
    assert first.exactly.admin_access is False and first.exactly.tolerations[0].operator == "Exists"
    assert [s.count for s in second.first_available] == [2, 1]
    assert model.spec.constraints[0].match_attribute == f"{DRIVER}/model"
    assert model.allocation is not None and model.allocation.results[0].share_id == "s"
    assert model.reserved_for[0].name == "p"


def test_a_request_needs_exactly_one_of_exactly_and_first_available() -> None:
    manifest = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
                "spec": {"devices": {"requests": [{"name": "a"}]}}}
    with pytest.raises(InvalidInput) as caught:
        parse_object(manifest)
    assert caught.value.field == "spec.devices.requests[0].exactly"


def test_template_pod_and_list_objects() -> None:
    claim_template = template("t", exactly("g"), namespace="ns")
    user = pod("p", "ns", labels={"a": "b"}, templates={"one": "t"}, claims={"two": "shared"}, container="c",
               requests={"nvidia.com/gpu": "2"}, gated=True, node_selector={"zone": "a"}, phase="Pending",
               claim_statuses={"one": "p-one-x"})
    models = parse_objects([{"apiVersion": "v1", "kind": "List", "items": [claim_template, user]}])
    parsed_template, parsed_pod = models
    assert isinstance(parsed_template, ResourceClaimTemplate)
    assert parsed_template.spec.requests[0].name == "g"
    assert isinstance(parsed_pod, Pod)
    assert [parsed_pod.claim_name_for(e) for e in parsed_pod.resource_claims] == ["p-one-x", "shared"]
    assert parsed_pod.containers[0].requests["nvidia.com/gpu"] == parse_quantity("2")
    assert parsed_pod.scheduling_gates == ("draq.io/admission",)


def test_unknown_kinds_are_rejected_or_skipped() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    with pytest.raises(InvalidInput) as caught:
        parse_object(deployment)
    assert "unsupported object apps/v1 Deployment" in str(caught.value)
    assert parse_objects([deployment], skip_unsupported=True) == []


def test_absent_maps_share_one_empty_mapping_that_refuses_changes() -> None:
    first, second = model(pod("a", node="n1")), model(pod("b", node="n1", requests={"cpu": "1"}))
    assert isinstance(first, Pod) and isinstance(second, Pod)
    assert first.node_selector is second.node_selector is first.overhead is first.meta.annotations
    assert first.node_selector == {} and copy.deepcopy(first) == first and json.dumps(first.overhead) == "{}"
    with pytest.raises(TypeError, match="shared and cannot be changed"):
        first.overhead["cpu"] = second.containers[0].requests["cpu"]  # type: ignore[index]
    assert second.containers[0].requests != {}  # a map that is there is the pod's own
