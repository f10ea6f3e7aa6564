"""The admission cycle when the scheduler's node filters decide: what a waiting group is told, and node
resources taken by groups admitted earlier (in this cycle, or admitted before and not bound yet)."""

from __future__ import annotations

import dataclasses
from typing import Any

from admission.core.cycle import Admit, Wait, WaitReason, run_cycle
from admission.core.features import exactly
from tests.support.builders import (
    GROUP_LABEL,
    HOSTNAME_LABEL,
    Manifest,
    container,
    gpu,
    node,
    resource_slice,
    taint,
    toleration,
    with_spec,
)
from tests.unit.cycle.cycle_builders import (
    NS,
    cycle,
    cycle_input,
    gpu_queue,
    gpu_template,
    group_record,
    member,
    room_cycle,
)

ALLOCATABLE = {"cpu": "4", "memory": "16Gi", "pods": "110"}


def sized_node(name: str, gpus: int = 4, **spec: Any) -> list[Manifest]:
    """A node with 4 cpu and `gpus` H100s."""
    return [with_spec(node(name, {HOSTNAME_LABEL: name}, allocatable=ALLOCATABLE), **spec),
            resource_slice(name, *(gpu(f"gpu-{i}") for i in range(gpus)), name=f"{name}-gpus")]


def cpu_gang(group: str, size: int, cpu: str, *, created: str = "2026-01-01T00:00:00Z",
             **spec: Any) -> list[Manifest]:
    """`size` gated pods of one group, one GPU each, and `cpu` in their container."""
    pods = [with_spec(member(f"{group}-{i}", group, group_min=size, template=f"{group}-gpus", created=created),
                      **{"containers": [container(requests={"cpu": cpu})], **spec}) for i in range(size)]
    return [gpu_template(f"{group}-gpus", 1), *pods]


def test_a_group_whose_pods_fit_one_by_one_but_not_together_waits_with_the_node_reason() -> None:
    result = room_cycle(sized_node("node-a") + cpu_gang("g", 2, "3"), [gpu_queue("main", 8)])
    waiting = result.decision(f"{NS}/g")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.NODES
    assert waiting.reason == "NodesUnavailable"
    assert waiting.message == (f"pod {NS}/g-1 fits on no node after placing 1 other pod(s) of the group: "
                               "0/1 nodes are available: 1 Insufficient cpu")


