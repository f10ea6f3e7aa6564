"""A group's priority comes from its pods' PriorityClass (spec.priority); a PodGroup can only lower it; a
LocalQueue or ClusterQueue can cap the priority it accepts."""

from __future__ import annotations

from admission.core.cycle import Admit, Wait, WaitReason
from tests.support.builders import cluster_queue, local_queue, model, quota
from tests.unit.cycle.cycle_builders import NS, cycle, gang, gpu_node, gpu_queue, group_record, groups_of

NODES = gpu_node("node-a")


def test_the_priority_is_the_highest_of_the_members() -> None:
    pods = gang("mixed", 2, 1)
    pods[1]["spec"]["priority"], pods[2]["spec"]["priority"] = 3, 7
    [group] = groups_of(pods)
    assert group.priority == 7


def test_a_pod_group_priority_can_lower_the_priority_but_never_raise_it() -> None:
    [raised] = groups_of(gang("g", 1, 1, priority=10), [group_record("g", 1, priority=2147483647)])
    [lowered] = groups_of(gang("g", 1, 1, priority=10), [group_record("g", 1, priority=3)])
    [unset] = groups_of(gang("g", 1, 1, priority=10), [group_record("g", 1)])
    assert (raised.priority, lowered.priority, unset.priority) == (10, 3, 10)


def test_a_tenant_pod_group_priority_does_not_put_its_group_first() -> None:
    first = gang("first", 1, 4, created="2026-01-01T00:00:00Z")
    tenant = gang("tenant", 1, 4, created="2026-01-02T00:00:00Z")
    result = cycle(NODES + first + tenant, [gpu_queue("main", 4)],
                   pod_groups=[group_record("tenant", 1, priority=2147483647)])
    assert isinstance(result.decision(f"{NS}/first"), Admit)
    assert isinstance(result.decision(f"{NS}/tenant"), Wait)


def test_a_group_above_its_cluster_queue_cap_waits_naming_it() -> None:
    manifest = cluster_queue("main", quota("gpus", 8))
    manifest["spec"]["maxPriority"] = 100
    result = cycle(NODES + gang("urgent", 1, 4, priority=1000) + gang("normal", 1, 4, priority=100),
                   [model(manifest)])
    wait = result.decision(f"{NS}/urgent")
    assert isinstance(wait, Wait) and wait.reason is WaitReason.PRIORITY_CAP
    assert wait.message == ("priority 1000 (the highest of its pods' PriorityClasses) is above the spec.maxPriority "
                            "100 of ClusterQueue main; give its pods a PriorityClass of at most 100, or use another "
                            "queue")
    assert isinstance(result.decision(f"{NS}/normal"), Admit)


def test_a_group_above_its_local_queue_cap_waits_naming_it() -> None:
    lq = local_queue("lq", "main", NS)
    lq["spec"]["maxPriority"] = 0
    result = cycle(NODES + gang("urgent", 1, 4, priority=5), [gpu_queue("main", 8)], local_queues=[model(lq)])
    wait = result.decision(f"{NS}/urgent")
    assert isinstance(wait, Wait) and wait.reason is WaitReason.PRIORITY_CAP
    assert "is above the spec.maxPriority 0 of LocalQueue team/lq" in wait.message
