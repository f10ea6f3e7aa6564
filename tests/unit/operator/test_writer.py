"""The writer's own logic: gate removal guarded by a `test` operation, PodGroup status preconditions,
and Events that never fail a cycle."""

from __future__ import annotations

import asyncio

import pytest

from admission.core.labels import GATE
from admission.kube.client import KubeApiError
from admission.operator.cache import OperatorCache
from admission.operator.writer import Writer
from tests.support.affinity import pinned_node
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, member


def writer(api: FakeApi) -> Writer:
    return Writer(api, OperatorCache(api, FakeClock()), FakeClock())


def pod_gates(api: FakeApi, name: str) -> list[str]:
    pod = api.get_object("Pod", NS, name)
    assert pod is not None
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def test_ungate_removes_only_draqs_gate() -> None:
    api = FakeApi()
    pod = member("p", "g")
    pod["spec"]["schedulingGates"] = [{"name": "other.io/wait"}, {"name": GATE}]
    api.add(pod)
    assert asyncio.run(writer(api).ungate(NS, "p", None))
    assert pod_gates(api, "p") == ["other.io/wait"]
    assert api.writes[-1].body[0] == {"op": "test", "path": "/spec/schedulingGates/1/name", "value": GATE}


def test_ungate_reads_again_when_the_gates_changed_under_it() -> None:
    api = FakeApi()
    api.add(member("p", "g"))
    stale = {"spec": {"schedulingGates": [{"name": "x"}, {"name": GATE}]}}  # an old view: gate at index 1
    assert asyncio.run(writer(api).ungate(NS, "p", stale))
    assert pod_gates(api, "p") == []
    tests = [w.body[0]["path"] for w in api.writes]
    assert tests == ["/spec/schedulingGates/1/name", "/spec/schedulingGates/0/name"]


def test_ungate_of_a_pod_that_is_gone_or_released_is_false() -> None:
    api = FakeApi()
    assert not asyncio.run(writer(api).ungate(NS, "absent", None))
    api.add(member("free", "g", gated=False))
    assert not asyncio.run(writer(api).ungate(NS, "free", None))
    assert api.writes == []


def test_status_with_a_stale_version_is_refused() -> None:
    async def go() -> None:
        api = FakeApi()
        w = writer(api)
        created = await w.ensure_pod_group(NS, "g", 2, "lq")
        again = await w.ensure_pod_group(NS, "g", 2, "lq")  # another writer was first: read it
        assert again["metadata"]["name"] == "g"
        version = created["metadata"]["resourceVersion"]
        await w.pod_group_status(NS, "g", {"phase": "Pending"})
        with pytest.raises(KubeApiError) as refused:
            await w.pod_group_status(NS, "g", {"phase": "Admitted"}, version)
        assert refused.value.status == 409
        stored = api.get_object("PodGroup", NS, "g")
        assert stored is not None and stored["status"]["phase"] == "Pending"

    asyncio.run(go())


def test_a_failed_event_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    api.fail = lambda method, path: KubeApiError(method, path, 403, "forbidden") if "/events" in path else None
    involved = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS}}
    asyncio.run(writer(api).event(involved, "Admitted", "admitted"))
    assert "event Admitted for team/p" in caplog.text


def test_events_carry_the_injected_time() -> None:
    api = FakeApi()
    involved = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS}}
    asyncio.run(writer(api).event(involved, "Admitted", "admitted"))
    event = api.writes[-1].body
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-01T00:00:00Z"
    assert event["involvedObject"]["name"] == "p" and event["type"] == "Normal"


def test_release_pins_the_member_to_its_node_in_the_same_patch() -> None:
    api = FakeApi()
    api.add(member("p", "g"))
    assert asyncio.run(writer(api).ungate(NS, "p", None, "node-7"))
    ops = [op["op"] for op in api.writes[-1].body]
    assert ops == ["test", "add", "remove"]  # one request: the pod is never ungated unpinned
    pod = api.get_object("Pod", NS, "p")
    assert pod is not None and pinned_node(pod["spec"]["affinity"]) == "node-7"
    assert pod_gates(api, "p") == []


