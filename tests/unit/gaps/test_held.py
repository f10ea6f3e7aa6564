"""Devices held versus charged: ChargeDiffers, OutsideQueues, BypassedAdmission, and the accounts."""

from __future__ import annotations

from fractions import Fraction

from admission.core.gaps import Account, GapKind
from admission.core.labels import DEFAULT_QUEUE_LABEL
from tests.support.builders import claim, exactly, namespace, node, pod
from tests.unit.gaps.world import (
    TEAM,
    admitted_group,
    base,
    device,
    gaps_of,
    held_claim,
    report,
    running_pod,
    sizes,
)

GI = 1024**3


def test_a_group_holding_what_it_was_charged_has_no_gap() -> None:
    result = report(*base(), admitted_group("g", {"gpus": "2", "gpu-memory": "160Gi"}, ["p-0"]),
                    running_pod("p-0", queue="lq", group="g", claims={"gpu": "c"}),
                    held_claim("c", [device("gpu-0"), device("gpu-1")], users=["p-0"]))
    assert result.gaps == ()
    assert result.accounts == (Account(TEAM, "cq", "gpu-memory", Fraction(160 * GI), Fraction(160 * GI)),
                               Account(TEAM, "cq", "gpus", Fraction(2), Fraction(2)))


def test_charge_differs_is_allocated_minus_charged_per_unit() -> None:
    # Charged 1 GPU (80Gi); the claim holds 3 GPUs of 80Gi: +2 gpus, +160Gi.
    result = report(*base(), admitted_group("g", {"gpus": "1", "gpu-memory": "80Gi"}, ["p-0"]),
                    running_pod("p-0", queue="lq", group="g", claims={"gpu": "c"}),
                    held_claim("c", [device("gpu-0"), device("gpu-1"), device("gpu-2")], users=["p-0"]))
    assert sizes(result, GapKind.CHARGE_DIFFERS) == {"gpus": 2, "gpu-memory": 160 * GI}
    (gpus,) = [g for g in result.gaps if g.measure == "gpus"]
    assert (gpus.namespace, gpus.cluster_queue) == (TEAM, "cq")
    assert gpus.objects == ("PodGroup team/g", "Pod team/p-0")
    assert gpus.message == "PodGroup team/g is charged gpus 1, its running members' claims hold gpus 3"
    assert [g.kind for g in result.gaps] == [GapKind.CHARGE_DIFFERS] * 2


def test_an_admitted_group_whose_claims_are_not_allocated_yet_is_no_gap() -> None:
    result = report(*base(), admitted_group("g", {"gpus": "2"}, ["p-0"]),
                    running_pod("p-0", queue="lq", group="g", claims={"gpu": "c"}),
                    claim("c", exactly(count=2), namespace=TEAM))
    assert gaps_of(result, GapKind.CHARGE_DIFFERS) == []


def test_devices_of_pods_in_unmanaged_namespaces_are_outside_every_queue() -> None:
    # 2 DRA GPUs for pod x, 3 device-plugin GPUs for pod y on a node that serves nvidia.com/gpu: 5 gpus.
    result = report(*base(), node("n2", allocatable={"nvidia.com/gpu": "8"}),
                    running_pod("x", "ops", claims={"gpu": "x-gpu"}),
                    held_claim("x-gpu", [device("gpu-0"), device("gpu-1")], "ops", ["x"]),
                    running_pod("y", "ops", node_name="n2", requests={"nvidia.com/gpu": "3"}))
    assert sizes(result, GapKind.OUTSIDE_QUEUES) == {"gpus": 5, "gpu-memory": 160 * GI}
    (gpus,) = [g for g in result.gaps if g.measure == "gpus"]
    assert (gpus.namespace, gpus.cluster_queue) == ("ops", "")
    assert gpus.objects == ("ResourceClaim ops/x-gpu", "Pod ops/x", "Pod ops/y")
    assert "namespace ops is not managed by draq" in gpus.message
    assert Account("ops", "", "gpus", Fraction(5), Fraction(0)) in result.accounts


def test_finished_and_unbound_pods_hold_nothing() -> None:
    result = report(*base(), node("n2", allocatable={"nvidia.com/gpu": "8"}),
                    pod("done", "ops", node="n2", phase="Succeeded", requests={"nvidia.com/gpu": "3"}),
                    pod("waiting", "ops", requests={"nvidia.com/gpu": "3"}))
    assert result.gaps == ()


def test_an_allocated_claim_that_no_running_pod_uses_is_outside_every_queue() -> None:
    result = report(*base(), held_claim("left", [device("gpu-3")]))
    assert sizes(result, GapKind.OUTSIDE_QUEUES) == {"gpus": 1, "gpu-memory": 80 * GI}
    gap = gaps_of(result, GapKind.OUTSIDE_QUEUES)[0]
    assert gap.objects == ("ResourceClaim team/left",)
    assert "no running pod uses ResourceClaim team/left" in gap.message


def test_admin_access_holds_nothing() -> None:
    admin = claim("admin", exactly(adminAccess=True), namespace="ops",
                  allocation=[{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0",
                               "adminAccess": True}], reserved_for=["x"])
    result = report(*base(), running_pod("x", "ops", claims={"gpu": "admin"}), admin)
    assert result.gaps == ()


def test_a_queue_pod_of_a_group_that_was_not_admitted_bypassed_admission() -> None:
    # The gate was removed by someone else: the pod runs with 1 GPU, its group holds no quota.
    result = report(*base(), running_pod("rogue", queue="lq", group="r", claims={"gpu": "c"}),
                    held_claim("c", [device("gpu-0")], users=["rogue"]))
    assert sizes(result, GapKind.BYPASSED_ADMISSION) == {"gpus": 1, "gpu-memory": 80 * GI}
    (gpus,) = [g for g in result.gaps if g.measure == "gpus"]
    assert (gpus.namespace, gpus.cluster_queue) == (TEAM, "cq")
    assert "group team/r is not admitted (no PodGroup)" in gpus.message
    assert Account(TEAM, "cq", "gpus", Fraction(1), Fraction(0)) in result.accounts


def test_an_unlabelled_pod_in_a_namespace_with_a_default_queue_bypassed_the_webhook() -> None:
    result = report(*base(), namespace(TEAM, {DEFAULT_QUEUE_LABEL: "lq"}),
                    running_pod("quiet", claims={"gpu": "c"}), held_claim("c", [device("gpu-0")], users=["quiet"]))
    (gpus,) = [g for g in gaps_of(result, GapKind.BYPASSED_ADMISSION) if g.measure == "gpus"]
    assert (gpus.size, gpus.cluster_queue) == (1, "cq")
    assert "the webhook did not see it" in gpus.message


def test_a_member_left_out_of_its_groups_plan_bypassed_admission() -> None:
    result = report(*base(), admitted_group("g", {"gpus": "1", "gpu-memory": "80Gi"}, ["p-0"]),
                    running_pod("p-0", queue="lq", group="g", claims={"gpu": "c0"}),
                    held_claim("c0", [device("gpu-0")], users=["p-0"]),
                    running_pod("p-1", queue="lq", group="g", claims={"gpu": "c1"}),
                    held_claim("c1", [device("gpu-1")], users=["p-1"]))
    assert sizes(result, GapKind.BYPASSED_ADMISSION) == {"gpus": 1, "gpu-memory": 80 * GI}
    assert "admitted without pod p-1 in its plan" in gaps_of(result, GapKind.BYPASSED_ADMISSION)[0].message
