"""The admission loop under leader election, against the fake API and a fake clock: every PodGroup status is
written under the term's epoch, a cycle still running when the term ends sends nothing more, the next
term finishes what the abandoned cycle left, and a new term reads the PodGroups afresh."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from admission.core.leadership import Epoch, annotated_epoch
from admission.kube.client import KubeApiError
from admission.operator import Operator, OperatorSettings
from admission.operator.leader import LeadershipLost
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS

from .operator_world import DEADLINE, cluster, gates_of, leading, submit


def run(go: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(go())  # type: ignore[arg-type]


def status_bodies(api: FakeApi, group: str) -> list[dict[str, Any]]:
    return [w.body["status"] for w in api.writes_to(f"/podgroups/{group}/status")]


def test_every_status_is_written_under_the_terms_epoch_and_the_admission_names_its_leader() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        submit(api, "train", 2, 4)
        submit(api, "big", 3, 4)  # does not fit: a pending status
        operator = await leading(api, clock)
        await operator._pass_in_term()
        epoch = {"holder": "draq-0", "leaseTransitions": 0, "leaseUID": ""}
        [admission] = status_bodies(api, "train")
        assert admission["phase"] == "Admitted" and admission["epoch"] == epoch and admission["admittedBy"] == epoch
        pending = status_bodies(api, "big")
        assert pending and all(body["epoch"] == epoch and "admittedBy" not in body for body in pending)
        assert gates_of(api, "train-0") == [] and gates_of(api, "train-1") == []
        await operator.cache.stop()

    run(go)


def test_the_members_released_in_a_term_carry_its_epoch() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        submit(api, "train", 2, 4)
        operator = await leading(api, clock)
        await operator._pass_in_term()
        for name in ("train-0", "train-1"):
            pod = api.get_object("Pod", NS, name)
            assert pod is not None and annotated_epoch(pod) == Epoch("draq-0", 0, "")
        await operator.cache.stop()

    run(go)


def test_without_leader_election_the_epoch_is_cleared() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        submit(api, "train", 2, 4)
        operator = Operator(OperatorSettings(leader_election=False, kubernetes_version="1.35"), api=api, clock=clock)
        await operator.cache.start(timeout=5)
        await operator._pass_in_term()
        [admission] = status_bodies(api, "train")
        assert admission["epoch"] is None and admission["admittedBy"] is None
        await operator.cache.stop()

    run(go)


def test_a_cycle_whose_term_ends_sends_nothing_more_and_the_next_term_finishes_the_release() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        submit(api, "train", 2, 4)
        operator = await leading(api, clock)
        record = api.merge_patch

        async def recorded_then_paused(path: str, body: Any) -> dict[str, Any]:
            written = await record(path, body)
            if path.endswith("/podgroups/train/status"):
                clock.advance(DEADLINE)  # the process stalls right after the record, past its renew deadline
            return written

        api.merge_patch = recorded_then_paused  # type: ignore[method-assign]
        with pytest.raises(LeadershipLost, match="renew deadline"):
            await operator._pass_in_term()
        api.merge_patch = record  # type: ignore[method-assign]
        found = api.get_object("PodGroup", NS, "train")
        assert found is not None and found["status"]["phase"] == "Admitted"
        assert api.writes_to("/pods/") == [] and api.writes_to("/events") == []  # nothing after the deadline
        assert gates_of(api, "train-0") == ["draq.io/admission"]

        assert operator.elector is not None
        await operator.elector.step()  # nobody else took over: a new term of the same replica
        epoch = operator.elector.current_epoch()
        assert epoch is not None and epoch.transitions == 1
        assert await operator._begin_term()
        await operator._pass_in_term()
        assert gates_of(api, "train-0") == [] and gates_of(api, "train-1") == []
        await operator.cache.stop()

    run(go)


def test_a_cycle_waiting_on_the_api_is_cancelled_when_the_term_ends() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        submit(api, "train", 2, 4)
        operator = await leading(api, clock)
        assert operator.elector is not None
        hanging = asyncio.Event()
        sent: list[str] = []
        record = api.merge_patch

        async def hang(path: str, body: Any) -> dict[str, Any]:
            hanging.set()
            await asyncio.Event().wait()  # the API server never answers
            sent.append(path)
            return await record(path, body)

        api.merge_patch = hang  # type: ignore[method-assign]
        cycle = asyncio.create_task(operator._pass_in_term())
        await hanging.wait()
        api.fail = lambda method, path: KubeApiError(method, path, 503, "away") if "/leases/" in path else None
        clock.advance(DEADLINE)
        await operator.elector.step()  # the renewal fails past the deadline: the term ends
        with pytest.raises(LeadershipLost, match="ended during the cycle"):
            await cycle
        assert sent == [] and api.writes_to("/pods/") == []
        await operator.cache.stop()

    run(go)


def test_a_new_term_reads_the_pod_groups_afresh() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        submit(api, "train", 2, 4)
        operator = await leading(api, clock)
        await operator._pass_in_term()
        found = api.get_object("PodGroup", NS, "train")
        assert found is not None
        # A previous leader's record this replica's watch has not delivered yet.
        api.objects[("podgroups", NS, "other")] = {
            **copy.deepcopy(found), "metadata": {**found["metadata"], "name": "other", "resourceVersion": "999"}}
        assert "other" not in {g["metadata"]["name"] for g in operator.cache.objects("PodGroup")}
        assert await operator._begin_term()
        assert "other" in {g["metadata"]["name"] for g in operator.cache.objects("PodGroup")}
        await operator.cache.stop()

    run(go)


def test_an_election_that_fails_ends_the_operator_instead_of_waiting_for_ever() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        settings = OperatorSettings(kubernetes_version="1.35", lease_namespace="draq-system", identity="draq-0")
        operator = Operator(settings, api=api, clock=clock)
        assert operator.elector is not None

        async def broken() -> None:
            raise RuntimeError("the election has a bug")

        operator.elector.step = broken  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="has a bug"):
            await asyncio.wait_for(operator.run(), 10)

    run(go)
