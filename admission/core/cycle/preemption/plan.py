"""Preemption after an admission cycle: for each group that waits for quota or devices, in the cycle's
order, whom to evict so it can be admitted, and what the victims' records say.

Pure. `plan_preemptions(cycle, result)` looks at the groups `run_cycle` left waiting for quota
(`QuotaExceeded`) or room (`DevicesUnavailable`, `NodesUnavailable`) whose ClusterQueue may preempt,
and searches victims on the snapshot as the cycle left it (its own admissions taken). A victim is
chosen for one preemptor only. While a group evicted earlier still has pods on nodes, nothing is
preempted: the room it frees is not visible yet, and preempting again would evict more than needed.
The preemptor is not admitted in the same pass; it is admitted by a later cycle once its victims'
charge is released and their pods are gone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from admission.core.allocator import Allocator, members_for
from admission.core.cycle.extended import extended_claims_of
from admission.core.cycle.groups import TERMINAL_PHASES, GroupView
from admission.core.cycle.inventory import charging_inventory
from admission.core.cycle.nodes import promised_pods, with_pods
from admission.core.cycle.preemption.domains import find_victims_in_domain
from admission.core.cycle.preemption.holdings import holdings
from admission.core.cycle.preemption.search import NoVictims, Preemptor, SearchInput, Victims, candidates, find_victims
from admission.core.cycle.shape import gang_of
from admission.core.cycle.status import ADMITTED_CONDITION, condition
from admission.core.cycle.timing import format_time
from admission.core.cycle.topology import topology_level
from admission.core.cycle.types import CycleInput, CycleResult, Preempt, Preemptions, Wait, WaitReason
from admission.core.errors import DraqError
from admission.core.models import ObjectRef, TopologyLevel, TopologyMode
from admission.core.nodefit import NodeUsage
from admission.core.quota import (
    GroupObjects,
    Phase,
    Placement,
    charge_group,
    suspended_status,
)

PREEMPTED = "Preempted"
PREEMPTABLE = frozenset({WaitReason.QUOTA, WaitReason.DEVICES, WaitReason.NODES})


def plan_preemptions(cycle: CycleInput, result: CycleResult) -> Preemptions:
    state = result.state
    waiting = [w for w in result.waiting if w.reason in PREEMPTABLE and w.cluster_queue in state.queues
               and state.queue(w.cluster_queue).preemption.enabled]
    if not waiting:
        return Preemptions()
    groups = {g.key: g for g in cycle.groups}
    draining = sorted(g.key for g in cycle.groups if _draining(g))
    if draining:
        note = f"; preemption waits until evicted group(s) {', '.join(draining)} have left their nodes"
        return Preemptions(waits={w.group: _with_note(w, note) for w in waiting})
    snapshot = cycle.snapshot
    allocator = Allocator(snapshot, cycle.gates)
    inventory = charging_inventory(snapshot, cycle.gates)
    nodes = nodes_after(cycle, result)
    held = holdings(cycle.groups, snapshot.claims, state)
    extended = extended_claims_of(snapshot.claims)  # once, not per charge of a placement tried
    taken: set[str] = set()
    preempts: list[Preempt] = []
    waits: dict[str, Wait] = {}
    tries = 0
    for wait in waiting:
        group = groups[wait.group]
        preemptor = Preemptor(group.key, wait.cluster_queue, group.priority)
        allowed = [h for h in candidates(preemptor, held, state, cycle.now) if h.group not in taken]
        gang = gang_of(group)
        try:
            members = members_for(gang.pods, snapshot.claims, snapshot.templates)
        except DraqError:
            continue
        objects = GroupObjects(gang.pods, snapshot.claims, snapshot.templates, extended)

        def charge(plan: Placement, objects: GroupObjects = objects) -> Any:
            return charge_group(objects, cycle.units, inventory, cycle.matches, plan)

        data = SearchInput(allocator, members, charge, result.usage, nodes, state, cycle.now)
        level = _required_level(group, wait.cluster_queue, cycle)
        found = find_victims(preemptor, allowed, data) if level is None else \
            find_victims_in_domain(preemptor, allowed, data, level)
        tries += found.placed_tries
        if isinstance(found, NoVictims):
            waits[wait.group] = _with_note(wait, f"; no preemption: {found.reason}")
            continue
        taken.update(found.victims)
        preempt = Preempt(group.key, wait.cluster_queue, group.priority, found.victims,
                          tuple(sorted(set(found.placements.values()))))
        preempts.append(preempt)
        waits[wait.group] = _with_note(wait, f"; preempting {_names(found)} to make room")
    return Preemptions(tuple(preempts), waits, tries)


def _required_level(group: GroupView, cluster_queue: str, cycle: CycleInput) -> TopologyLevel | None:
    """The level whose one domain the group requires, if it does (a `preferred` group is searched as any)."""
    if group.topology is None or group.topology.mode is not TopologyMode.REQUIRED:
        return None
    level = topology_level(group, cluster_queue, cycle)
    return level if isinstance(level, TopologyLevel) else None


def _names(found: Victims) -> str:
    where = f" in {found.domain}" if found.domain else ""
    return f"group(s) {', '.join(found.victims)}{where}"


def _with_note(wait: Wait, note: str) -> Wait:
    return Wait(wait.group, wait.reason, wait.message + note, wait.cluster_queue)


def _draining(group: GroupView) -> bool:
    pod_group = group.pod_group
    return pod_group is not None and pod_group.phase is Phase.EVICTED and any(
        p.node_name and p.phase not in TERMINAL_PHASES for p in group.pods)


def nodes_after(cycle: CycleInput, result: CycleResult) -> NodeUsage:
    """Node resources as the cycle left them: bound pods, admitted groups' planned pods, and the pods of
    the groups it admitted on their planned nodes."""
    nodes = promised_pods(cycle.groups, cycle.snapshot.node_fit.usage)
    groups = {g.key: g for g in cycle.groups}
    for admit in result.admitted:
        nodes = with_pods(nodes, gang_of(groups[admit.group]).pods, admit.placement.nodes)
    return nodes


# ----- what the victims' records say ------------------------------------------------------------------
def preempted_status(preempt: Preempt, victim: GroupView, now: dt.datetime,
                     suspended: Iterable[ObjectRef] = ()) -> dict[str, Any]:
    """The durable record of a preemption, written before any member is removed: phase Evicted, charge
    and plan cleared, requeued at once (no backoff: the group did nothing wrong)."""
    stamp = format_time(now)
    evictions = victim.pod_group.evictions if victim.pod_group is not None else 0
    message = preempted_message(preempt, victim)
    return {"phase": Phase.EVICTED.value, "message": message, "members": len(victim.pods),
            "evictions": evictions, "requeueAt": stamp, "charge": None, "plan": None,
            "suspended": suspended_status(suspended), "suspendedJobs": None,
            "conditions": [condition(ADMITTED_CONDITION, False, PREEMPTED, message, stamp)]}


def preempted_message(preempt: Preempt, victim: GroupView) -> str:
    """What a preempted group is told (its record and its Event): who preempted it and, when members have no
    controller to recreate them (bare pods), that those are deleted for good."""
    bare = sorted(p.name for p in victim.pods if p.meta.controller is None)
    if not bare:
        return preempt.message
    return (f"{preempt.message}; pod(s) {', '.join(bare)} have no controller to recreate them: they are deleted "
            "for good and must be created again to run")


def victims_of(plan: Preemptions, groups: Sequence[GroupView]) -> list[tuple[Preempt, GroupView]]:
    by_key = {g.key: g for g in groups}
    return [(p, by_key[v]) for p in plan.preempts for v in p.victims if v in by_key]
