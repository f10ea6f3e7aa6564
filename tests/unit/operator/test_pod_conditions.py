"""Reasons where people look: a waiting group's members carry draq's condition (written only when it changes),
and a reason change posts an Event on one member; admission turns the condition True."""

from __future__ import annotations

import asyncio

from admission.core.cycle import POD_CONDITION, Wait, WaitReason, condition_patch, waiting_condition
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS

from .operator_world import cluster, settle, started, submit


def condition_of(api: FakeApi, pod: str) -> dict[str, str] | None:
    found = api.get_object("Pod", NS, pod)
    assert found is not None
    return next((c for c in (found.get("status") or {}).get("conditions") or [] if c["type"] == POD_CONDITION), None)


def pod_status_writes(api: FakeApi) -> int:
    return len([w for w in api.writes_to(f"/namespaces/{NS}/pods/") if w.path.endswith("/status")])


def test_waiting_members_carry_the_groups_reason_once_and_admission_turns_it_true() -> None:
    async def go() -> None:
        api, clock = cluster(nodes=2, gpus=4), FakeClock()
        submit(api, "first", 1, 4)
        operator = await started(api, clock)
        await settle(operator)
        submit(api, "pair", 2, 2)  # 4 more GPUs in a queue of 4, 4 taken: waits for quota (not yet)
        await settle(operator)
        for pod in ("pair-0", "pair-1"):
            condition = condition_of(api, pod)
            assert condition is not None and condition["status"] == "False"
            assert condition["reason"] == "QuotaExceeded"
            assert condition["message"].endswith(f"(details: draq why {NS}/pair)")
        writes = pod_status_writes(api)
        assert writes == 2
        events = [w.body for w in api.writes_to("/events") if w.body.get("involvedObject", {}).get("kind") == "Pod"]
        assert [(e["involvedObject"]["name"], e["reason"]) for e in events] == [("pair-0", "QuotaExceeded")]
        for _ in range(3):
            await settle(operator)
        assert pod_status_writes(api) == writes  # the same reason and message: no pod write per cycle

        await api.delete(f"/api/v1/namespaces/{NS}/pods/first-0")  # room: the pair is admitted
        await settle(operator)
        await settle(operator)
        for pod in ("pair-0", "pair-1"):
            condition = condition_of(api, pod)
            assert condition is not None and (condition["status"], condition["reason"]) == ("True", "Admitted")
        await operator.cache.stop()

    asyncio.run(go())


def wait(message: str = "ClusterQueue main: gpus 8 of 8 in use", reason: WaitReason = WaitReason.QUOTA) -> Wait:
    return Wait(f"{NS}/g", reason, message, "main")


def test_the_patch_appends_after_the_last_condition_read_and_replaces_only_a_change() -> None:
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    pod = {"metadata": {"name": "g-0", "namespace": NS}, "status": {"conditions": [scheduled]}}
    first = waiting_condition(wait(), "2026-01-01T00:00:00Z")
    assert condition_patch(pod, first) == [{"op": "test", "path": "/status/conditions/0", "value": scheduled},
                                           {"op": "add", "path": "/status/conditions/-", "value": first}]
    pod["status"]["conditions"].append(first)
    assert condition_patch(pod, waiting_condition(wait(), "2026-01-01T00:01:00Z")) == []
    moved = waiting_condition(wait("ClusterQueue main: gpus 7 of 8 in use"), "2026-01-01T00:02:00Z")
    [test, replace] = condition_patch(pod, moved)
    assert test == {"op": "test", "path": "/status/conditions/1/type", "value": POD_CONDITION}
    assert replace["path"] == "/status/conditions/1"
    assert replace["value"]["message"].startswith("ClusterQueue main: gpus 7")
    assert replace["value"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"  # still False: the transition stays
    bare = {"metadata": {"name": "g-0", "namespace": NS}, "status": {"phase": "Pending"}}
    assert condition_patch(bare, first) == [{"op": "add", "path": "/status/conditions", "value": [first]}]


def test_a_long_message_is_cut_but_keeps_the_hint() -> None:
    condition = waiting_condition(wait("x" * 5000, WaitReason.DEVICES), "2026-01-01T00:00:00Z")
    assert len(condition["message"]) <= 1024 and condition["message"].endswith(f"(details: draq why {NS}/g)")


def test_conditions_that_moved_are_read_again_once() -> None:
    async def go() -> None:
        from admission.operator.cache import OperatorCache
        from admission.operator.writer import Writer

        api = FakeApi()
        scheduled = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
        api.add({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g-0", "namespace": NS},
                 "spec": {}, "status": {"conditions": [{**scheduled, "reason": "Unschedulable"}]}})
        stale = {"metadata": {"name": "g-0", "namespace": NS}, "status": {"conditions": [scheduled]}}
        writer = Writer(api, OperatorCache(api), FakeClock())
        assert await writer.pod_condition(stale, waiting_condition(wait(), "2026-01-01T00:00:00Z"))
        assert condition_of(api, "g-0") is not None
        assert [c["type"] for c in api.get_object("Pod", NS, "g-0")["status"]["conditions"]] == [  # type: ignore[index]
            "PodScheduled", POD_CONDITION]

    asyncio.run(go())
