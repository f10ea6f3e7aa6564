"""Fault injection in the accounting: random sequences of admit / bind / evict / finish, record writes that
fail, records edited by hand (and repaired), and crashes after which the usage is rebuilt from the PodGroups.

`test_accounting_properties.py` drives `QueueState` alone; here the PodGroup records are the source of
truth, written as the operator writes them (`admitted_status`, `phase_change`, `evicted_status`, merged
into the status as a merge patch does) and read back as the operator reads them after a restart (parsed,
the unreadable ones named, `rebuild_state`). After every step:

- the usage of every queue equals the sum of the live charges it can read (Admitted: reserved, Running:
  used);
- no queue is over quota, counting also the charges of records that cannot be read, which the cluster
  still holds: at most nominal without a cohort, nominal + borrowingLimit with one, and what a cohort's
  members use beyond their guaranteed share fits in what they lend;
- a crash and a rebuild from the PodGroups gives the state held before the crash.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from admission.core.cycle import Admit, Evict, collect_groups, evicted_status, phase_change, rebuild_state
from admission.core.cycle.status import admitted_status
from admission.core.errors import DraqError
from admission.core.quota import (
    NONE,
    Amounts,
    ClusterQueue,
    Phase,
    Placement,
    Plan,
    PodGroup,
    QueueQuota,
    QueueState,
    parse_pod_group,
)
from admission.core.quota.unreadable import Unreadable, unreadable
from tests.support.builders import pod_group
from tests.unit.quota.test_accounting_properties import UNITS, charges, cohorts

NS = "team"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
STAMP = "2026-01-01T00:00:00Z"
EDITED = [{"unit": "gpus", "amount": "lots"}]  # a charge edited by hand: not a quantity

Ops = list[tuple[str, int, int, Amounts]]
STEPS = ["admit", "admit", "admit", "lost write", "bind", "bind", "evict", "finish", "crash", "edit", "repair"]
operations = st.lists(st.tuples(st.sampled_from(STEPS), st.integers(0, 3), st.integers(0, 5), charges),
                      max_size=40)


def merged(status: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch of a status (RFC 7386): None removes a field."""
    result = dict(status)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


@dataclass
class Cluster:
    """PodGroup records as the operator wrote them, what the groups really hold, and the operator's state."""

    queues: list[ClusterQueue]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # group key -> PodGroup manifest
    holding: dict[str, tuple[str, Amounts]] = field(default_factory=dict)  # admitted group -> (queue, charge)
    edited: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # group key -> charge before the edit
    state: QueueState = field(init=False)

    def __post_init__(self) -> None:
        self.state = QueueState.empty(self.queues)

    # ----- reading the records back, as after a restart ---------------------------------------------
    def read(self) -> tuple[list[PodGroup], list[Unreadable]]:
        parsed, bad = [], []
        for manifest in self.records.values():
            try:
                parsed.append(parse_pod_group(manifest))
            except DraqError as err:
                bad.append(unreadable("PodGroup", manifest, err))
        return parsed, bad

    def rebuild(self) -> QueueState:
        parsed, bad = self.read()
        groups = collect_groups([], parsed, None, {b.key: b.reason for b in bad})
        return rebuild_state(self.queues, groups, bad)

    # ----- the operator's writes --------------------------------------------------------------------
    def write(self, group: str, patch: dict[str, Any]) -> None:
        name = group.split("/")[1]
        queue = self.holding[group][0]
        record = self.records.get(group) or pod_group(name, 1, f"lq-{queue}", namespace=NS)
        self.records[group] = {**record, "status": merged(record.get("status") or {}, patch)}

    def phase(self, group: str) -> str:
        return str((self.records.get(group) or {}).get("status", {}).get("phase", ""))

    def admit(self, group: str, queue: str, charge: Amounts) -> Admit | None:
        if group in self.records:  # a PodGroup's queue cannot be changed: it is admitted there again
            queue = self.records[group]["spec"]["queue"].removeprefix("lq-")
        fit = self.state.fits(queue, charge)
        if group in self.holding or not fit.ok:
            return None
        self.state = self.state.admit(group, queue, charge, f"{NS}/lq-{queue}")
        return Admit(group, queue, f"{NS}/lq-{queue}", charge, fit.borrowed, Plan(), Placement())


