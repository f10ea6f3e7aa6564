"""Capacity planning: the fewest added nodes, of the given profiles, that let the waiting groups run.

A plan is a count per profile. It works when every target group is admitted by the simulation within the
plan's horizon (0: in the first cycle, on the cluster as it is now). The search:

1. Upper bound: the same count of every profile, doubled from 1, until every target is admitted or no
   target waits for devices or nodes any more (quota, a missing queue, an invalid object: more nodes do
   not help), or the count reaches the number of pods of the waiting groups (no pod needs more than one
   new node; groups ahead of a target in the queue may take nodes first). Targets still waiting there
   are the ones no plan lets run; they are reported with their reason.
2. For each profile alone, and for the mix, the smallest counts by binary search per profile (in the
   mix, one profile at a time, others fixed, repeated until no count drops). Of those, the plan with
   the fewest nodes wins (ties: the earlier candidate).

This assumes more nodes never admit fewer targets; the result is minimal in that no profile's count can
drop by one with the others kept, and optimal whenever one profile suffices.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from admission.core.cycle import WaitReason
from admission.core.models import Model
from admission.core.simulate.cluster import SimulatedCluster
from admission.core.simulate.engine import ProgressHook, SimulationSettings, simulate
from admission.core.simulate.results import Fate, GroupOutcome, SimulationResult

NodeMaker = Callable[[str, int], Sequence[Model]]  # (profile, index) -> the Node and its ResourceSlices
_NODE_REASONS = frozenset({WaitReason.DEVICES.value, WaitReason.NODES.value})


@dataclass(frozen=True, slots=True)
class NodesToAdd:
    counts: Mapping[str, int]  # profile -> nodes to add
    targets: tuple[str, ...]  # the groups the plan is for
    admitted: tuple[str, ...]  # targets admitted with the plan
    unplannable: tuple[GroupOutcome, ...]  # targets no plan lets run, with why (at the upper bound)
    result: SimulationResult  # the simulation with the plan's nodes
    simulations: int  # how many simulations the search ran

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, object]:
        return {"nodes": dict(self.counts), "total": self.total, "targets": list(self.targets),
                "admitted": list(self.admitted), "simulations": self.simulations,
                "cannotRun": [{"group": o.group, "reason": o.reason, "message": o.message} for o in self.unplannable]}

    def lines(self) -> list[str]:
        added = ", ".join(f"{n} × {p}" for p, n in self.counts.items() if n) or "no node"
        out = [f"node plan: add {added} ({self.total} node(s)): {len(self.admitted)} of {len(self.targets)} "
               f"waiting group(s) admitted ({self.simulations} simulations)"]
        if self.unplannable:
            out.append("groups that no added node of these profiles lets run:")
            out += [f"  {o.group}: {o.reason}: {o.message}" for o in self.unplannable]
        return out


class _Search:
    def __init__(self, cluster: SimulatedCluster, settings: SimulationSettings, profiles: Sequence[str],
                 make: NodeMaker, targets: Collection[str], progress: ProgressHook | None) -> None:
        self.cluster, self.settings, self.profiles, self.make = cluster, settings, tuple(profiles), make
        self.targets = tuple(targets)
        self.progress = progress
        self.runs: dict[tuple[int, ...], SimulationResult] = {}

    def run(self, counts: tuple[int, ...]) -> SimulationResult:
        if counts not in self.runs:
            added = [m for profile, n in zip(self.profiles, counts, strict=True) for i in range(n)
                     for m in self.make(profile, i)]
            self.runs[counts] = simulate(self.cluster.with_models(added), self.settings, self.progress,
                                          targets=self.targets)
        return self.runs[counts]

    def admitted(self, counts: tuple[int, ...]) -> set[str]:
        result = self.run(counts)
        return {t for t in self.targets if (o := result.outcome(t)) is not None and o.fate is Fate.ADMITTED}

    def smallest(self, counts: tuple[int, ...], index: int, wanted: set[str]) -> tuple[int, ...]:
        """`counts` with profile `index` as low as it goes while every `wanted` group is still admitted."""
        low, high = 0, counts[index]
        while low < high:
            middle = (low + high) // 2
            trial = (*counts[:index], middle, *counts[index + 1:])
            if wanted <= self.admitted(trial):
                high = middle
            else:
                low = middle + 1
        return (*counts[:index], high, *counts[index + 1:])


def plan_nodes(cluster: SimulatedCluster, settings: SimulationSettings, profiles: Sequence[str], make: NodeMaker,
               targets: Collection[str] | None = None, within: float = 0.0,
               progress: ProgressHook | None = None) -> NodesToAdd:
    """The fewest nodes of `profiles` to add so that `targets` (default: every group the simulation leaves
    waiting after `within` seconds) are admitted within `within` seconds of simulated time."""
    if not profiles:
        raise ValueError("plan_nodes needs at least one profile")
    bounded = replace(settings, horizon=within, never_on_cluster=False)  # the cluster is what the plan changes
    baseline = simulate(cluster, bounded, progress)
    wanted_all = tuple(targets) if targets is not None else tuple(o.group for o in baseline.waiting)
    search = _Search(cluster, bounded, profiles, make, wanted_all, progress)
    search.runs[(0,) * len(profiles)] = baseline
    # No pending pod needs more than one new node: as many nodes of each profile as pending pods is enough
    # for every target, and for the groups ahead of them in the queue.
    waiting = {o.group for o in baseline.waiting}
    cap = max(1, sum(len(g.pods) for g in cluster.groups() if g.key in waiting))
    n = 1
    while True:
        uniform = (n,) * len(profiles)
        result = search.run(uniform)
        missing = [o for t in wanted_all if (o := result.outcome(t)) is not None and o.fate is Fate.WAITING]
        if not missing or n >= cap or not any(o.reason in _NODE_REASONS for o in missing):
            break
        n = min(cap, n * 2)
    reachable = search.admitted(uniform)
    candidates = []
    for index in range(len(profiles)):
        alone = tuple(n if i == index else 0 for i in range(len(profiles)))
        if reachable <= search.admitted(alone):
            candidates.append(search.smallest(alone, index, reachable))
    mix = uniform
    while True:
        before = mix
        for index in range(len(profiles)):
            mix = search.smallest(mix, index, reachable)
        if mix == before:
            break
    candidates.append(mix)
    best = min(candidates, key=sum)
    final = search.run(best)
    admitted = tuple(t for t in wanted_all if (o := final.outcome(t)) is not None and o.fate is Fate.ADMITTED)
    unplannable = tuple(o for t in wanted_all if t not in reachable and (o := result.outcome(t)) is not None)
    return NodesToAdd(dict(zip(profiles, best, strict=True)), wanted_all, admitted, unplannable, final,
                    len(search.runs))