def test_a_refused_pin_keeps_the_member_gated_and_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    api.add(member("p", "g"))
    refusals = [0]

    def refuse_affinity(method: str, path: str) -> KubeApiError | None:
        body = api.last_body
        if method == "PATCH" and any(op.get("path") == "/spec/affinity" for op in body):
            refusals[0] += 1
            return KubeApiError(method, path, 422, "pod p is invalid: spec: Forbidden: pod updates may not change")
        return None

    api.fail = refuse_affinity
    releasing = writer(api)
    assert not asyncio.run(releasing.ungate(NS, "p", None, "node-7"))
    pod = api.get_object("Pod", NS, "p")
    assert pod is not None and "affinity" not in pod["spec"] and pod_gates(api, "p") == [GATE]  # never unpinned
    assert refusals == [1]  # not retried within the call
    assert "pinning to node node-7 refused" in caplog.text
    events = api.writes_to("/events")
    assert [e.body["reason"] for e in events] == ["PinRefused"] and events[0].body["type"] == "Warning"
    assert "node-7" in events[0].body["message"] and events[0].body["involvedObject"]["name"] == "p"
    # The next pass tries again; the refusal is logged again, its Event is not repeated.
    assert not asyncio.run(releasing.ungate(NS, "p", None, "node-7"))
    assert refusals == [2] and len(api.writes_to("/events")) == 1 and pod_gates(api, "p") == [GATE]
    # Once the API accepts the pin, the member is released pinned.
    api.fail = lambda method, path: None
    assert asyncio.run(releasing.ungate(NS, "p", None, "node-7"))
    released = api.get_object("Pod", NS, "p")
    assert released is not None and pinned_node(released["spec"]["affinity"]) == "node-7"
    assert pod_gates(api, "p") == []


def test_one_event_per_object_and_reason_updated_with_a_count_at_most_once_a_minute() -> None:
    async def go() -> None:
        api = FakeApi()
        clock = FakeClock()
        w = Writer(api, OperatorCache(api, clock), clock)
        group = {"apiVersion": "draq.io/v1alpha1", "kind": "PodGroup",
                 "metadata": {"name": "g", "namespace": NS, "uid": "u"}}
        for _ in range(5):
            await w.event(group, "QuotaExceeded", "waits", warning=True)
        assert [write.method for write in api.writes] == ["POST"]
        clock.advance(61)
        await w.event(group, "QuotaExceeded", "waits still")
        await w.event(group, "Admitted", "admitted")
        update, created = api.writes[1], api.writes[2]
        assert update.method == "PATCH" and update.body["count"] == 6 and update.body["message"] == "waits still"
        assert created.method == "POST" and created.body["reason"] == "Admitted"

    asyncio.run(go())


def test_new_events_are_limited_per_namespace() -> None:
    async def go() -> None:
        api = FakeApi()
        clock = FakeClock()
        w = Writer(api, OperatorCache(api, clock), clock)
        for i in range(100):
            group = {"kind": "PodGroup", "metadata": {"name": f"g{i}", "namespace": NS, "uid": f"u{i}"}}
            await w.event(group, "QuotaExceeded", "waits", warning=True)
        other = {"kind": "PodGroup", "metadata": {"name": "g", "namespace": "other", "uid": "o"}}
        await w.event(other, "QuotaExceeded", "waits", warning=True)
        posts = [write for write in api.writes if write.method == "POST"]
        assert len(posts) == w.events.limits.burst + 1 and w.events.skipped == 100 - w.events.limits.burst
        clock.advance(10)  # refilled at 0.2 per second: two more
        for i in range(100, 105):
            group = {"kind": "PodGroup", "metadata": {"name": f"g{i}", "namespace": NS, "uid": f"u{i}"}}
            await w.event(group, "QuotaExceeded", "waits", warning=True)
        assert len([write for write in api.writes if write.method == "POST"]) == w.events.limits.burst + 3

    asyncio.run(go())


def test_an_expired_event_is_forgotten_and_posted_anew() -> None:
    async def go() -> None:
        api = FakeApi()
        clock = FakeClock()
        w = Writer(api, OperatorCache(api, clock), clock)
        group = {"kind": "PodGroup", "metadata": {"name": "g", "namespace": NS, "uid": "u"}}
        await w.event(group, "QuotaExceeded", "waits")
        api.fail = lambda method, path: KubeApiError(method, path, 404, "gone") if method == "PATCH" else None
        clock.advance(61)
        await w.event(group, "QuotaExceeded", "waits")
        api.fail = lambda method, path: None
        await w.event(group, "QuotaExceeded", "waits")
        assert [write.method for write in api.writes if write.method == "POST"] == ["POST", "POST"]

    asyncio.run(go())