def test_the_same_group_is_spread_when_there_is_a_second_node() -> None:
    admitted = cycle(sized_node("node-a") + sized_node("node-b") + cpu_gang("g", 2, "3"),
                     [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(admitted, Admit)
    assert sorted(admitted.placement.nodes.values()) == ["node-a", "node-b"]


def test_node_resources_of_a_group_admitted_earlier_in_the_cycle_are_taken() -> None:
    objects = sized_node("node-a") + cpu_gang("first", 1, "3") + cpu_gang("second", 1, "3",
                                                                         created="2026-01-01T00:01:00Z")
    result = cycle(objects, [gpu_queue("main", 8)])
    assert isinstance(result.decision(f"{NS}/first"), Admit)
    waiting = result.decision(f"{NS}/second")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.NODES
    assert "1 Insufficient cpu" in waiting.message


def test_members_of_an_admitted_group_not_bound_yet_hold_their_planned_node() -> None:
    status = {"phase": "Admitted", "clusterQueue": "main", "charge": [{"unit": "gpus", "amount": "1"}],
              "plan": {"pods": [{"name": "early-0", "node": "node-a"}], "claims": []}}
    early = [with_spec(member("early-0", "early", gated=False), containers=[container(requests={"cpu": "3"})])]
    result = cycle(sized_node("node-a") + early + cpu_gang("late", 1, "3"), [gpu_queue("main", 8)],
                   pod_groups=[group_record("early", 1, status=status)])
    waiting = result.decision(f"{NS}/late")
    assert isinstance(waiting, Wait) and "1 Insufficient cpu" in waiting.message


def test_pods_already_running_on_the_node_take_their_cpu() -> None:
    running = with_spec(member("other", "other-group", gated=False, node="node-a", phase="Running"),
                        containers=[container(requests={"cpu": "2"})])
    result = cycle([*sized_node("node-a"), running, *cpu_gang("g", 1, "3")], [gpu_queue("main", 8)])
    waiting = result.decision(f"{NS}/g")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.NODES


def test_a_tainted_gpu_node_needs_a_toleration() -> None:
    tainted = sized_node("node-a", taints=[taint("nvidia.com/gpu", "present")])
    waiting = room_cycle(tainted + cpu_gang("g", 1, "1"), [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.NODES
    # No node the cluster has could ever hold it: by default that is what the wait says, with the same reason.
    never = cycle(tainted + cpu_gang("g", 1, "1"), [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(never, Wait) and never.reason is WaitReason.NEVER_FITS
    assert "1 node(s) had untolerated taint {nvidia.com/gpu: present}" in never.message
    assert waiting.message.endswith("0/1 nodes are available: 1 node(s) had untolerated taint "
                                    "{nvidia.com/gpu: present}")
    tolerant = cpu_gang("g", 1, "1", tolerations=[toleration("nvidia.com/gpu", operator="Exists")])
    assert isinstance(cycle(tainted + tolerant, [gpu_queue("main", 8)]).decision(f"{NS}/g"), Admit)


def test_devices_stay_the_reason_when_nodes_pass_the_filters() -> None:
    waiting = room_cycle(sized_node("node-a", gpus=1) + cpu_gang("g", 2, "1"), [gpu_queue("main", 8)]).decision(
        f"{NS}/g")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.DEVICES


def _required(kind: str, selector: dict[str, Any], key: str = HOSTNAME_LABEL, **extra: Any) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selector, "topologyKey": key, **extra}]}}


def test_members_anti_affine_to_each_other_go_on_different_nodes_or_wait_with_the_scheduler_reason() -> None:
    own = {"matchLabels": {GROUP_LABEL: "g"}}
    anti = cpu_gang("g", 2, "1", affinity=_required("podAntiAffinity", own))
    admitted = cycle(sized_node("node-a") + sized_node("node-b") + anti, [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(admitted, Admit)
    assert sorted(admitted.placement.nodes.values()) == ["node-a", "node-b"]
    waiting = room_cycle(sized_node("node-a") + anti, [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.NODES
    assert waiting.message == (f"pod {NS}/g-1 fits on no node after placing 1 other pod(s) of the group: "
                               "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules")


def test_members_affine_to_themselves_share_a_node_the_first_by_the_self_affinity_exception() -> None:
    together = cpu_gang("g", 2, "1", affinity=_required("podAffinity", {"matchLabels": {GROUP_LABEL: "g"}}))
    admitted = cycle(sized_node("node-a") + sized_node("node-b") + together,
                     [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(admitted, Admit)
    assert set(admitted.placement.nodes.values()) == {"node-a"}


def test_a_member_affine_only_to_a_later_member_waits_since_the_scheduler_may_bind_it_first() -> None:
    cpu = [container(requests={"cpu": "1"})]
    leader = with_spec(member("g-0", "g", group_min=2, template="g-gpus"), containers=cpu)
    leader["metadata"]["labels"]["role"] = "leader"
    worker = with_spec(member("g-1", "g", group_min=2, template="g-gpus"), containers=cpu,
                       affinity=_required("podAffinity", {"matchLabels": {"role": "leader"}}))
    waiting = room_cycle([*sized_node("node-a"), gpu_template("g-gpus", 1), leader, worker],
                         [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.NODES
    assert "its required pod affinity is met only by other members of its group" in waiting.message


def test_topology_spread_spreads_the_members_and_soft_constraints_do_not_filter() -> None:
    spread = cpu_gang("s", 4, "1", topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": HOSTNAME_LABEL, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {GROUP_LABEL: "s"}}}])
    admitted = cycle(sized_node("node-a") + sized_node("node-b") + spread, [gpu_queue("main", 8)]).decision(f"{NS}/s")
    assert isinstance(admitted, Admit)
    assert sorted(admitted.placement.nodes.values()) == ["node-a", "node-a", "node-b", "node-b"]
    soft = cpu_gang("t", 2, "1", topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": HOSTNAME_LABEL, "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {GROUP_LABEL: "t"}}}])
    admitted = cycle(sized_node("node-a") + sized_node("node-b") + soft, [gpu_queue("main", 8)]).decision(f"{NS}/t")
    assert isinstance(admitted, Admit) and set(admitted.placement.nodes.values()) == {"node-a"}


def test_exclusive_jobs_admitted_in_one_cycle_take_one_zone_each_and_a_third_waits() -> None:
    zone = "topology.kubernetes.io/zone"
    nodes = [m for name, value in (("node-a", "z1"), ("node-b", "z2"))
             for m in [node(name, {HOSTNAME_LABEL: name, zone: value}, allocatable=ALLOCATABLE),
                       resource_slice(name, *(gpu(f"gpu-{i}") for i in range(4)), name=f"{name}-gpus")]]
    jobs = []
    for job in ("j1", "j2", "j3"):
        key = {"key": "job-key", "operator": "In", "values": [job]}
        others = [{"key": "job-key", "operator": "Exists"}, {"key": "job-key", "operator": "NotIn", "values": [job]}]
        affinity = {**_required("podAffinity", {"matchExpressions": [key]}, zone),
                    **_required("podAntiAffinity", {"matchExpressions": others}, zone)}
        for manifest in cpu_gang(job, 2, "1", affinity=affinity):
            if manifest["kind"] == "Pod":
                manifest["metadata"]["labels"]["job-key"] = job
            jobs.append(manifest)
    result = cycle(nodes + jobs, [gpu_queue("main", 16)])
    first, second, third = (result.decision(f"{NS}/{job}") for job in ("j1", "j2", "j3"))
    assert isinstance(first, Admit) and set(first.placement.nodes.values()) == {"node-a"}
    assert isinstance(second, Admit) and set(second.placement.nodes.values()) == {"node-b"}
    assert isinstance(third, Wait) and third.reason is WaitReason.NODES
    assert third.message.endswith("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules")


def test_pod_affinity_by_namespace_selector_makes_the_group_wait_as_unsupported() -> None:
    by_labels = cpu_gang("g", 1, "1", affinity=_required("podAffinity", {"matchLabels": {GROUP_LABEL: "g"}},
                                                         namespaceSelector={"matchLabels": {"team": "a"}}))
    waiting = cycle(sized_node("node-a") + by_labels, [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.UNSUPPORTED
    assert waiting.reason == "UnsupportedConstraint"
    assert waiting.message.startswith(
        f"pod {NS}/g-0 has a required pod affinity term (spec.affinity.podAffinity.requiredDuringScheduling"
        "IgnoredDuringExecution[0]) with a namespaceSelector, which draq does not evaluate")
    every = cpu_gang("h", 1, "1", affinity=_required("podAffinity", {"matchLabels": {GROUP_LABEL: "h"}},
                                                     namespaceSelector={}))
    assert isinstance(cycle(sized_node("node-a") + every, [gpu_queue("main", 8)]).decision(f"{NS}/h"), Admit)


def test_dra_backed_extended_resources_are_allocated_and_charged_as_devices() -> None:
    resource = "deviceclass.resource.kubernetes.io/gpu"  # the implicit name of class gpu
    pods = [with_spec(member("x-0", "x"), containers=[container(requests={"cpu": "1", resource: "2"})])]
    objects = sized_node("node-a") + pods
    plain = cycle_input(objects, [gpu_queue("main", 8)])
    waiting = run_cycle(dataclasses.replace(plain, never_on_cluster=False)).decision(f"{NS}/x")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.NODES
    assert waiting.message.endswith(f"0/1 nodes are available: 1 Insufficient {resource}")
    gated = dataclasses.replace(plain, gates=exactly("1.35", ["DRAExtendedResource"]))
    admitted = run_cycle(gated).decision(f"{NS}/x")
    assert isinstance(admitted, Admit)
    assert admitted.charge.get("gpus") == 2
    assert len(admitted.placement.allocations[f"{NS}/x-0/#extended-resources"].results) == 2
