"""One bad object, one affected group or queue: every object the cycle reads, broken in the ways it can
break, stops only the groups that use it, which wait with its reason; the others are admitted as usual.

Each cluster has ClusterQueue `main` (LocalQueue `team/lq`) and ClusterQueue `other` (LocalQueue
`team/olq`), 8 GPUs each, on two nodes of 4 GPUs; group `a` asks `main` for one GPU, group `b` asks
`other` (or `main`) for one GPU, and the bad object is on `b`'s side.
"""

from __future__ import annotations

import asyncio
from typing import Any

from admission.core.cycle import Admit, GroupDecision, Wait, WaitReason, run_cycle
from admission.core.labels import GATE
from tests.support.builders import (
    cluster_queue,
    device_class,
    exactly,
    local_queue,
    pod,
    pod_group,
    quota,
    quota_unit,
    template,
)
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, gang

from .operator_world import cluster, started

MISSING_ATTRIBUTE = 'device.attributes["gpu.example.com"].missing'


def world(*extra: dict[str, Any], other: dict[str, Any] | None = None, b_queue: str = "olq") -> FakeApi:
    """The two queues (`other` as given), groups `a` (in main) and `b` (in `b_queue`), and `extra` objects."""
    api = cluster(nodes=2)
    api.add(other or cluster_queue("other", quota("gpus", 8)), local_queue("olq", "other", NS))
    api.add(*gang("a", 1, 1), *gang("b", 1, 1, queue=b_queue))
    api.add(*extra)  # last: replaces what it names
    return api


def decide(api: FakeApi) -> dict[str, GroupDecision]:
    """One admission cycle over what the operator's cache reads: group -> decision."""
    async def go() -> dict[str, GroupDecision]:
        operator = await started(api)
        try:
            return {d.group.split("/")[1]: d for d in run_cycle(operator.reader.read().cycle).decisions}
        finally:
            await operator.cache.stop()

    return asyncio.run(go())


def only_b_waits(decisions: dict[str, GroupDecision], reason: WaitReason, *says: str) -> Wait:
    """`b` waits for `reason` with a message that says each of `says`; every other group is admitted."""
    wait = decisions.pop("b")
    assert isinstance(wait, Wait) and wait.reason is reason, wait
    for text in says:
        assert text in wait.message
    assert decisions and all(isinstance(d, Admit) for d in decisions.values()), decisions
    return wait


def test_a_unit_whose_weight_fails_on_a_device_stops_only_the_queues_that_quote_it() -> None:
    weighted = quota_unit("weighted", weight={"deviceClassNames": ["gpu"], "expression": f"{MISSING_ATTRIBUTE} * 2"})
    decisions = decide(world(weighted, other=cluster_queue("other", quota("gpus", 8), quota("weighted", 100))))
    admitted = decisions["a"]
    wait = only_b_waits(decisions, WaitReason.UNIT_INVALID, "ClusterQueue other", "QuotaUnit weighted",
                        "expression fails on device gpu.example.com/node-0/gpu-0", "no such key: missing")
    assert wait.cluster_queue == "other"
    assert isinstance(admitted, Admit) and admitted.charge.units == ("gpus",)  # charged without the bad unit


def test_a_unit_that_does_not_compile_is_reported_invalid_not_missing() -> None:
    broken = quota_unit("weighted", weight={"deviceClassNames": ["gpu"], "expression": "device.attributes["})
    wait = only_b_waits(decide(world(broken, other=cluster_queue("other", quota("weighted", 100)))),
                        WaitReason.UNIT_INVALID, "QuotaUnit weighted, field spec.weight.expression: does not compile")
    assert "does not exist" not in wait.message


def test_a_cluster_queue_that_does_not_parse_stops_only_its_groups() -> None:
    broken = cluster_queue("other", quota("gpus", "lots"))
    only_b_waits(decide(world(other=broken)), WaitReason.QUEUE_INVALID,
                 "LocalQueue team/olq points to ClusterQueue other, which is invalid",
                 "spec.quotas[0].nominal: 'lots' is not a quantity")


def test_a_cluster_queue_whose_namespace_selector_has_an_unknown_operator_stops_only_its_groups() -> None:
    broken = cluster_queue("other", quota("gpus", 8), namespace_selector={
        "matchExpressions": [{"key": "team", "operator": "Bogus", "values": ["a"]}]})
    only_b_waits(decide(world(other=broken)), WaitReason.QUEUE_INVALID,
                 "LocalQueue team/olq points to ClusterQueue other, which is invalid",
                 "spec.namespaceSelector.matchExpressions[0].operator: unknown operator 'Bogus'")


