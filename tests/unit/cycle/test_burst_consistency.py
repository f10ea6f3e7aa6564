"""A burst of one-pod groups against a scheduler that lags and chooses its own devices.

draq pins each released member to a node; the scheduler then allocates any free device of that node, and
draq sees the binding and the allocation each at its own later cycle (two watches). The claim controller
makes each member's claim from its template at a later cycle too, so some groups are admitted before
their claim exists. Over seeded runs, no
node may ever be given more pinned members than it has free devices: the scheduler must always find one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from admission.core.allocator import Snapshot
from admission.core.cycle import (
    Admit,
    admitted_status,
    collect_groups,
    cycle_input,
    decide,
    next_phase,
    phase_change,
    rebuild_state,
)
from admission.core.quota import Phase
from tests.support.builders import Manifest, claim, exactly, models, pod, pod_group, result
from tests.unit.cycle.cycle_builders import (
    GATES,
    GPU_CLASS,
    LOCAL_QUEUES,
    NS,
    gpu_node,
    gpu_queue,
    gpu_template,
    gpu_units,
)

NODES, GPUS = 6, 4


@dataclass
class Member:
    """One group's pod and claim: what is true, and what draq has seen of it."""

    name: str
    claim_made: bool = False  # by the claim controller, from the member's template
    node: str = ""  # pinned by draq
    device: str = ""  # allocated by the scheduler
    bound: bool = False
    seen_bound: bool = False
    seen_device: str = ""
    record: dict[str, Any] = field(default_factory=dict)


class Burst:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.taken = {f"node-{n}": set[str]() for n in range(NODES)}
        self.others: list[Manifest] = []
        for n in range(NODES):  # other workloads hold some GPUs already
            for g in self.rng.sample(range(GPUS), self.rng.randint(0, GPUS - 1)):
                self.taken[f"node-{n}"].add(f"gpu-{g}")
                self.others.append(claim(f"other-{n}-{g}", exactly("gpus"), namespace="other",
                                         allocation=[result("gpus", f"gpu-{g}", f"node-{n}")]))
        self.members: list[Member] = []

    def objects(self) -> list[Manifest]:
        objects: list[Manifest] = [*self.others, gpu_template("one-gpu", 1)]
        for n in range(NODES):
            objects.extend(gpu_node(f"node-{n}", gpus=GPUS))
        for m in self.members:
            objects.append(pod(m.name, NS, queue="lq", group=m.name, group_min=1, gated=not m.record,
                               templates={"gpu": "one-gpu"},
                               claim_statuses={"gpu": f"{m.name}-gpu"} if m.claim_made else None,
                               node=m.node if m.seen_bound else None, phase="Running" if m.seen_bound else None))
            if m.claim_made:
                allocation = [result("gpus", m.seen_device, m.node)] if m.seen_device else None
                objects.append(claim(f"{m.name}-gpu", exactly("gpus"), namespace=NS, allocation=allocation))
        return objects

    def records(self) -> list[Any]:
        return models(*(pod_group(m.name, 1, "lq", namespace=NS, status=m.record) for m in self.members if m.record))

    def cycle(self) -> None:
        objects = self.objects()
        snapshot = Snapshot.from_models(models(GPU_CLASS, *objects))
        pods = list(snapshot.pods.values())
        groups = collect_groups(pods, self.records())
        queues = [gpu_queue("main", 1000)]
        by_name = {m.name: m for m in self.members}
        for group in groups:  # the phase draq writes from what it sees
            phase = next_phase(group)
            if phase is Phase.RUNNING:
                by_name[group.name].record = {**by_name[group.name].record, **phase_change(phase, 1).status}
        groups = collect_groups(pods, self.records())
        decided = decide(cycle_input(snapshot, GATES, groups, rebuild_state(queues, groups),
                                     {q.key: q for q in LOCAL_QUEUES}, gpu_units()))
        for decision in decided.decisions:
            if isinstance(decision, Admit):
                member = by_name[decision.group.split("/")[1]]
                member.record = admitted_status(decision, 1, "2026-01-01T00:00:00Z")
                member.node = decision.placement.nodes[f"{NS}/{member.name}"]

    def schedule(self) -> None:
        """The scheduler binds some released members on their pinned nodes, on devices of its choice."""
        for m in self.members:
            if m.record and m.claim_made and not m.bound and self.rng.random() < 0.5:
                free = sorted({f"gpu-{g}" for g in range(GPUS)} - self.taken[m.node])
                assert free, f"{m.name} was pinned to {m.node}, which has no free GPU left"
                m.device = self.rng.choice(free)
                self.taken[m.node].add(m.device)
                m.bound = True

    def watch(self) -> None:
        """draq's two watches deliver bindings and allocations independently, each late at random."""
        for m in self.members:
            if not m.claim_made and self.rng.random() < 0.4:
                m.claim_made = True
            if m.bound and not m.seen_bound and self.rng.random() < 0.5:
                m.seen_bound = True
            if m.bound and not m.seen_device and self.rng.random() < 0.5:
                m.seen_device = m.device


@pytest.mark.parametrize("seed", range(12))
def test_no_node_gets_more_pinned_members_than_free_devices(seed: int) -> None:
    print(f"seed {seed}")
    burst = Burst(seed)
    count = 0
    for _ in range(20):
        for _ in range(burst.rng.randint(0, 4)):
            burst.members.append(Member(f"g-{count:03d}"))
            count += 1
        burst.cycle()
        burst.schedule()
        burst.watch()
    assert sum(m.bound for m in burst.members) >= NODES, "the run admitted and bound members on the nodes"
