"""The simulation: the operator's admission decision (`cycle.decide`, preemption included) run again and
again on a simulated cluster, with admitted groups finishing after their run time.

Events, not ticks: a cycle runs at the start, then each time one or more running groups finish (all
groups due at the same moment finish together, and one cycle follows), and right after a cycle that
preempted (its victims are gone, as the operator leaves them; a Job's members queue again), until no
group waits, nothing that runs will ever finish, or the horizon is passed. The clock is data: the start
time is given, and simulated time is seconds after it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace

from admission.core.cycle import Admit, GroupView, Wait, decide, victims_of
from admission.core.cycle.timing import parse_time
from admission.core.features import FeatureGates
from admission.core.labels import RUN_TIME_ANNOTATION
from admission.core.simulate.cluster import SimulatedCluster
from admission.core.simulate.results import Fate, GroupOutcome, SimulationResult, claims_of
from admission.core.simulate.workloads import format_duration, parse_duration

DEFAULT_RUN_TIME = 3600.0


@dataclass(frozen=True, slots=True)
class SimulationSettings:
    gates: FeatureGates
    start: dt.datetime  # the snapshot's time: the first cycle runs at it
    default_run_time: float | None = DEFAULT_RUN_TIME  # for groups that declare none; None: they never finish
    run_times: Mapping[str, float | None] = field(default_factory=dict)  # declared, by group key
    horizon: float | None = None  # no cycle after this many seconds
    max_cycles: int = 100_000
    never_on_cluster: bool = True  # False: groups no empty cluster holds wait for devices or nodes (planning)


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
    run = _Run(cluster, settings)
    stopped = f"stopped after {settings.max_cycles} cycles (the limit)"
    while run.cycle < settings.max_cycles:
        waiting, preempted = run.one_cycle()
        if progress is not None:
            progress(Progress(run.cycle, run.t, len(run.admitted), waiting, run.running()))
        if not waiting:
            stopped = "every group was admitted"
            break
        if targets is not None and all(k in run.admitted for k in targets):
            stopped = "every group asked for was admitted"
            break
        if preempted:
            continue  # the victims' room is free now: the next cycle runs at the same moment
        why = run.advance()
        if why:
            stopped = why.format(waiting=waiting)
            break
    return run.result(stopped)


class _Run:
    """One simulation's state: the cluster as the cycles leave it and every group's outcome so far."""

    def __init__(self, cluster: SimulatedCluster, settings: SimulationSettings) -> None:
        self.cluster = cluster
        self.settings = settings
        self.t = 0.0
        self.cycle = 0
        self.ends: dict[str, float | None] = {}  # admitted or held group -> when it finishes (None: never)
        self.held: dict[str, GroupOutcome] = {}
        self.admitted: dict[str, GroupOutcome] = {}
        self.gone: dict[str, GroupOutcome] = {}
        self.waits: dict[str, tuple[Wait, int]] = {}
        self.preempted: dict[str, int] = {}
        for group in cluster.groups():
            if group.holds_quota and group.pod_group is not None:
                record = group.pod_group
                self.ends[group.key] = _remaining(group, settings)
                self.held[group.key] = GroupOutcome(group.key, record.cluster_queue, Fate.HELD, nodes=record.plan.nodes,
                                                    claims=claims_of(record.plan), charge=record.charge,
                                                    borrowed=record.borrowed)

    def one_cycle(self) -> tuple[int, bool]:
        """One decision, as the operator makes it, applied to the cluster: (groups waiting, any preempted)."""
        self.cycle += 1
        now = self.settings.start + dt.timedelta(seconds=self.t)
        cycle_input = self.cluster.cycle_input(self.settings.gates, now)
        result = decide(replace(cycle_input, never_on_cluster=self.settings.never_on_cluster))
        views = {g.key: g for g in cycle_input.groups}
        waiting = 0
        for decision in result.decisions:
            if isinstance(decision, Admit):
                self._admit(views[decision.group], decision, now)
            elif isinstance(decision, Wait):
                waiting += 1
                self.waits[decision.group] = (decision, self.waits.get(decision.group, (decision, 0))[1] + 1)
        for preempt, victim in victims_of(result.preemptions, cycle_input.groups):
            self._preempt(victim, preempt.message)
        return waiting, bool(result.preemptions.preempts)

    def _admit(self, group: GroupView, admit: Admit, now: dt.datetime) -> None:
        self.cluster = self.cluster.admitted(group, admit, now)
        prior = self.waits.pop(group.key, None)
        self.admitted[group.key] = GroupOutcome(
            group.key, admit.cluster_queue, Fate.ADMITTED, self.cycle, self.t, None, admit.plan.nodes,
            claims_of(admit.plan), admit.charge, admit.borrowed, waited_cycles=prior[1] if prior else 0,
            preempted=self.preempted.get(group.key, 0))
        self.ends[group.key] = None if (rt := run_time(group, self.settings)) is None else self.t + rt

    def _preempt(self, victim: GroupView, message: str) -> None:
        self.cluster, gone = self.cluster.preempted(victim)
        self.ends.pop(victim.key, None)
        before = self.admitted.pop(victim.key, None) or self.held.pop(victim.key, None)
        self.preempted[victim.key] = self.preempted.get(victim.key, 0) + 1
        if gone:
            queue = before.cluster_queue if before is not None else ""
            self.gone[victim.key] = GroupOutcome(victim.key, queue, Fate.PREEMPTED, message=message,
                                                 preempted=self.preempted[victim.key])

    def running(self) -> int:
        return sum(1 for k in self.ends if k in self.admitted or k in self.held)

    def advance(self) -> str:
        """To the moment the next running groups finish, which then leave the cluster; or why nothing will
        change any more (`{waiting}` stands for the number of groups waiting)."""
        due = [at for at in self.ends.values() if at is not None]
        if not due:
            return ("nothing that runs will finish" if self.ends else "nothing runs") + \
                ": {waiting} group(s) can never be admitted as things are"
        upcoming = max(self.t, min(due))
        if self.settings.horizon is not None and upcoming > self.settings.horizon:
            return (f"stopped at the horizon (+{format_duration(self.settings.horizon)}): the next running group "
                    f"finishes at +{format_duration(upcoming)}")
        self.t = upcoming
        for key in sorted(k for k, at in self.ends.items() if at is not None and at <= self.t):
            self.cluster = self.cluster.finished(key)
            del self.ends[key]
            self._finished(key, self.t)
        return ""

    def _finished(self, key: str, at: float | None) -> None:
        if key in self.admitted:
            self.admitted[key] = replace(self.admitted[key], finished_after=at)
        elif key in self.held:
            self.held[key] = replace(self.held[key], finished_after=at)

    def result(self, stopped: str) -> SimulationResult:
        for key, at in self.ends.items():  # still running at the end: when they will finish, nothing else changing
            self._finished(key, at)
        still = [GroupOutcome(w.group, w.cluster_queue, Fate.WAITING, reason=w.reason.value, message=w.message,
                              waited_cycles=n, preempted=self.preempted.get(w.group, 0))
                 for w, n in self.waits.values() if w.group not in self.admitted and w.group not in self.gone]
        return SimulationResult((*self.admitted.values(), *sorted(still, key=lambda o: o.group), *self.gone.values(),
                                 *self.held.values()), self.cycle, self.t, stopped)


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
