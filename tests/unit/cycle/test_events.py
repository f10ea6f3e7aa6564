"""The Event texts and status bodies the operator writes after admission, decided in the core."""

from __future__ import annotations

from fractions import Fraction

from admission.core.cycle import (
    ChargeCorrection,
    GroupEvent,
    LateWait,
    charge_corrected_event,
    late_wait_event,
    requeue,
)
from admission.core.models import ObjectRef
from admission.core.quota import Amounts, Difference, Reconciliation
from tests.unit.cycle.cycle_builders import NS, group_record, groups_of, member


def test_late_members_that_wait_are_a_warning_with_the_cycles_reason() -> None:
    wait = LateWait(f"{NS}/t", "late member(s) t-1 fit on no node now: no free device")
    assert late_wait_event(wait) == GroupEvent("MembersWaiting", wait.message, warning=True)


def test_a_corrected_charge_is_a_warning_that_says_what_changed() -> None:
    reconciliation = Reconciliation((Difference("gpus", Fraction(4), Fraction(2)),))
    correction = ChargeCorrection(f"{NS}/t", Amounts.of([("gpus", Fraction(2))]), reconciliation)
    event = charge_corrected_event(correction)
    assert event.reason == "ChargeCorrected" and event.warning
    assert event.message == "charge now follows the real allocation: gpus: charged 4, allocated 2"


def test_a_requeue_resumes_the_suspended_owners_and_forgets_them() -> None:
    evicted = {"phase": "Evicted", "evictions": 1, "requeueAt": "2026-01-01T12:00:30Z",
               "suspended": [{"kind": "JobSet", "name": "trainer"}], "suspendedJobs": ["worker"]}
    [group] = groups_of([member("t-0", "t")], [group_record("t", 1, status=evicted)])
    resumed = requeue(group)
    assert resumed.group == f"{NS}/t"
    assert resumed.objects == (ObjectRef("Job", NS, "worker"), ObjectRef("JobSet", NS, "trainer"))
    assert resumed.status == {"suspended": None, "suspendedJobs": None}
    assert resumed.event == GroupEvent("Requeued", f"backoff over: resumed Job {NS}/worker, JobSet {NS}/trainer")