def step(cluster: Cluster, op: str, queue: str, group: str, charge: Amounts) -> None:
    """One of the operator's writes (a write that fails included), or a fault."""
    live = group in cluster.holding and group not in cluster.edited  # the operator can act on it
    if op == "admit" and (admit := cluster.admit(group, queue, charge)) is not None:
        cluster.holding[group] = (admit.cluster_queue, charge)
        cluster.write(group, admitted_status(admit, 1, STAMP))
    elif op == "lost write" and cluster.admit(group, queue, charge) is not None:
        before = cluster.rebuild()  # the status write failed (409): the next pass reads the records again
        cluster.state = before
        assert group not in before.admissions
    elif op == "bind" and live and cluster.phase(group) == Phase.ADMITTED.value:
        cluster.write(group, phase_change(Phase.RUNNING, 1).status)
        cluster.state = cluster.state.bind(group)
    elif op == "evict" and live and cluster.phase(group) == Phase.ADMITTED.value:
        evict = Evict(group, cluster.holding[group][0], "not bound in time", 1, NOW)
        cluster.write(group, evicted_status(evict, 1, NOW))
        cluster.state = cluster.state.evict(group)
        del cluster.holding[group]
    elif op == "finish" and live:
        cluster.write(group, phase_change(Phase.FINISHED, 1).status)
        cluster.state = cluster.state.finish(group)
        del cluster.holding[group]
    else:
        fault(cluster, op, group, live)


def fault(cluster: Cluster, op: str, group: str, live: bool) -> None:
    """A crash (the state rebuilt from the records), a record edited by hand, or one repaired."""
    if op == "crash":
        rebuilt = cluster.rebuild()
        assert accounts(rebuilt, cluster.queues) == accounts(cluster.state, cluster.queues)
        cluster.state = rebuilt
    elif op == "edit" and live:
        cluster.edited[group] = cluster.records[group]["status"].get("charge") or []
        cluster.write(group, {"charge": EDITED})
        cluster.state = cluster.rebuild()  # the next pass reads the edited record
    elif op == "repair" and group in cluster.edited:
        cluster.write(group, {"charge": cluster.edited.pop(group) or None})
        cluster.state = cluster.rebuild()


def accounts(state: QueueState, queues: list[ClusterQueue]) -> tuple[Any, ...]:
    """What the state says, comparable across rebuilds (a queue with nothing left has no entry after one)."""
    per_queue = {q.name: (state.used.get(q.name, NONE), state.reserved.get(q.name, NONE)) for q in queues}
    return dict(state.admissions), per_queue, dict(state.unknown)


def run(queues: list[ClusterQueue], ops: Ops) -> Iterator[Cluster]:
    cluster = Cluster(queues)
    for op, queue_index, group_index, charge in ops:
        step(cluster, op, queues[queue_index % len(queues)].name, f"{NS}/g{group_index}", charge)
        yield cluster


@settings(max_examples=300, deadline=None)
@given(cohorts(), operations)
def test_usage_equals_the_live_charges_the_records_say(queues: list[ClusterQueue], ops: Ops) -> None:
    for cluster in run(queues, ops):
        parsed, _ = cluster.read()
        for queue in queues:
            live = [g for g in parsed if g.holds_quota and g.cluster_queue == queue.name]
            assert cluster.state.usage(queue.name) == sum((g.charge for g in live), NONE)
            running = [g.charge for g in live if g.phase is Phase.RUNNING]
            assert cluster.state.used.get(queue.name, NONE) == sum(running, NONE)
        if not cluster.edited:
            assert cluster.state.unknown == {}


@settings(max_examples=300, deadline=None)
@given(cohorts(), operations)
def test_no_queue_is_ever_over_quota_even_with_records_that_cannot_be_read(queues: list[ClusterQueue],
                                                                          ops: Ops) -> None:
    for cluster in run(queues, ops):
        held = {q.name: sum((c for name, c in cluster.holding.values() if name == q.name), NONE) for q in queues}
        for queue in queues:
            for quota in queue.quotas:
                limit = queue_limit(queue, quota)
                assert limit is None or held[queue.name].get(quota.unit) <= limit
        for cohort in {q.cohort for q in queues if q.cohort}:
            for unit in UNITS:
                above, lendable = cohort_use(cohort, unit, queues, held)
                assert above <= lendable


def queue_limit(queue: ClusterQueue, quota: QueueQuota) -> Fraction | None:
    """The most a queue may hold of a unit: nominal alone, plus borrowingLimit in a cohort (None: no limit)."""
    if queue.cohort is None:
        return quota.nominal.value
    return None if quota.borrowing_limit is None else quota.nominal.value + quota.borrowing_limit.value


def cohort_use(cohort: str, unit: str, queues: list[ClusterQueue],
               held: dict[str, Amounts]) -> tuple[Fraction, Fraction]:
    """What a cohort's members hold of `unit` beyond their guaranteed share, and what they lend."""
    above = lendable = Fraction(0)
    for member in (q for q in queues if q.cohort == cohort):
        quota = member.quota(unit)
        if quota is None:
            continue
        lend = quota.lending_limit.value if quota.lending_limit is not None else quota.nominal.value
        lendable += lend
        above += max(Fraction(0), held[member.name].get(unit) - (quota.nominal.value - lend))
    return above, lendable


@settings(max_examples=200, deadline=None)
@given(cohorts(), operations)
def test_a_crash_after_any_step_rebuilds_the_state_held_before_it(queues: list[ClusterQueue], ops: Ops) -> None:
    for cluster in run(queues, ops):
        assert accounts(cluster.rebuild(), queues) == accounts(cluster.state, queues)
