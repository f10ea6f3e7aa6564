"""The simulation: the operator's admission cycle run again and again on a simulated cluster, with
admitted groups finishing after their run time.

Events, not ticks: a cycle runs at the start, then each time one or more running groups finish (all
groups due at the same moment finish together, and one cycle follows), until no group waits, nothing
that runs will ever finish, or the horizon is passed. The clock is data: the start time is given, and
simulated time is seconds after it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace

from admission.core.cycle import Admit, GroupView, Wait, run_cycle
from admission.core.cycle.timing import parse_time
from admission.core.features import FeatureGates
from admission.core.labels import RUN_TIME_ANNOTATION
from admission.core.simulate.cluster import SimulatedCluster
from admission.core.simulate.results import Fate, GroupOutcome, SimulationResult, claims_of
from admission.core.simulate.workloads import parse_duration

DEFAULT_RUN_TIME = 3600.0


@dataclass(frozen=True, slots=True)
class SimulationSettings:
    gates: FeatureGates
    start: dt.datetime  # the snapshot's time: the first cycle runs at it
    default_run_time: float | None = DEFAULT_RUN_TIME  # for groups that declare none; None: they never finish
    run_times: Mapping[str, float | None] = field(default_factory=dict)  # declared, by group key
    horizon: float | None = None  # no cycle after this many seconds
    max_cycles: int = 100_000


@dataclass(frozen=True, slots=True)
class Progress:
    cycle: int
    after: float  # simulated seconds
    admitted: int  # so far
    waiting: int  # after this cycle
    running: int  # admitted groups not finished


ProgressHook = Callable[[Progress], None]


def run_time(group: GroupView, settings: SimulationSettings) -> float | None:
    """The declared run time (PodGroup or member annotation `draq.io/run-time`), else the default."""
    if group.key in settings.run_times:
        return settings.run_times[group.key]
    declared = [p.annotations[RUN_TIME_ANNOTATION] for p in group.pods if RUN_TIME_ANNOTATION in p.annotations]
    if declared:
        times = [parse_duration(text, f"group {group.key}, annotation {RUN_TIME_ANNOTATION}") for text in declared]
        return None if any(t is None for t in times) else max(t for t in times if t is not None)
    return settings.default_run_time


def simulate(cluster: SimulatedCluster, settings: SimulationSettings, progress: ProgressHook | None = None,
             targets: Collection[str] | None = None) -> SimulationResult:
    """Run cycles until the queue drains or nothing changes any more. With `targets`, stop as soon as every
    one of them is admitted (the node plan's search asks no more)."""
    t = 0.0
    ends: dict[str, float | None] = {}  # admitted or held group -> when it finishes (None: never)
    held: dict[str, GroupOutcome] = {}
    for group in cluster.groups():
        if group.holds_quota and group.pod_group is not None:
            ends[group.key] = _remaining(group, settings)
            held[group.key] = GroupOutcome(group.key, group.pod_group.cluster_queue, Fate.HELD,
                                           nodes=group.pod_group.plan.nodes, claims=claims_of(group.pod_group.plan),
                                           charge=group.pod_group.charge, borrowed=group.pod_group.borrowed)
    admitted: dict[str, GroupOutcome] = {}
    waits: dict[str, tuple[Wait, int]] = {}
    cycle = 0
    stopped = f"stopped after {settings.max_cycles} cycles (the limit)"
    while cycle < settings.max_cycles:
        cycle += 1
        now = settings.start + dt.timedelta(seconds=t)
        cycle_input = cluster.cycle_input(settings.gates, now)
        result = run_cycle(cycle_input)
        views = {g.key: g for g in cycle_input.groups}
        waiting = 0
        for decision in result.decisions:
            if isinstance(decision, Admit):
                group = views[decision.group]
                cluster = cluster.admitted(group, decision, now)
                prior = waits.pop(group.key, None)
                admitted[group.key] = GroupOutcome(
                    group.key, decision.cluster_queue, Fate.ADMITTED, cycle, t, None, decision.plan.nodes,
                    claims_of(decision.plan), decision.charge, decision.borrowed,
                    waited_cycles=prior[1] if prior else 0)
                ends[group.key] = None if (rt := run_time(group, settings)) is None else t + rt
            elif isinstance(decision, Wait):
                waiting += 1
                waits[decision.group] = (decision, waits.get(decision.group, (decision, 0))[1] + 1)
        if progress is not None:
            progress(Progress(cycle, t, len(admitted), waiting,
                              sum(1 for k in ends if k in admitted or k in held)))
        if not waiting:
            stopped = "every group was admitted"
            break
        if targets is not None and all(k in admitted for k in targets):
            stopped = "every group asked for was admitted"
            break
        due = [at for at in ends.values() if at is not None]
        if not due:
            stopped = ("nothing that runs will finish" if ends else "nothing runs") + \
                f": {waiting} group(s) can never be admitted as things are"
            break
        upcoming = max(t, min(due))
        if settings.horizon is not None and upcoming > settings.horizon:
            stopped = f"the next group finishes after the horizon (+{settings.horizon:g}s)"
            break
        t = upcoming
        for key in sorted(k for k, at in ends.items() if at is not None and at <= t):
            cluster = cluster.finished(key)
            del ends[key]
            if key in admitted:
                admitted[key] = replace(admitted[key], finished_after=t)
            else:
                held[key] = replace(held[key], finished_after=t)
    for key, at in ends.items():  # still running at the end: when they will finish, nothing else changing
        if key in admitted:
            admitted[key] = replace(admitted[key], finished_after=at)
        elif key in held:
            held[key] = replace(held[key], finished_after=at)
    still = [GroupOutcome(w.group, w.cluster_queue, Fate.WAITING, reason=w.reason.value, message=w.message,
                          waited_cycles=n) for w, n in waits.values()]
    return SimulationResult((*admitted.values(), *sorted(still, key=lambda o: o.group), *held.values()),
                            cycle, t, stopped)


def _remaining(group: GroupView, settings: SimulationSettings) -> float | None:
    """A group admitted before the snapshot runs for what is left of its run time (counted from its
    admission); one already past it finishes right after the first cycle."""
    total = run_time(group, settings)
    if total is None:
        return None
    assert group.pod_group is not None
    since = parse_time(group.pod_group.admitted_at)
    elapsed = (settings.start - since).total_seconds() if since is not None else 0.0
    return max(0.0, total - elapsed)
