"""ResourceQuota and Namespace models: hard limits, the controller's used counts, scopes, and the
resource names that concern devices."""

from __future__ import annotations

import pytest

from admission.core.errors import InvalidInput
from admission.core.models import (
    Namespace,
    ResourceQuota,
    class_devices_resource,
    device_class_of,
    parse_object,
    requested_resource,
)
from admission.core.quantity import parse_quantity
from tests.support.builders import namespace, resource_quota


def test_hard_and_used_are_read_as_quantities() -> None:
    manifest = resource_quota("gpus", {"requests.nvidia.com/gpu": 4, "gpu.deviceclass.resource.k8s.io/devices": "2"},
                              "team", used={"requests.nvidia.com/gpu": "1"})
    quota = parse_object(manifest)
    assert isinstance(quota, ResourceQuota)
    assert quota.key == "team/gpus"
    assert quota.hard == {"requests.nvidia.com/gpu": parse_quantity(4),
                          "gpu.deviceclass.resource.k8s.io/devices": parse_quantity(2)}
    assert quota.used == {"requests.nvidia.com/gpu": parse_quantity(1)}
    assert quota.scopes == ()


def test_a_quota_without_status_has_no_used_counts() -> None:
    quota = parse_object(resource_quota("q", {"count/pods": 3}))
    assert isinstance(quota, ResourceQuota)
    assert quota.used is None


def test_scopes_and_scope_selector_names_are_kept() -> None:
    manifest = resource_quota("q", {"pods": 3}, scopes=["NotBestEffort"])
    manifest["spec"]["scopeSelector"] = {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}
    quota = parse_object(manifest)
    assert isinstance(quota, ResourceQuota)
    assert quota.scopes == ("NotBestEffort", "PriorityClass")


def test_a_hard_limit_that_is_no_quantity_names_the_field() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_object(resource_quota("q", {"requests.nvidia.com/gpu": "four"}, "team"))
    assert caught.value.obj == "ResourceQuota team/q"
    assert caught.value.field == "spec.hard.requests.nvidia.com/gpu"


def test_namespace_labels() -> None:
    parsed = parse_object(namespace("team", {"draq.io/default-queue": "training"}))
    assert isinstance(parsed, Namespace)
    assert (parsed.name, dict(parsed.labels)) == ("team", {"draq.io/default-queue": "training"})


def test_device_resource_names() -> None:
    assert class_devices_resource("gpu.nvidia.com") == "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    assert device_class_of("gpu.nvidia.com.deviceclass.resource.k8s.io/devices") == "gpu.nvidia.com"
    assert device_class_of(".deviceclass.resource.k8s.io/devices") is None
    assert device_class_of("requests.nvidia.com/gpu") is None
    assert requested_resource("requests.nvidia.com/gpu") == "nvidia.com/gpu"
    assert requested_resource("count/pods") is None
