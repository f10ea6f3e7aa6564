"""`draq queues`: usage rebuilt from the PodGroup records (as the operator's accounting does), the cohort's
borrowing and what each queue may still take, and what the operator wrote (pending groups, Active)."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.errors import DraqError
from admission.core.views import queue_report, render_queues
from tests.support import builders as b


def cluster_queue(name: str, nominal: int, cohort: str | None = None, lending: int | None = None,
                  status: dict[str, Any] | None = None) -> dict[str, Any]:
    return b.cluster_queue(name, b.quota("gpus", nominal, lending=lending), cohort=cohort, status=status or {})


def pod_group(name: str, queue: str, phase: str, gpus: int) -> dict[str, Any]:
    return b.pod_group(name, 1, "lq", namespace="team", status={
        "phase": phase, "clusterQueue": queue, "charge": [{"unit": "gpus", "amount": str(gpus)}]})


ACTIVE = {"pendingGroups": 3, "conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]}
QUEUES = [cluster_queue("research", 8, "pool", status=ACTIVE), cluster_queue("prod", 8, "pool", lending=4)]
GROUPS = [pod_group("big", "research", "Running", 10), pod_group("small", "prod", "Admitted", 2),
          pod_group("waiting", "prod", "Pending", 6)]


def test_usage_borrowing_and_room_per_unit() -> None:
    report = queue_report(QUEUES, GROUPS)
    prod, research = report.queues
    assert (research.name, research.cohort, research.admitted_groups, research.pending_groups) == (
        "research", "pool", 1, 3)
    assert research.units[0].to_dict() == {"unit": "gpus", "nominal": "8", "used": "10", "reserved": "0",
                                           "borrowed": "2", "available": "2", "borrowingLimit": None,
                                           "lendingLimit": None}
    # prod keeps 4 of its 8 to itself: 2 reserved of those, plus the 2 the cohort has left.
    assert (prod.units[0].reserved, prod.units[0].available, prod.units[0].lending_limit) == ("2", "4", "4")
    assert prod.pending_groups is None and prod.active == ""  # the operator has not written its status yet


def test_table_one_row_per_queue_and_unit() -> None:
    text = render_queues(queue_report(QUEUES, GROUPS))
    lines = text.splitlines()
    assert lines[0].split() == ["CLUSTERQUEUE", "COHORT", "ACTIVE", "PENDING", "ADMITTED", "UNIT", "NOMINAL", "USED",
                                "RESERVED", "BORROWED", "AVAILABLE", "BORROWING-LIMIT", "LENDING-LIMIT"]
    assert lines[1].split() == ["prod", "pool", "-", "-", "1", "gpus", "8", "0", "2", "0", "4", "unlimited", "4"]
    assert lines[2].split() == ["research", "pool", "True", "3", "1", "gpus", "8", "10", "0", "2", "2", "unlimited",
                                "unlimited"]


def test_only_named_queues_which_must_exist() -> None:
    assert [q.name for q in queue_report(QUEUES, GROUPS, ["research"]).queues] == ["research"]
    with pytest.raises(DraqError, match=r"no ClusterQueue nope \(there are: prod, research\)"):
        queue_report(QUEUES, GROUPS, ["nope"])


def test_an_unreadable_record_makes_the_usage_unknown() -> None:
    broken = pod_group("edited", "prod", "Running", 1)
    broken["status"]["charge"] = [{"unit": "gpus", "amount": "lots"}]
    report = queue_report(QUEUES, [*GROUPS, broken])
    prod = report.queues[0]
    assert "PodGroup team/edited records an admission that cannot be read" in prod.usage_unknown
    assert prod.units[0].available is None
    text = render_queues(report)
    assert "unknown" in text.splitlines()[1].split()
    assert any(line.startswith("prod: usage unknown: PodGroup team/edited") for line in text.splitlines())
    assert report.notes and report.notes[0].startswith("PodGroup team/edited does not parse")


def test_a_queue_that_does_not_parse_is_named_with_its_error() -> None:
    bad = cluster_queue("broken", 8, status={"conditions": [{"type": "Active", "status": "False",
                                                             "reason": "Invalid"}]})
    bad["spec"]["queueingStrategy"] = "Random"
    report = queue_report([*QUEUES, bad], GROUPS)
    broken = report.queues[0]
    assert broken.name == "broken" and "unknown strategy 'Random'" in broken.problem and not broken.units
    text = render_queues(report)
    assert text.splitlines()[1].split()[:3] == ["broken", "-", "False"]
    assert any(line.startswith("broken: does not parse:") for line in text.splitlines())
    assert "broken: not active (Invalid)" in text


def test_no_queues() -> None:
    assert render_queues(queue_report([], [])) == "no ClusterQueues"
