"""Objects that do not parse: what they may still hold, and the queues whose usage that makes unknown."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.errors import DraqError
from admission.core.quota import AccountingError, Admission, Amounts, ClusterQueue, QueueState
from admission.core.quota.unreadable import Unreadable, unreadable, with_unreadable
from tests.support.builders import cluster_queue, model, pod_group, quota

GPUS = Amounts.of({"gpus": 1})
ERROR = DraqError("PodGroup team/g, field status.charge[0].amount: 'lots' is not a quantity")


def record(status: dict[str, Any]) -> Unreadable:
    return unreadable("PodGroup", pod_group("g", 1, "lq", namespace="team", status=status), ERROR)


@pytest.mark.parametrize("status", [{}, {"phase": "Pending"}, {"phase": "Finished"}, {"phase": "Evicted"}])
def test_a_record_that_holds_no_quota_affects_no_queue(status: dict[str, Any]) -> None:
    assert record(status).holds_quota_in == ""


@pytest.mark.parametrize(("status", "queue"), [
    ({"phase": "Admitted", "clusterQueue": "main"}, "main"),
    ({"phase": "Running", "clusterQueue": "main"}, "main"),
    ({"phase": "Running"}, None),  # charged somewhere, but where cannot be told
    ({"phase": ["Running"], "clusterQueue": "main"}, "main"),  # a phase that cannot be read may hold quota
])
def test_a_record_that_may_hold_quota_names_its_queue(status: dict[str, Any], queue: str | None) -> None:
    found = record(status)
    assert (found.label, found.reason, found.holds_quota_in) == ("PodGroup team/g", str(ERROR), queue)


@pytest.mark.parametrize(("spec", "cohort"), [({}, ""), ({"cohort": "pool"}, "pool"), ({"cohort": 7}, None)])
def test_an_unreadable_cluster_queue_declares_its_cohort(spec: dict[str, Any], cohort: str | None) -> None:
    manifest = {**cluster_queue("x"), "spec": spec}
    assert unreadable("ClusterQueue", manifest, ERROR).cohort == cohort


def queues() -> list[ClusterQueue]:
    return [model(cluster_queue(name, quota("gpus", 4), cohort=cohort))
            for name, cohort in (("a", "pool"), ("b", "pool"), ("c", None), ("d", "other"))]


def test_an_unreadable_record_stops_its_queue_and_its_cohort_only() -> None:
    state = with_unreadable(QueueState.empty(queues()), [record({"phase": "Running", "clusterQueue": "a"})])
    for name in ("a", "b"):
        fit = state.fits(name, GPUS)
        assert not fit.ok and "PodGroup team/g records an admission that cannot be read" in fit.reason
        with pytest.raises(AccountingError, match="usage unknown"):
            state.admit("team/h", name, GPUS)
    assert state.fits("c", GPUS).ok and state.fits("d", GPUS).ok
    assert state.usage_unknown("c") == ""


def test_a_record_charged_to_an_unknown_queue_stops_every_queue() -> None:
    state = with_unreadable(QueueState.empty(queues()), [record({"phase": "Running"})])
    assert all(not state.fits(q.name, GPUS).ok for q in queues())


def test_an_unreadable_cluster_queue_stops_its_cohort_only_while_it_holds_admissions() -> None:
    broken = Unreadable("ClusterQueue", "x", "ClusterQueue x, field spec.quotas[0].nominal: ...", cohort="pool")
    empty = QueueState.empty(queues())
    assert with_unreadable(empty, [broken]).unknown == {}  # it lends nothing and borrows nothing
    holding = with_unreadable(empty.restore(Admission("team/g", "x", GPUS)), [broken])
    assert sorted(holding.unknown) == ["a", "b"]
    assert "ClusterQueue x of cohort pool holds admissions but cannot be read" in holding.usage_unknown("b")
    assert holding.fits("c", GPUS).ok and holding.fits("d", GPUS).ok
