from fractions import Fraction

import pytest

from admission.core.quota.accounting import AccountingError, Admission, QueueState
from admission.core.quota.amounts import Amounts
from tests.support.builders import cluster_queue, models, quota


def gpus(n: int | Fraction) -> Amounts:
    return Amounts.of({"gpus": n})


def test_fits_within_nominal_and_refuses_beyond_it_naming_the_numbers() -> None:
    state = QueueState.empty(models(cluster_queue("research", quota("gpus", 16)))).admit("ns/a", "research", gpus(12))
    assert state.fits("research", gpus(4)).ok
    decision = state.fits("research", gpus(5))
    assert not decision.ok
    assert decision.units == ("gpus",)
    assert "unit gpus: 12 in use of nominal 16, needs 5, only 4 available" in decision.reason
    assert decision.reason.startswith("ClusterQueue research")


def test_unit_without_quota_is_not_limited_but_still_tracked() -> None:
    state = QueueState.empty(models(cluster_queue("q", quota("gpus", 1))))
    charge = Amounts.of({"cpu": 1000, "gpus": 1})
    assert state.fits("q", charge).ok
    state = state.admit("ns/g", "q", charge)
    assert state.usage("q").get("cpu") == 1000
    assert state.summary("q") == "gpus 1/1, cpu 1k"


def test_borrowing_from_cohort_respects_borrowing_limit() -> None:
    state = QueueState.empty(models(
        cluster_queue("a", quota("gpus", 8, borrowing=4), cohort="pool"),
        cluster_queue("b", quota("gpus", 8), cohort="pool"),
    ))
    # a may use 8 + 4; b lends all of its idle 8.
    assert state.fits("a", gpus(12)).ok
    assert state.fits("a", gpus(12)).borrowed == gpus(4)
    refused = state.fits("a", gpus(13))
    assert not refused.ok and "borrowing from cohort pool, limit 4" in refused.reason
    state = state.admit("ns/x", "a", gpus(12))
    assert state.borrowed("a") == gpus(4)
    # b has 4 left of its own nominal 8 now.
    assert state.available("b", "gpus") == 4
    assert not state.fits("b", gpus(5)).ok


def test_lending_limit_keeps_part_of_nominal_for_the_owner() -> None:
    state = QueueState.empty(models(
        cluster_queue("a", quota("gpus", 0), cohort="pool"),
        cluster_queue("b", quota("gpus", 10, lending=3), cohort="pool"),
    ))
    assert state.available("a", "gpus") == 3
    state = state.admit("ns/x", "a", gpus(3))
    assert not state.fits("a", gpus(1)).ok
    # b keeps its guaranteed 7.
    assert state.available("b", "gpus") == 7


def test_no_cohort_means_no_borrowing() -> None:
    state = QueueState.empty(models(cluster_queue("a", quota("gpus", 2)), cluster_queue("b", quota("gpus", 100))))
    assert state.available("a", "gpus") == 2


def test_bind_moves_reservation_to_use_and_finish_releases() -> None:
    state = QueueState.empty(models(cluster_queue("q", quota("gpus", 4))))
    state = state.admit("ns/g", "q", gpus(3), local_queue="ns/lq")
    assert state.reserved["q"] == gpus(3) and not state.used.get("q")
    state = state.bind("ns/g")
    assert state.used["q"] == gpus(3) and not state.reserved["q"]
    assert state.local_usage("ns/lq") == gpus(3)
    state = state.finish("ns/g")
    assert not state.usage("q") and not state.admissions


def test_evict_releases_a_reservation() -> None:
    state = QueueState.empty(models(cluster_queue("q", quota("gpus", 4)))).admit("ns/g", "q", gpus(4))
    assert not state.fits("q", gpus(1)).ok
    assert state.evict("ns/g").fits("q", gpus(4)).ok


