"""Clusters with running groups for the preemption tests: GPU nodes, groups bound to them holding
their devices, gangs waiting, and the cycle and preemption plan over them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from admission.core.allocator import Allocator, Snapshot, members_for
from admission.core.cycle import (
    CycleInput,
    CycleResult,
    Preemptions,
    charging_inventory,
    rebuild_state,
    run_cycle,
)
from admission.core.cycle.preemption import (
    Holding,
    NoVictims,
    Preemptor,
    SearchInput,
    Victims,
    find_victims,
    nodes_after,
    plan_preemptions,
)
from admission.core.models import Topology
from admission.core.quota import (
    ChargeResult,
    ClusterQueue,
    GroupObjects,
    LocalQueue,
    Placement,
    charge_group,
    device_selected,
)
from tests.support.builders import (
    DRIVER,
    Manifest,
    claim,
    cluster_queue,
    exactly,
    holding,
    local_queue,
    model,
    models,
    pod,
    pod_group,
    quota,
)
from tests.unit.cycle.cycle_builders import GATES, GPU_CLASS, NS, gang, gpu_node, gpu_units, groups_of

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def stamp(minutes_ago: float) -> str:
    return (NOW - dt.timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def queue(name: str, gpus: int, *, cohort: str | None = None, within: str = "Never", reclaim: str = "Never",
          borrow: str = "Never", minimum: int = 0, weight: str | None = None, borrowing: int | None = None,
          lending: int | None = None, topology: str | None = None) -> ClusterQueue:
    manifest = cluster_queue(name, quota("gpus", gpus, borrowing=borrowing, lending=lending), cohort=cohort)
    if topology is not None:
        manifest["spec"]["topologyName"] = topology
    manifest["spec"]["preemption"] = {"withinClusterQueue": within, "reclaimWithinCohort": reclaim,
                                      "borrowWithinCohort": borrow, "minimumRunSeconds": minimum}
    if weight is not None:
        manifest["spec"]["fairSharing"] = {"weight": weight}
    return model(manifest)


@dataclass
class Scene:
    """Nodes of `gpus_per_node` GPUs; running groups placed on named GPUs; gated groups waiting."""

    objects: list[Manifest] = field(default_factory=list)
    records: list[Any] = field(default_factory=list)
    queues: list[ClusterQueue] = field(default_factory=list)
    local: dict[str, LocalQueue] = field(default_factory=dict)
    gpus_taken: dict[str, int] = field(default_factory=dict)  # per node, GPUs given to running groups
    topologies: dict[str, Topology] = field(default_factory=dict)

    def nodes(self, names: Iterable[str], gpus: int = 8, labels: Mapping[str, str] | None = None) -> Scene:
        for name in names:
            manifests = gpu_node(name, gpus)
            manifests[0]["metadata"]["labels"].update(labels or {})
            self.objects.extend(manifests)
        return self

    def topology(self, topology: Topology) -> Scene:
        self.topologies[topology.name] = topology
        return self

    def cluster_queue(self, cq: ClusterQueue) -> Scene:
        self.queues.append(cq)
        lq = model(local_queue(f"lq-{cq.name}", cq.name, NS))
        self.local[lq.key] = lq
        return self

    def running(self, group: str, cq: str, placement: Sequence[tuple[str, int]], *, priority: int = 0,
                admitted_minutes_ago: float = 60) -> Scene:
        """A group bound to nodes: one pod per (node, GPUs) entry, each holding that many GPUs of its node
        (the next free ones)."""
        taken = self.gpus_taken
        pods = []
        for i, (node, count) in enumerate(placement):
            start = taken.get(node, 0)
            taken[node] = start + count
            name = f"{group}-{i}"
            ids = [f"{DRIVER}/{node}/gpu-{k}" for k in range(start, start + count)]
            self.objects.append(claim(f"{name}-gpu", exactly("gpus", count=count), namespace=NS,
                                      allocation=holding(*ids, request="gpus"), reserved_for=[name]))
            self.objects.append(pod(name, NS, queue=f"lq-{cq}", group=group, group_min=len(placement),
                                    claims={"gpu": f"{name}-gpu"}, node=node, phase="Running", priority=priority))
            pods.append(name)
        total = sum(c for _, c in placement)
        status = {"phase": "Running", "clusterQueue": cq, "admittedAt": stamp(admitted_minutes_ago),
                  "charge": [{"unit": "gpus", "amount": str(total)}],
                  "plan": {"pods": [{"name": p, "node": n} for p, (n, _) in zip(pods, placement, strict=True)]}}
        self.records.append(model(pod_group(group, len(placement), f"lq-{cq}", namespace=NS, priority=priority,
                                            status=status)))
        return self

    def waiting(self, group: str, cq: str, size: int, gpus_each: int, *, priority: int = 0,
                topology: Mapping[str, str] | None = None) -> Scene:
        """A gang of `size` gated pods; `topology`: its PodGroup's spec.topology (`{"required": "rack"}`)."""
        self.objects.extend(gang(group, size, gpus_each, queue=f"lq-{cq}", priority=priority))
        record = pod_group(group, size, f"lq-{cq}", namespace=NS, priority=priority, status={})
        if topology:
            record["spec"]["topology"] = dict(topology)
        self.records.append(model(record))
        return self

    def cycle_input(self, now: dt.datetime = NOW) -> CycleInput:
        snapshot = Snapshot.from_models(models(GPU_CLASS, *self.objects))
        groups = groups_of(self.objects, self.records)
        return CycleInput(snapshot, GATES, groups, dict(self.local), gpu_units(),
                          rebuild_state(self.queues, groups), device_selected, now=now,
                          topologies=dict(self.topologies))

    def run(self, now: dt.datetime = NOW) -> tuple[CycleInput, CycleResult, Preemptions]:
        cycle = self.cycle_input(now)
        result = run_cycle(cycle)
        return cycle, result, plan_preemptions(cycle, result)


def search(cycle: CycleInput, result: CycleResult, preemptor: Preemptor,
           allowed: Sequence[Holding], nodes: Sequence[str] | None = None) -> Victims | NoVictims:
    """The victim search for `preemptor` on what the cycle left, among `allowed` only (its members kept to
    `nodes`, when given)."""
    group = next(g for g in cycle.groups if g.key == preemptor.group)
    snapshot = cycle.snapshot
    inventory = charging_inventory(snapshot, cycle.gates)
    objects = GroupObjects(group.pods, snapshot.claims, snapshot.templates)

    def charge(plan: Placement) -> ChargeResult:
        return charge_group(objects, cycle.units, inventory, cycle.matches, plan)

    members = members_for(group.pods, snapshot.claims, snapshot.templates)
    if nodes is not None:
        members = [replace(m, nodes=tuple(nodes)) for m in members]
    data = SearchInput(Allocator(snapshot, cycle.gates), members, charge, result.usage, nodes_after(cycle, result),
                       result.state, cycle.now)
    return find_victims(preemptor, allowed, data)
