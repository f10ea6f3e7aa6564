"""The admission loop's own logic, against the in-memory fake API: record first, then release; finish
interrupted releases; say why a group waits once; keep the last good usage when it cannot be rebuilt."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from admission.core.errors import DraqError
from admission.core.labels import GATE
from admission.core.native_gangs import V1ALPHA1, V1BETA1, pod_reference
from admission.kube import kinds
from admission.kube.client import KubeApiError
from admission.operator import Operator, OperatorSettings, reading
from tests.support.affinity import pinned_node
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, gang, member

from .operator_world import bind_as_planned, cluster, gates_of, started, submit


def run(coroutine_function: object) -> None:
    asyncio.run(coroutine_function())  # type: ignore[operator]


def test_a_group_that_fits_is_recorded_admitted_before_any_gate_is_removed() -> None:
    async def go() -> None:
        api = cluster()
        submit(api, "train", 2, 4)
        operator = await started(api)
        await operator.reconcile()

        status_writes = [i for i, w in enumerate(api.writes) if w.path.endswith("/podgroups/train/status")]
        ungates = [i for i, w in enumerate(api.writes) if "/pods/train-" in w.path]
        assert status_writes and len(ungates) == 2
        assert status_writes[0] < min(ungates)  # the durable record comes first
        record = api.writes[status_writes[0]].body["status"]
        assert record["phase"] == "Admitted" and record["clusterQueue"] == "main"
        assert record["charge"] == [{"unit": "gpus", "amount": "8"}]
        assert {p["name"] for p in record["plan"]["pods"]} == {"train-0", "train-1"}
        assert gates_of(api, "train-0") == [] and gates_of(api, "train-1") == []
        for planned in record["plan"]["pods"]:  # each member is pinned to the node the plan chose
            pod = api.get_object("Pod", NS, planned["name"])
            assert pod is not None and pinned_node(pod["spec"]["affinity"]) == planned["node"]
        events = [w.body for w in api.writes_to("/events")]
        assert [e["reason"] for e in events] == ["Admitted"]
        assert events[0]["message"].startswith("admitted to ClusterQueue main, charged gpus 8; placed ")
        await operator.cache.stop()

    run(go)


def test_a_group_over_quota_waits_says_why_once_and_counts_as_pending() -> None:
    async def go() -> None:
        api = cluster(gpus=6)
        submit(api, "first", 1, 4)
        submit(api, "big", 2, 2)
        api.get_object("Pod", NS, "big-0")["metadata"]["creationTimestamp"] = "2026-01-01T00:00:05Z"
        api.get_object("Pod", NS, "big-1")["metadata"]["creationTimestamp"] = "2026-01-01T00:00:05Z"
        operator = await started(api)
        await operator.reconcile()
        await operator.reconcile()

        assert gates_of(api, "big-0") == [GATE]
        pending = [w.body["status"] for w in api.writes_to("/podgroups/big/status")]
        assert len(pending) == 1 and pending[0]["phase"] == "Pending"
        assert pending[0]["conditions"][0]["reason"] == "QuotaExceeded"  # not yet: "first" holds 4 of 6
        assert [e["reason"] for e in (w.body for w in api.writes_to("/events"))
                if e["involvedObject"]["name"] == "big"] == ["QuotaExceeded"]
        queue_status = api.get_object("ClusterQueue", "", "main")
        assert queue_status is not None and queue_status["status"]["pendingGroups"] == 1
        local_status = api.get_object("LocalQueue", NS, "lq")
        assert local_status is not None and local_status["status"]["pendingGroups"] == 1
        await operator.cache.stop()

    run(go)


def test_waits_handed_on_unchanged_are_passed_over_without_a_look_and_a_new_term_says_them_again() -> None:
    async def go() -> None:
        api = cluster(nodes=1, gpus=100)
        for index in range(4):  # none fits a node of 4 GPUs: evaluated once, then parked
            submit(api, f"big-{index}", 1, 8)
        operator = await started(api)
        looked: list[str] = []
        already_said = operator._already_said

        def counted(decision: Any, group: Any) -> bool:
            looked.append(decision.group)
            return already_said(decision, group)

        operator._already_said = counted  # type: ignore[method-assign]
        for _ in range(3):
            await operator.reconcile()
            await asyncio.sleep(0.02)
        writes = len(api.writes_to("/status"))
        looked.clear()
        await operator.reconcile()
        assert looked == []  # the same Wait objects as the last pass, said then: not looked at
        assert len(api.writes_to("/status")) == writes
        assert len(operator._said_waits) == 4
        assert await operator._begin_term()
        assert operator._said_waits == {}
        await operator.reconcile()
        assert sorted(looked) == [f"{NS}/big-{index}" for index in range(4)]
        await operator.cache.stop()

    run(go)


def test_a_release_interrupted_after_the_record_is_finished_by_the_next_pass() -> None:
    async def go() -> None:
        api = cluster()
        submit(api, "train", 2, 4)
        first = await started(api)
        original = first.writer.ungate
        calls = 0

        async def crash_after_one(namespace: str, name: str, cached: object, node: str | None = None) -> bool:
            nonlocal calls
            calls += 1
            if calls > 1:
                raise ConnectionError("the process died here")
            return await original(namespace, name, cached, node)  # type: ignore[arg-type]

        first.writer.ungate = crash_after_one  # type: ignore[method-assign]
        with pytest.raises(ConnectionError):
            await first.reconcile()
        await first.cache.stop()
        assert sorted([gates_of(api, "train-0"), gates_of(api, "train-1")]) == [[], [GATE]]

        second = await started(api)  # a new leader, with a fresh cache
        await second.reconcile()
        assert gates_of(api, "train-0") == [] and gates_of(api, "train-1") == []
        record = api.get_object("PodGroup", NS, "train")
        assert record is not None
        for planned in record["status"]["plan"]["pods"]:  # the finished release pins as the record says
            pod = api.get_object("Pod", NS, planned["name"])
            assert pod is not None and pinned_node(pod["spec"]["affinity"]) == planned["node"]
        admitted = [w for w in api.writes_to("/podgroups/train/status") if w.body["status"].get("phase") == "Admitted"]
        assert len(admitted) == 1  # admitted once, released whole
        await second.cache.stop()

    run(go)


def test_usage_that_cannot_be_rebuilt_keeps_the_last_good_and_admits_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        api = cluster()
        submit(api, "first", 1, 4)
        operator = await started(api)
        await operator.reconcile()
        good = operator.reader.read()
        assert good.usage_current and good.cycle.state.groups_of("main")

        def broken(*args: object) -> object:
            raise DraqError("PodGroup team/first is recorded twice")

        monkeypatch.setattr(reading, "rebuild_state", broken)
        submit(api, "second", 1, 4)
        await asyncio.sleep(0.05)  # the watch delivers the new pods
        kept = operator.reader.read()
        assert not kept.usage_current
        assert kept.cycle.state == good.cycle.state  # the last good usage, not an empty one
        writes = len(api.writes)
        await operator.reconcile()
        assert gates_of(api, "second-0") == [GATE]
        assert not [w for w in api.writes[writes:] if "second" in w.path]
        await operator.cache.stop()

    run(go)


def test_a_group_moves_to_running_when_bound_and_finished_when_done() -> None:
    async def go() -> None:
        api = cluster()
        submit(api, "train", 1, 4)
        operator = await started(api)
        await operator.reconcile()
        await bind_as_planned(api, "train-0", "train")
        await asyncio.sleep(0.05)
        await operator.reconcile()
        group = api.get_object("PodGroup", NS, "train")
        assert group is not None and group["status"]["phase"] == "Running"
        assert group["status"]["charge"] == [{"unit": "gpus", "amount": "4"}]  # matches the real allocation
        await api.merge_patch(f"/api/v1/namespaces/{NS}/pods/train-0", {"status": {"phase": "Succeeded"}})
        await asyncio.sleep(0.05)
        await operator.reconcile()
        group = api.get_object("PodGroup", NS, "train")
        assert group is not None and group["status"]["phase"] == "Finished"
        reasons = [w.body["reason"] for w in api.writes_to("/events")]
        assert reasons == ["Admitted", "Running", "Finished"]
        await operator.cache.stop()

    run(go)


def test_the_clock_is_injected_into_every_timestamp() -> None:
    async def go() -> None:
        api = FakeApi()
        api.add(*cluster().objects.values())
        submit(api, "train", 1, 4)
        operator = await started(api)
        await operator.reconcile()
        record = api.get_object("PodGroup", NS, "train")
        assert record is not None and record["status"]["admittedAt"] == "2026-01-01T00:00:00Z"
        await operator.cache.stop()

    run(go)


def test_a_deleted_object_is_gone_at_once_even_if_just_written() -> None:
    async def go() -> None:
        api = cluster()
        submit(api, "train", 1, 4)
        operator = await started(api)
        await operator.reconcile()  # writes (and assumes) the PodGroup
        assert [m for m in operator.cache.objects("PodGroup") if m["metadata"]["name"] == "train"]
        await api.delete(f"/apis/draq.io/v1alpha1/namespaces/{NS}/podgroups/train")
        await asyncio.sleep(0.05)
        assert not [m for m in operator.cache.objects("PodGroup") if m["metadata"]["name"] == "train"]
        await operator.cache.stop()

    run(go)


def test_a_group_whose_writes_fail_does_not_stop_the_others() -> None:
    async def go() -> None:
        api = cluster(gpus=16)
        submit(api, "gone", 1, 4)
        submit(api, "other", 1, 4)
        operator = await started(api)
        api.fail = lambda method, path: (KubeApiError(method, path, 404, "podgroups 'gone' not found")
                                         if "/podgroups/gone" in path else None)
        await operator.reconcile()
        assert gates_of(api, "other-0") == []  # admitted and released
        assert gates_of(api, "gone-0") == [GATE]
        assert operator.cache.changed.is_set()  # the failed group is tried again on the next pass
        await operator.cache.stop()

    run(go)


def test_native_gang_members_get_their_workload_before_release() -> None:
    async def go() -> None:
        api = cluster()
        manifests = gang("ng", 2, 4)
        for manifest in manifests:
            if manifest["kind"] == "Pod":
                manifest["spec"]["workloadRef"] = pod_reference(V1ALPHA1, "ng")
        api.add(*manifests)
        operator = await started(api)
        await operator.reconcile()
        created = [i for i, w in enumerate(api.writes) if w.method == "POST" and "/workloads" in w.path]
        ungates = [i for i, w in enumerate(api.writes) if "/pods/ng-" in w.path]
        assert len(created) == 1 and created[0] < min(ungates)
        made = api.get_object("Workload", NS, "ng")
        assert made is not None and made["spec"]["podGroups"][0]["policy"] == {"gang": {"minCount": 2}}
        await operator.cache.stop()

    run(go)


def test_on_1_37_native_gang_members_get_their_pod_group_before_release() -> None:
    async def go() -> None:
        api = cluster()
        api.discovery["scheduling.k8s.io/v1beta1"] = ["priorityclasses", "workloads", "podgroups"]
        manifests = gang("ng", 2, 4)
        for manifest in manifests:
            if manifest["kind"] == "Pod":
                manifest["spec"]["schedulingGroup"] = pod_reference(V1BETA1, "ng")
        api.add(*manifests)
        operator = await started(api, gangs=True)
        assert operator.writer.gang_api is V1BETA1
        await operator.reconcile()
        created = [(i, w) for i, w in enumerate(api.writes) if w.method == "POST"
                   and w.path == f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups"]
        ungates = [i for i, w in enumerate(api.writes) if "/pods/ng-" in w.path]
        assert len(created) == 1 and created[0][0] < min(ungates)
        body = created[0][1].body
        assert body["kind"] == "PodGroup" and body["spec"] == {"schedulingPolicy": {"gang": {"minCount": 2}}}
        assert not [w for w in api.writes if "/workloads" in w.path]
        await operator.cache.stop()

    run(go)


def test_with_native_gangs_off_the_operator_neither_watches_nor_makes_gang_objects() -> None:
    async def go() -> None:
        api = cluster()
        api.discovery["scheduling.k8s.io/v1beta1"] = ["podgroups"]
        on = Operator(OperatorSettings(leader_election=False, kubernetes_version="1.37"), api=api)
        await on.discover_gangs()
        assert on.writer.gang_api is V1BETA1 and kinds.SCHEDULING_POD_GROUP in on.cache.reflectors
        off = Operator(OperatorSettings(leader_election=False, kubernetes_version="1.37", native_gangs="off"),
                       api=api)
        await off.discover_gangs()
        assert off.writer.gang_api is None and kinds.SCHEDULING_POD_GROUP not in off.cache.reflectors

    run(go)


def test_without_a_served_pod_group_api_no_gang_object_is_made() -> None:
    async def go() -> None:
        api = cluster()
        manifests = gang("ng", 1, 4)
        for manifest in manifests:
            if manifest["kind"] == "Pod":
                manifest["spec"]["schedulingGroup"] = pod_reference(V1BETA1, "ng")
        api.add(*manifests)
        operator = await started(api, gangs=True)
        assert operator.writer.gang_api is None
        await operator.reconcile()
        assert not [w for w in api.writes if w.path.startswith("/apis/scheduling.k8s.io/")]
        assert gates_of(api, "ng-0") == []  # draq's own admission still releases the group
        await operator.cache.stop()

    run(go)


def test_a_member_created_after_admission_joins_the_plan_and_is_released_pinned() -> None:
    async def go() -> None:
        api = cluster()
        submit(api, "train", 1, 4)
        operator = await started(api)
        await operator.reconcile()
        api.add(member("train-late", "train", template="train-gpus"))
        await asyncio.sleep(0.05)
        await operator.reconcile()
        record = api.get_object("PodGroup", NS, "train")
        assert record is not None
        assert [p["name"] for p in record["status"]["plan"]["pods"]] == ["train-0", "train-late"]
        assert record["status"]["charge"] == [{"unit": "gpus", "amount": "8"}]
        late = api.get_object("Pod", NS, "train-late")
        assert late is not None and gates_of(api, "train-late") == []
        assert pinned_node(late["spec"]["affinity"]) == record["status"]["plan"]["pods"][1]["node"]
        assert "MembersAdmitted" in [w.body["reason"] for w in api.writes_to("/events")]
        await operator.cache.stop()

    run(go)


def test_a_late_member_that_does_not_fit_stays_gated_and_is_said_once() -> None:
    async def go() -> None:
        api = cluster(gpus=4)
        submit(api, "train", 1, 4)
        operator = await started(api)
        await operator.reconcile()
        api.add(member("train-late", "train", template="train-gpus"))
        await asyncio.sleep(0.05)
        await operator.reconcile()
        await operator.reconcile()
        assert gates_of(api, "train-late") == [GATE]
        waits = [w.body for w in api.writes_to("/events") if w.body["reason"] == "MembersWaiting"]
        assert len(waits) == 1 and "do not fit the quota" in waits[0]["message"]
        await operator.cache.stop()

    run(go)
