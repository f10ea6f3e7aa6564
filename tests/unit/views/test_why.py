"""`draq why`: the group's own words (its Admitted condition), a pod standing for its group, and the
commands' reads through the API (the in-memory fake)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from admission.cli import queues as queues_cli
from admission.cli import why as why_cli
from admission.core.errors import DraqError, InvalidInput
from admission.core.labels import GROUP_LABEL
from admission.core.views import why
from admission.kube.client import KubeApiError
from tests.support import builders as b
from tests.support.fake_api import FakeApi

from .test_queues import GROUPS, QUEUES

WAITING = ("ClusterQueue research: unit gpus: 16 in use of nominal 16, needs 4, only 0 available "
           "(group needs gpus 4)")


def pod_group(name: str, status: dict[str, Any]) -> dict[str, Any]:
    return b.pod_group(name, 2, "training", namespace="research", status=status)


def pending(name: str) -> dict[str, Any]:
    return pod_group(name, {"phase": "Pending", "message": WAITING, "conditions": [
        {"type": "Admitted", "status": "False", "reason": "QuotaExceeded", "message": WAITING,
         "lastTransitionTime": "2026-11-23T10:00:00Z"}]})


def pod(name: str, group: str | None) -> dict[str, Any]:
    return b.pod(name, "research", queue="training", group=group, image="x")


def test_a_waiting_group_in_its_conditions_words() -> None:
    found = why("research/eval", pending("eval"))
    assert found.waiting and found.reason == "QuotaExceeded" and found.message == WAITING
    assert found.text() == f"research/eval waits (QuotaExceeded since 2026-11-23T10:00:00Z): {WAITING}"


def test_an_admitted_group_does_not_wait() -> None:
    running = pod_group("train", {"phase": "Running", "message": "all members are bound", "conditions": [
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted to ClusterQueue research"}]})
    found = why("research/train", running)
    assert not found.waiting
    assert found.text() == ("research/train does not wait: phase Running: admitted to ClusterQueue research; "
                            "all members are bound")


def test_no_record_yet() -> None:
    found = why("research/new", None, pod="new-0")
    assert found.waiting and found.reason == "NoPodGroup"
    assert found.text().startswith("pod new-0 is in group research/new; research/new waits: no PodGroup yet")


def api() -> FakeApi:
    fake = FakeApi()
    fake.add(pending("eval"), pod("eval-0", "eval"), pod("late-0", "late"), pod("loose", None))
    return fake


@pytest.mark.parametrize(("target", "group", "asked"), [
    ("eval", "research/eval", ""), ("podgroup/eval", "research/eval", ""), ("pod/eval-0", "research/eval", "eval-0"),
    ("eval-0", "research/eval", "eval-0"), ("late", "research/late", ""), ("po/late-0", "research/late", "late-0"),
])
def test_a_name_resolves_to_its_group(target: str, group: str, asked: str) -> None:
    kind, name = why_cli.parse_target(target)
    found = asyncio.run(why_cli.explain(api(), "research", kind, name))
    assert (found.group, found.pod) == (group, asked)
    assert found.reason == ("QuotaExceeded" if group == "research/eval" else "NoPodGroup")


@pytest.mark.parametrize(("target", "error"), [
    ("nothing", "no PodGroup, group or pod nothing in namespace research"),
    ("pg/eval-0", f"no PodGroup eval-0 in namespace research, and no pod labelled {GROUP_LABEL}=eval-0"),
    ("pod/eval", "no pod eval in namespace research"),
    ("loose", f"pod research/loose has no label {GROUP_LABEL}: draq does not manage it"),
])
def test_what_cannot_be_answered_is_said(target: str, error: str) -> None:
    kind, name = why_cli.parse_target(target)
    with pytest.raises(DraqError, match=error):
        asyncio.run(why_cli.explain(api(), "research", kind, name))


def test_a_kind_that_is_neither_is_refused() -> None:
    with pytest.raises(InvalidInput, match="'deployment' is not pod or podgroup"):
        why_cli.parse_target("deployment/eval")


def test_queues_read_through_the_api() -> None:
    fake = FakeApi()
    fake.add(*QUEUES, *GROUPS)
    report = asyncio.run(queues_cli.read_queues(fake, ["research"]))
    assert [(q.name, q.units[0].used) for q in report.queues] == [("research", "10")]


def test_queues_without_the_crds_say_so() -> None:
    class NoCrds(FakeApi):
        async def get(self, path: str, params: Any = None) -> dict[str, Any]:
            raise KubeApiError("GET", path, 404, "the server could not find the requested resource")

    with pytest.raises(DraqError, match=r"does not serve clusterqueues\.draq\.io: are draq.s CRDs installed"):
        asyncio.run(queues_cli.read_queues(NoCrds()))


def test_commands_are_registered() -> None:
    from admission.cli.main import build_parser
    parser = build_parser()
    args = parser.parse_args(["why", "pod/eval-0", "-n", "research", "-o", "json"])
    assert args.handler is why_cli.run and args.namespace == "research"
    args = parser.parse_args(["queues", "research", "-o", "json"])
    assert args.handler is queues_cli.run and args.queues == ["research"]