def test_evict_all_is_evict_of_each_admitted_group() -> None:
    state = QueueState.empty(models(cluster_queue("q", quota("gpus", 8)), cluster_queue("r", quota("gpus", 8))))
    state = state.admit("ns/a", "q", gpus(3)).admit("ns/b", "q", gpus(2)).admit("ns/c", "r", gpus(4)).bind("ns/b")
    one_by_one = state.evict("ns/a").evict("ns/b").evict("ns/c")
    together = state.evict_all(["ns/a", "ns/b", "ns/c", "ns/not-admitted"])
    assert together.admissions == one_by_one.admissions == {}
    for queue in ("q", "r"):
        assert together.usage(queue) == one_by_one.usage(queue) and not together.usage(queue)
    assert state.evict_all(["ns/b"]).usage("q") == gpus(3) and state.evict_all([]) is state


def test_admit_refuses_what_does_not_fit_and_double_admission() -> None:
    state = QueueState.empty(models(cluster_queue("q", quota("gpus", 4))))
    with pytest.raises(AccountingError, match="unit gpus"):
        state.admit("ns/g", "q", gpus(5))
    state = state.admit("ns/g", "q", gpus(1))
    with pytest.raises(AccountingError, match="already admitted"):
        state.admit("ns/g", "q", gpus(1))
    with pytest.raises(AccountingError, match="not admitted"):
        state.finish("ns/other")
    with pytest.raises(AccountingError, match="ClusterQueue nope does not exist"):
        state.fits("nope", gpus(1))


def test_restore_records_admissions_beyond_quota_after_quota_shrank() -> None:
    state = QueueState.empty(models(cluster_queue("q", quota("gpus", 2))))
    state = state.restore(Admission("ns/g", "q", gpus(5), bound=True))
    assert state.used["q"] == gpus(5)
    assert state.borrowed("q") == gpus(3)
    assert state.available("q", "gpus") == -3


def test_recharge_replaces_the_recorded_charge() -> None:
    state = QueueState.empty(models(cluster_queue("q", quota("gpus", 8)))).admit("ns/g", "q", gpus(4)).bind("ns/g")
    state = state.recharge("ns/g", gpus(2))
    assert state.usage("q") == gpus(2)
    assert state.admissions["ns/g"].charge == gpus(2)


def test_summary_and_unit_status_formats_binary_quantities() -> None:
    state = QueueState.empty(models(cluster_queue("q", quota("gpus", 16), quota("gpu-memory", "1Ti"))))
    state = state.admit("ns/g", "q", Amounts.of({"gpus": 12, "gpu-memory": 640 * 2**30}))
    assert state.summary("q") == "gpus 12/16, gpu-memory 640Gi/1Ti"
    statuses = {s.unit: s for s in state.unit_statuses("q")}
    assert statuses["gpus"].reserved == 12 and statuses["gpus"].used == 0


def test_with_queues_keeps_admissions() -> None:
    state = QueueState.empty(models(cluster_queue("q", quota("gpus", 8)))).admit("ns/g", "q", gpus(4))
    state = state.with_queues(models(cluster_queue("q", quota("gpus", 2))))
    assert state.available("q", "gpus") == -2


def test_status_bodies_for_cluster_and_local_queues() -> None:
    from admission.core.quota import cluster_queue_status, local_queue_status

    state = QueueState.empty(models(cluster_queue("q", quota("gpus", 4), quota("mem", "1Ti"))))
    state = state.admit("ns/a", "q", Amounts.of({"gpus": 3, "mem": 2**39}), local_queue="ns/lq").bind("ns/a")
    state = state.admit("ns/b", "q", gpus(1), local_queue="ns/lq")
    status = cluster_queue_status(state, "q", pending_groups=2)
    assert status["summary"] == "gpus 4/4, mem 512Gi/1Ti"
    assert status["quotas"][0] == {"unit": "gpus", "nominal": "4", "used": "3", "reserved": "1", "borrowed": "0"}
    assert (status["pendingGroups"], status["admittedGroups"]) == (2, 2)
    local = local_queue_status(state, "ns/lq", pending_groups=0)
    assert local["quotas"] == [{"unit": "gpus", "used": "3", "reserved": "1"},
                               {"unit": "mem", "used": "512Gi", "reserved": "0"}]
    assert local["summary"] == "gpus 4, mem 512Gi" and local["admittedGroups"] == 2
