"""The webhook does not see devices: a charge that depends on them is said to be computed at admission.

It must not claim that no device matches (the demo's GPUs do match), and the units it can charge
without devices (device counts) are still checked against the queue.
"""

from __future__ import annotations

from typing import Any

from admission.core.review import GatingPolicy, validate
from admission.core.review.envelope import Decision

from .builders import CLAIM, CLAIM_TEMPLATE, FakeLookups, cluster, request

GPU_CLASS = "gpu.nvidia.com"


def lookups(gpus: int = 16) -> FakeLookups:
    """The demo's queue: gpus (a device count) and nvidia-memory (a capacity), in team-b's default queue."""
    found = cluster().with_queue("team-b", "batch", "research")
    found.units["gpus"] = {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": "gpus"},
                           "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}}
    found.units["nvidia-memory"] = {
        "apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": "nvidia-memory"},
        "spec": {"capacity": {"deviceClassNames": [GPU_CLASS], "name": "gpu.nvidia.com/memory"}}}
    found.device_classes[GPU_CLASS] = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                       "metadata": {"name": GPU_CLASS}, "spec": {}}
    found.cluster_queues["research"] = {
        "apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "research"},
        "spec": {"quotas": [{"unit": "gpus", "nominal": gpus}, {"unit": "nvidia-memory", "nominal": "1280Gi"}]}}
    return found


def four_h100(count: int = 4, kind: str = "ResourceClaimTemplate") -> dict[str, Any]:
    spec = {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": GPU_CLASS, "count": count}}]}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": "four-h100", "namespace": "team-b"},
            "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec}


def check(obj: dict[str, Any], found: FakeLookups) -> Decision:
    kind = CLAIM_TEMPLATE if obj["kind"] == "ResourceClaimTemplate" else CLAIM
    return validate(request(kind, obj), found, GatingPolicy())


def test_a_device_dependent_charge_is_said_to_be_computed_at_admission() -> None:
    for kind in ("ResourceClaimTemplate", "ResourceClaim"):
        decision = check(four_h100(kind=kind), lookups())
        assert decision.allowed
        assert decision.warnings == (
            f"{kind} team-b/four-h100: its charge in QuotaUnit nvidia-memory is computed at admission (it depends "
            "on the devices allocated)",)
        assert "no device" not in decision.warnings[0] and "matches" not in decision.warnings[0]


def test_every_device_dependent_unit_is_named() -> None:
    found = lookups()
    found.units["weighted"] = {
        "apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": "weighted"},
        "spec": {"weight": {"deviceClassNames": [GPU_CLASS], "expression": "1"}}}
    decision = check(four_h100(), found)
    assert decision.allowed and len(decision.warnings) == 1
    assert "its charge in QuotaUnits nvidia-memory, weighted is computed at admission" in decision.warnings[0]


def test_units_that_do_not_need_devices_are_still_checked_against_the_queue() -> None:
    decision = check(four_h100(count=20), lookups(gpus=16))
    assert not decision.allowed
    assert "gpus: it asks for 20, the queue can hold at most 16" in decision.message


def test_a_missing_device_class_is_still_named() -> None:
    found = lookups()
    del found.device_classes[GPU_CLASS]
    decision = check(four_h100(), found)
    assert decision.allowed
    assert len(decision.warnings) == 1, decision.warnings  # said once, not once per unit counting it
    assert f"DeviceClass {GPU_CLASS} does not exist" in decision.warnings[0]


def test_a_missing_device_class_no_unit_counts_is_named_with_its_request() -> None:
    spec = {"devices": {"requests": [
        {"name": "gpus", "exactly": {"deviceClassName": GPU_CLASS, "count": 1}},
        {"name": "nic", "firstAvailable": [{"name": "fast", "deviceClassName": "nic.example.com"}]}]}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "with-nic", "namespace": "team-b"}, "spec": spec}
    decision = check(claim, lookups())
    assert decision.allowed
    named = [w for w in decision.warnings if "nic.example.com" in w]
    assert named == ["ResourceClaim team-b/with-nic, request nic/fast: DeviceClass nic.example.com does not "
                     "exist; the scheduler reports the pods that use it unschedulable until it is created"]
