"""Eviction in the shell: record first, then suspend the Job or delete the members; finish an eviction
interrupted after its record; resume the Job when the backoff is over."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from tests.support.clock import FakeClock
from tests.unit.cycle.cycle_builders import NS, gang

from .operator_world import cluster, gates_of, record, settle, started


def owned_by_job(manifests: list[dict[str, Any]], job: str) -> list[dict[str, Any]]:
    for manifest in manifests:
        if manifest["kind"] == "Pod":
            manifest["metadata"]["ownerReferences"] = [
                {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "u", "controller": True}]
    return manifests


def job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"parallelism": 2, "suspend": False}}


def test_a_group_never_bound_is_evicted_after_the_timeout_and_its_pods_deleted() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        api.add(*gang("stuck", 2, 4))
        operator = await started(api, clock)
        await settle(operator)
        assert record(api, "stuck")["phase"] == "Admitted"
        clock.advance(299)
        await settle(operator)
        assert record(api, "stuck")["phase"] == "Admitted"
        clock.advance(2)
        await settle(operator)
        status = record(api, "stuck")
        assert status["phase"] == "Evicted" and status["evictions"] == 1
        assert "charge" not in status and "plan" not in status
        assert status["requeueAt"] == "2026-01-01T00:05:31Z"
        deletes = [w.path for w in api.writes if w.method == "DELETE"]
        assert sorted(deletes) == [f"/api/v1/namespaces/{NS}/pods/stuck-0", f"/api/v1/namespaces/{NS}/pods/stuck-1"]
        status_write = next(i for i, w in enumerate(api.writes)
                            if isinstance(w.body, dict) and w.body.get("status", {}).get("phase") == "Evicted")
        first_delete = next(i for i, w in enumerate(api.writes) if w.method == "DELETE")
        assert status_write < first_delete  # the record comes first
        assert "Evicted" in [w.body["reason"] for w in api.writes_to("/events")]
        queue = api.get_object("ClusterQueue", "", "main")
        assert queue is not None and queue["status"]["admittedGroups"] == 0  # the charge is released
        await operator.cache.stop()

    asyncio.run(go())


def test_a_jobs_group_is_evicted_by_suspending_the_job_and_resumed_after_the_backoff() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        api.add(job("trainer"), *owned_by_job(gang("trainer", 2, 4), "trainer"))
        operator = await started(api, clock)
        await settle(operator)
        clock.advance(301)
        await settle(operator)
        suspended = api.get_object("Job", NS, "trainer")
        assert suspended is not None and suspended["spec"]["suspend"] is True
        assert not [w for w in api.writes if w.method == "DELETE"]  # the Job controller removes its pods
        assert record(api, "trainer")["suspended"] == [{"kind": "Job", "name": "trainer"}]
        clock.advance(29)
        await settle(operator)
        assert api.get_object("Job", NS, "trainer")["spec"]["suspend"] is True  # type: ignore[index]
        clock.advance(2)
        await settle(operator)
        resumed = api.get_object("Job", NS, "trainer")
        assert resumed is not None and resumed["spec"]["suspend"] is False
        assert "suspended" not in record(api, "trainer")
        await operator.cache.stop()

    asyncio.run(go())


def test_an_eviction_interrupted_after_its_record_is_finished() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        api.add(*gang("stuck", 1, 4))
        operator = await started(api, clock)
        await settle(operator)
        assert gates_of(api, "stuck-0") == []
        clock.advance(301)
        deletions = [0]

        async def died(namespace: str, name: str) -> bool:
            deletions[0] += 1
            raise ConnectionError("the process died here")

        original = operator.writer.delete_pod
        operator.writer.delete_pod = died  # type: ignore[method-assign]
        with contextlib.suppress(ConnectionError):
            await settle(operator)
        assert record(api, "stuck")["phase"] == "Evicted" and deletions == [1]
        operator.writer.delete_pod = original  # type: ignore[method-assign]
        await asyncio.sleep(0.05)
        await settle(operator)
        assert api.get_object("Pod", NS, "stuck-0") is None
        assert record(api, "stuck")["evictions"] == 1  # evicted once, not twice
        await operator.cache.stop()

    asyncio.run(go())


def test_a_native_gangs_workload_is_deleted_before_its_members() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        members = gang("native", 2, 4)
        for manifest in members:
            if manifest["kind"] == "Pod":
                manifest["spec"]["workloadRef"] = {"name": "native", "podGroup": "members"}
        api.add(*members)
        operator = await started(api, clock)
        await settle(operator)
        assert record(api, "native")["phase"] == "Admitted"
        assert [w for w in api.writes if w.method == "POST" and w.path.endswith("/workloads")]
        clock.advance(301)
        await settle(operator)
        deletes = [w.path for w in api.writes if w.method == "DELETE"]
        workload = f"/apis/scheduling.k8s.io/v1alpha1/namespaces/{NS}/workloads/native"
        assert deletes[0] == workload and len(deletes) == 3, deletes
        await operator.cache.stop()

    asyncio.run(go())


def test_on_1_36_a_native_gangs_pod_group_is_deleted_before_its_members() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        api.discovery["scheduling.k8s.io/v1alpha2"] = ["workloads", "podgroups"]
        members = gang("native", 2, 4)
        for manifest in members:
            if manifest["kind"] == "Pod":
                manifest["spec"]["schedulingGroup"] = {"podGroupName": "native"}
        api.add(*members)
        operator = await started(api, clock, gangs=True)
        await settle(operator)
        assert record(api, "native")["phase"] == "Admitted"
        clock.advance(301)
        await settle(operator)
        deletes = [w.path for w in api.writes if w.method == "DELETE"]
        assert deletes[0] == f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{NS}/podgroups/native", deletes
        assert len(deletes) == 3, deletes
        await operator.cache.stop()

    asyncio.run(go())