def test_an_unreadable_cluster_queue_holding_admissions_stops_its_cohort_only() -> None:
    # `other` (cohort pool) holds a running group; `mate` shares the cohort; `main` is alone.
    broken = cluster_queue("other", quota("gpus", "lots"), cohort="pool")
    held = pod_group("held", 1, "olq", namespace=NS, status={
        "phase": "Running", "clusterQueue": "other", "charge": [{"unit": "gpus", "amount": "4"}]})
    mate = [cluster_queue("mate", quota("gpus", 8), cohort="pool"), local_queue("mlq", "mate", NS)]
    wait = only_b_waits(decide(world(held, *mate, other=broken, b_queue="mlq")), WaitReason.USAGE_UNKNOWN,
                        "ClusterQueue mate admits nothing new while its usage is unknown",
                        "ClusterQueue other of cohort pool holds admissions but cannot be read")
    assert wait.cluster_queue == "mate"


def test_a_local_queue_pointing_nowhere_stops_only_its_groups() -> None:
    only_b_waits(decide(world(local_queue("olq", "nowhere", NS))), WaitReason.NO_QUEUE,
                 "LocalQueue team/olq points to ClusterQueue nowhere, which does not exist")


def test_a_local_queue_that_does_not_parse_stops_only_its_groups() -> None:
    only_b_waits(decide(world(local_queue("olq", "", NS))), WaitReason.QUEUE_INVALID,
                 "LocalQueue team/olq is invalid: LocalQueue team/olq, field spec.clusterQueue")


def test_a_pod_group_with_a_hand_edited_status_stops_only_the_queue_it_is_charged_to() -> None:
    # `held` runs in `other` (its members bound, not gated); its recorded charge was edited by hand.
    held = pod_group("held", 1, "olq", namespace=NS, status={
        "phase": "Running", "clusterQueue": "other", "charge": [{"unit": "gpus", "amount": "lots"}]})
    member = pod("held-0", NS, queue="olq", group="held", node="node-0", phase="Running")
    only_b_waits(decide(world(held, member)), WaitReason.USAGE_UNKNOWN,
                 "ClusterQueue other admits nothing new while its usage is unknown",
                 "PodGroup team/held records an admission that cannot be read",
                 "status.charge[0].amount: 'lots' is not a quantity")


def test_a_pod_group_that_does_not_parse_keeps_its_own_group_out_and_its_phase() -> None:
    # `b`'s record says Admitted (a release under way: its member is still gated) with a charge edited by hand.
    record = pod_group("b", 1, "olq", namespace=NS, status={
        "phase": "Admitted", "clusterQueue": "other", "charge": [{"unit": "gpus", "amount": "lots"}]})
    only_b_waits(decide(world(record)), WaitReason.UNREADABLE, "PodGroup team/b, field status.charge[0].amount",
                 "not considered until its PodGroup is fixed")

    async def go() -> None:
        api = world(record)
        operator = await started(api)
        await operator.reconcile()
        stored = api.get_object("PodGroup", NS, "b")
        assert stored is not None and stored["status"]["phase"] == "Admitted"  # not erased to Pending
        assert "not considered until its PodGroup is fixed" in stored["status"]["message"]
        gated = api.get_object("Pod", NS, "b-0")
        assert gated is not None and [g["name"] for g in gated["spec"]["schedulingGates"]] == [GATE]
        assert api.get_object("PodGroup", NS, "a") is not None and not gates_of(api, "a-0")
        await operator.cache.stop()

    asyncio.run(go())


def gates_of(api: FakeApi, name: str) -> list[str]:
    found = api.get_object("Pod", NS, name)
    assert found is not None
    return [g["name"] for g in found["spec"].get("schedulingGates") or []]


def test_a_claim_template_whose_selector_fails_on_devices_stops_only_its_group() -> None:
    failing = template("b-gpus", exactly("gpus", count=1, selector=f"{MISSING_ATTRIBUTE} == 1"), namespace=NS)
    only_b_waits(decide(world(failing, b_queue="lq")), WaitReason.DEVICES, "claim team/b-0/gpu",
                 "CEL runtime error: no such key: missing")


def test_a_device_class_whose_selector_fails_stops_only_the_groups_that_use_it() -> None:
    # The unit counts both classes; the failure is the class's, not the unit's: `main` still admits.
    bad_class = device_class("bad", expression=f"{MISSING_ATTRIBUTE} == 1")
    unit = quota_unit("gpus", devices={"deviceClassNames": ["gpu", "bad"]})
    uses_bad = template("b-gpus", exactly("gpus", "bad", count=1), namespace=NS)
    api = world(bad_class, unit, uses_bad, b_queue="lq")
    only_b_waits(decide(api), WaitReason.DEVICES, "class bad: selector #0: CEL runtime error: no such key: missing")
