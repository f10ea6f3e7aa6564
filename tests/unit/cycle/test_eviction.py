"""Groups admitted but not bound in time: which are overdue, their record, and their backoff."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from admission.core.cycle import DEFAULT_BIND_TIMEOUT, WaitReason, evicted_status, overdue, run_cycle
from admission.core.cycle.timing import backoff_seconds
from admission.core.models import ObjectRef
from admission.core.quota import ClusterQueue, LocalQueue, PodGroup
from tests.unit.cycle.cycle_builders import NS, cycle_input, gang, gpu_node, gpu_queue, group_record, groups_of, member

ADMITTED_AT = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def admitted(name: str, nodes: dict[str, str], **status: object) -> PodGroup:
    body = {"phase": "Admitted", "admittedAt": "2026-01-01T12:00:00Z", "clusterQueue": "main",
            "charge": [{"unit": "gpus", "amount": "8"}],
            "plan": {"pods": [{"name": pod, "node": node} for pod, node in nodes.items()]}, **status}
    return group_record(name, len(nodes), status=body)


def test_backoff_doubles_from_thirty_seconds_to_half_an_hour() -> None:
    assert [backoff_seconds(n) for n in (1, 2, 3, 4, 7, 20)] == [30, 60, 120, 240, 1800, 1800]


def test_a_group_not_all_bound_after_its_timeout_is_overdue_and_names_who_is_missing() -> None:
    pods = [member("t-0", "t", gated=False, node="node-a"), member("t-1", "t", gated=False)]
    groups = groups_of(pods, [admitted("t", {"t-0": "node-a", "t-1": "node-b"})])
    queues = {"main": ClusterQueue("main")}
    assert overdue(groups, queues, ADMITTED_AT + dt.timedelta(seconds=DEFAULT_BIND_TIMEOUT)) == ()
    [evict] = overdue(groups, queues, ADMITTED_AT + dt.timedelta(seconds=DEFAULT_BIND_TIMEOUT + 1))
    assert evict.group == f"{NS}/t" and evict.evictions == 1
    assert "t-1 not bound" in evict.message and "within 300s" in evict.message
    assert evict.requeue_at == ADMITTED_AT + dt.timedelta(seconds=DEFAULT_BIND_TIMEOUT + 1 + 30)


def test_the_queues_own_timeout_wins_and_a_bound_group_is_never_overdue() -> None:
    quick = {"main": ClusterQueue("main", bind_timeout_seconds=60)}
    waiting = groups_of([member("t-0", "t", gated=False)], [admitted("t", {"t-0": "node-a"})])
    assert len(overdue(waiting, quick, ADMITTED_AT + dt.timedelta(seconds=61))) == 1
    bound = groups_of([member("t-0", "t", gated=False, node="node-a")], [admitted("t", {"t-0": "node-a"})])
    assert overdue(bound, quick, ADMITTED_AT + dt.timedelta(days=1)) == ()


def test_a_second_eviction_backs_off_longer() -> None:
    groups = groups_of([member("t-0", "t", gated=False)], [admitted("t", {"t-0": "node-a"}, evictions=1)])
    now = ADMITTED_AT + dt.timedelta(hours=1)
    [evict] = overdue(groups, {"main": ClusterQueue("main")}, now)
    assert evict.evictions == 2 and evict.requeue_at == now + dt.timedelta(seconds=60)


def test_the_eviction_record_releases_the_charge_and_says_when_it_is_retried() -> None:
    groups = groups_of([member("t-0", "t", gated=False)], [admitted("t", {"t-0": "node-a"})])
    now = ADMITTED_AT + dt.timedelta(hours=1)
    [evict] = overdue(groups, {"main": ClusterQueue("main")}, now)
    status = evicted_status(evict, 1, now, [ObjectRef("Job", NS, "trainer")])
    assert status["phase"] == "Evicted" and status["charge"] is None and status["plan"] is None
    assert status["requeueAt"] == "2026-01-01T13:00:30Z" and status["suspended"] == [{"kind": "Job", "name": "trainer"}]
    assert status["conditions"][0]["reason"] == "NotBoundInTime"


def test_an_evicted_group_waits_out_its_backoff_then_is_admitted() -> None:
    objects = gpu_node("node-a") + gang("t", 1, 4)
    evicted = group_record("t", 1, status={"phase": "Evicted", "evictions": 1, "requeueAt": "2026-01-01T12:00:30Z"})
    queues = [gpu_queue("main", 8)]
    local = (LocalQueue(NS, "lq", "main"),)
    early = run_cycle(replace(cycle_input(objects, queues, local, [evicted]), now=ADMITTED_AT))
    [wait] = early.waiting
    assert wait.reason is WaitReason.BACKOFF and "after 2026-01-01T12:00:30Z" in wait.message
    after = ADMITTED_AT + dt.timedelta(seconds=31)
    later = run_cycle(replace(cycle_input(objects, queues, local, [evicted]), now=after))
    assert [a.group for a in later.admitted] == [f"{NS}/t"]
