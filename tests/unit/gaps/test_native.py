"""Native ResourceQuota: what it counts next to what is held (NativeQuotaCounts), and what it allows
next to the ClusterQueue's nominal (NativeQuotaLimit)."""

from __future__ import annotations

from fractions import Fraction

from admission.core.gaps import GapKind, NativeAccount
from tests.support.builders import (
    DRIVER,
    all_devices,
    claim,
    device_class,
    exactly,
    first_available,
    holding,
    node,
    pod,
    resource_quota,
)
from tests.unit.gaps.world import TEAM, base, device, gaps_of, held_claim, report, running_pod

CLASS_DEVICES = "gpu.deviceclass.resource.k8s.io/devices"
EXTENDED_CLAIM = {"resource.kubernetes.io/extended-resource-claim": "true"}


def test_claims_count_from_creation_and_all_mode_as_32() -> None:
    # c1: 2 requested, 2 held; c2: 3 requested, not allocated; c3: All, holds the 4 GPUs of n1, counts 32.
    result = report(*base(), resource_quota("rq", {CLASS_DEVICES: 64}, TEAM),
                    held_claim("c1", [device("gpu-0"), device("gpu-1")]),
                    claim("c2", exactly(count=3), namespace=TEAM),
                    claim("c3", all_devices(), namespace=TEAM,
                          allocation=holding(*(device(f"gpu-{i}") for i in range(4)))))
    assert result.native == (NativeAccount(TEAM, "rq", CLASS_DEVICES, Fraction(64), Fraction(37), Fraction(6),
                                           "computed"),)
    (gap,) = gaps_of(result, GapKind.NATIVE_QUOTA_COUNTS)
    assert (gap.measure, gap.size, gap.namespace) == (CLASS_DEVICES, 31, TEAM)
    assert gap.objects == ("ResourceQuota team/rq", "ResourceClaim team/c2", "ResourceClaim team/c3")
    assert gap.message.startswith("ResourceQuota team/rq counts gpu.deviceclass.resource.k8s.io/devices 37, "
                                  "the namespace holds 6: it refuses new claims or pods before the devices")
    assert "ResourceClaim team/c2 counted 3, holds 0" in gap.message


def test_the_quota_controllers_count_is_used_when_there_is_one() -> None:
    result = report(*base(), resource_quota("rq", {CLASS_DEVICES: 8}, TEAM, used={CLASS_DEVICES: 5}),
                    held_claim("c1", [device("gpu-0"), device("gpu-1")]))
    assert result.native[0].used_from == "status"
    (gap,) = gaps_of(result, GapKind.NATIVE_QUOTA_COUNTS)
    assert gap.size == 3


def test_first_available_counts_its_largest_alternative_and_admin_access_counts() -> None:
    chosen = claim("fa", first_available("gpu", exactly("big", count=4), exactly("small", count=2)), namespace=TEAM,
                   allocation=holding(device("gpu-0"), device("gpu-1"), request="gpu/small"))
    admin = claim("admin", exactly(adminAccess=True), namespace=TEAM,
                  allocation=[{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-2",
                               "adminAccess": True}])
    result = report(*base(), resource_quota("rq", {CLASS_DEVICES: 64}, TEAM), chosen, admin)
    (gap,) = gaps_of(result, GapKind.NATIVE_QUOTA_COUNTS)
    assert gap.size == (4 + 1) - 2


def test_extended_resource_requests_count_before_the_pod_is_bound() -> None:
    result = report(*base(), node("n2", allocatable={"nvidia.com/gpu": "8"}),
                    resource_quota("rq", {"requests.nvidia.com/gpu": 8}, TEAM),
                    pod("gated", TEAM, queue="lq", group="g", gated=True, requests={"nvidia.com/gpu": "2"}),
                    running_pod("bound", node_name="n2", requests={"nvidia.com/gpu": "1"}))
    (account,) = result.native
    assert (account.used, account.held) == (3, 1)
    (gap,) = gaps_of(result, GapKind.NATIVE_QUOTA_COUNTS)
    assert (gap.measure, gap.size, gap.objects) == ("requests.nvidia.com/gpu", 2,
                                                     ("ResourceQuota team/rq", "Pod team/gated"))


