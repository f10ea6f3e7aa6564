"""Members created after their group was admitted: placed and charged into the group, or told why not."""

from __future__ import annotations

from admission.core.cycle import Extend, LateWait, late_members
from tests.unit.cycle.cycle_builders import NS, cycle, gang, gpu_node, gpu_queue, group_record, groups_of, member

ADMITTED = {"phase": "Running", "admittedAt": "2026-01-01T12:00:00Z", "clusterQueue": "main",
            "charge": [{"unit": "gpus", "amount": "4"}],
            "plan": {"pods": [{"name": "t-0", "node": "node-a"}],
                     "claims": [{"name": "t-0/gpu", "devices": [
                         {"request": "gpus", "device": f"gpu.example.com/node-a/gpu-{i}"} for i in range(4)]}]}}


def objects(late_gated: bool = True) -> list[dict[str, object]]:
    template = gang("t", 2, 4)[0]
    first = member("t-0", "t", group_min=2, template="t-gpus", gated=False, node="node-a", phase="Running")
    late = member("t-1", "t", group_min=2, template="t-gpus", gated=late_gated)
    return gpu_node("node-a") + gpu_node("node-b") + [template, first, late]


def test_a_gated_member_the_plan_does_not_name_is_late() -> None:
    [group] = groups_of(objects(), [group_record("t", 2, status=ADMITTED)])
    assert [p.name for p in late_members(group)] == ["t-1"]
    [unrecorded] = groups_of(objects(), [group_record("t", 2, status={"phase": "Pending"})])
    assert late_members(unrecorded) == ()


def test_a_late_member_that_fits_grows_the_group() -> None:
    result = cycle(objects(), [gpu_queue("main", 16)], pod_groups=[group_record("t", 2, status=ADMITTED)])
    [grown] = [d for d in result.decisions if isinstance(d, Extend)]
    assert grown.group == f"{NS}/t" and grown.added.describe() == "gpus 4" and grown.charge.describe() == "gpus 8"
    assert [name for name, _ in grown.plan.nodes] == ["t-0", "t-1"]
    assert grown.placement.nodes[f"{NS}/t-1"] in ("node-a", "node-b")
    assert result.state.usage("main").describe() == "gpus 8"


def test_a_late_member_over_quota_waits_with_the_reason() -> None:
    result = cycle(objects(), [gpu_queue("main", 6)], pod_groups=[group_record("t", 2, status=ADMITTED)])
    [wait] = [d for d in result.decisions if isinstance(d, LateWait)]
    assert wait.message.startswith("late member(s) t-1 do not fit the quota: ClusterQueue main")
    assert result.state.usage("main").describe() == "gpus 4"