def test_with_dra_extended_resources_claims_of_the_serving_class_count_once() -> None:
    # Pod p asks 2 nvidia.com/gpu, served by class gpu-er through the scheduler's claim; claim u holds 1 more.
    scheduler_claim = claim("p-extended-resources-1", exactly("container-0-request-0", "gpu-er", 2), namespace=TEAM,
                            annotations=EXTENDED_CLAIM, reserved_for=["p"],
                            allocation=holding(device("gpu-0"), device("gpu-1"), request="container-0-request-0"))
    scheduler_claim["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "p", "controller": True}]
    objects = (*base(), device_class("gpu-er", extended_resource="nvidia.com/gpu"),
               resource_quota("rq", {"requests.nvidia.com/gpu": 8}, TEAM),
               running_pod("p", requests={"nvidia.com/gpu": "2"}), scheduler_claim,
               claim("u", exactly(device_class="gpu-er"), namespace=TEAM, allocation=holding(device("gpu-2"))))
    with_gate = report(*objects, gates={"DRAExtendedResource": True})
    assert (with_gate.native[0].used, with_gate.native[0].held) == (3, 3)
    without = report(*objects)
    assert (without.native[0].used, without.native[0].held) == (2, 2)
    assert gaps_of(with_gate, GapKind.NATIVE_QUOTA_COUNTS) == gaps_of(without, GapKind.NATIVE_QUOTA_COUNTS) == []


def test_a_scoped_quota_without_status_is_not_compared_and_says_so() -> None:
    result = report(*base(), resource_quota("rq", {"requests.nvidia.com/gpu": 8}, TEAM, scopes=["NotBestEffort"]),
                    pod("gated", TEAM, requests={"nvidia.com/gpu": "2"}))
    assert result.native == ()
    assert any("scoped (NotBestEffort)" in note for note in result.notes)


def test_quota_resources_that_are_no_devices_are_left_alone() -> None:
    result = report(*base(), resource_quota("rq", {"requests.cpu": 4, "count/pods": 2}, TEAM),
                    pod("gated", TEAM, requests={"cpu": "2"}))
    assert result.native == ()
    assert gaps_of(result, GapKind.NATIVE_QUOTA_COUNTS) == []


def test_a_quota_tighter_than_the_queue_nominal_is_a_limit_gap_in_unit_terms() -> None:
    # ClusterQueue cq: 8 gpus. Devices of class gpu: 4 allowed (4 short); nvidia.com/gpu: 2 allowed (6 short).
    result = report(*base(), resource_quota("rq", {CLASS_DEVICES: 4, "requests.nvidia.com/gpu": 2}, TEAM))
    found = sorted((g.size, g.measure, g.cluster_queue, g.objects) for g in gaps_of(result, GapKind.NATIVE_QUOTA_LIMIT))
    assert found == [(4, "gpus", "cq", ("ResourceQuota team/rq", "ClusterQueue cq")),
                     (6, "gpus", "cq", ("ResourceQuota team/rq", "ClusterQueue cq"))]
    message = next(g.message for g in result.gaps if g.size == 4)
    assert message == ("ClusterQueue cq lets namespace team take gpus 8 (nominal); ResourceQuota team/rq allows "
                       "gpu.deviceclass.resource.k8s.io/devices 4 (gpus 4): draq can admit groups whose claims or "
                       "pods the API server then refuses")


def test_the_tightest_of_several_quotas_decides_and_a_roomy_one_is_no_gap() -> None:
    result = report(*base(), resource_quota("roomy", {CLASS_DEVICES: 16}, TEAM),
                    resource_quota("tight", {CLASS_DEVICES: 3}, TEAM),
                    resource_quota("elsewhere", {CLASS_DEVICES: 1}, "ops"))
    (gap,) = gaps_of(result, GapKind.NATIVE_QUOTA_LIMIT)
    assert (gap.size, gap.namespace, gap.objects) == (5, TEAM, ("ResourceQuota team/tight", "ClusterQueue cq"))
