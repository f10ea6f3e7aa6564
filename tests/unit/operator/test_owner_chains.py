"""The operator reads the enabled integrations' owners: a JobSet's group is evicted by suspending the JobSet,
a scaled owner is announced, a pod with an unknown owner is warned about once, an unreadable owner waits."""

from __future__ import annotations

import asyncio
from typing import Any

from admission.operator.loop import Operator
from admission.operator.settings import OperatorSettings
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, gang

from .operator_world import cluster, record, settle

JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def owned(manifests: list[dict[str, Any]], api_version: str, kind: str, name: str) -> list[dict[str, Any]]:
    for manifest in manifests:
        if manifest["kind"] == "Pod":
            manifest["metadata"]["ownerReferences"] = [
                {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}]
    return manifests


def job(name: str, parallelism: int, owner: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": JOBSET_API, "kind": "JobSet", "name": owner, "uid": "u",
                                    "controller": True}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": parallelism, "template": {"spec": {"containers": [{"name": "c"}]}}}}


def jobset(name: str, replicas: int, parallelism: int) -> dict[str, Any]:
    return {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": {"name": name, "namespace": NS},
            "spec": {"suspend": False, "replicatedJobs": [{"name": "w", "replicas": replicas, "template": {
                "spec": {"parallelism": parallelism, "template": {"spec": {"containers": [{"name": "c"}]}}}}}]}}


async def operator_of(api: FakeApi, clock: FakeClock, *frameworks: str) -> Operator:
    api.discovery = {"batch/v1": ["jobs"], "jobset.x-k8s.io/v1alpha2": ["jobsets"], "apps/v1": []}
    settings = OperatorSettings(leader_election=False, kubernetes_version="1.35",
                                frameworks=frameworks or ("batch/job", "jobset.x-k8s.io/jobset"))
    operator = Operator(settings, api=api, clock=clock)
    await operator.watch_owners()
    await operator.cache.start(timeout=5)
    return operator


def events(api: FakeApi, reason: str) -> list[dict[str, Any]]:
    return [w.body for w in api.writes_to("/events") if w.body["reason"] == reason]


def test_a_jobsets_group_is_evicted_by_suspending_the_jobset() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        api.add(jobset("train", 1, 2), job("train-w-0", 2, owner="train"),
                *owned(gang("train", 2, 4), "batch/v1", "Job", "train-w-0"))
        operator = await operator_of(api, clock)
        await settle(operator)
        assert record(api, "train")["phase"] == "Admitted"
        clock.advance(301)
        await settle(operator)
        assert record(api, "train")["suspended"] == [{"kind": "JobSet", "name": "train"}]
        assert api.get_object("JobSet", NS, "train")["spec"]["suspend"] is True  # type: ignore[index]
        assert api.get_object("Job", NS, "train-w-0")["spec"].get("suspend") is None  # type: ignore[index]
        assert not [w for w in api.writes if w.method == "DELETE"]
        clock.advance(31)
        await settle(operator)
        assert api.get_object("JobSet", NS, "train")["spec"]["suspend"] is False  # type: ignore[index]
        await operator.cache.stop()

    asyncio.run(go())


def test_a_scaled_owner_is_announced_and_the_pending_groups_minimum_follows() -> None:
    async def go() -> None:
        api, clock = cluster(gpus=4), FakeClock()
        api.add(job("big", 3), *owned(gang("big", 3, 4), "batch/v1", "Job", "big"))
        operator = await operator_of(api, clock)
        await settle(operator)
        assert record(api, "big")["phase"] == "Pending"
        await api.merge_patch(f"/apis/batch/v1/namespaces/{NS}/jobs/big", {"spec": {"parallelism": 4}})
        await settle(operator)
        [resized] = events(api, "Resized")
        assert resized["involvedObject"]["kind"] == "Job"
        assert resized["message"] == (f"Job {NS}/big now declares 4 members (was 3) for group {NS}/big; its minimum "
                                      "and charge follow")
        # Admitted from its declared shape (4 members, one not created yet), which cannot fit 4 GPUs.
        assert "its declared shape (4 members) fits on no set of nodes" in record(api, "big")["message"]
        await operator.cache.stop()

    asyncio.run(go())


def test_an_unknown_owner_is_warned_about_once_per_pod() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        api.add(*owned(gang("w", 1, 4), "example.com/v1", "Widget", "w"))
        operator = await operator_of(api, clock)
        await settle(operator)
        await operator.reconcile()
        [warned] = events(api, "UnknownOwner")
        assert warned["type"] == "Warning" and warned["involvedObject"]["name"] == "w-0"
        assert "owner Widget w (example.com/v1) is not a workload kind draq groups" in warned["message"]
        await operator.cache.stop()

    asyncio.run(go())


def test_an_unreadable_owner_keeps_the_group_waiting_with_the_right_it_needs() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        api.add(job("orphan-w-0", 1, owner="orphan"), *owned(gang("orphan", 1, 4), "batch/v1", "Job", "orphan-w-0"))
        operator = await operator_of(api, clock)
        await settle(operator)
        status = record(api, "orphan")
        assert status["phase"] == "Pending"
        assert (f"is owned by JobSet {NS}/orphan, which draq cannot read: it was deleted, or draq lacks "
                "get/list/watch on jobsets.jobset.x-k8s.io") in status["message"]
        await operator.cache.stop()

    asyncio.run(go())


def test_each_leaderworkerset_replica_group_is_a_gang_of_its_own() -> None:
    """Leaders share their StatefulSet and labels but for the pod index, which names their replica group."""
    lws_labels = "leaderworkerset.sigs.k8s.io"

    def replica_group(index: int) -> list[dict[str, Any]]:
        leader, worker = gang(f"chat-{index}", 2, 2)[1:]
        for pod, owner, labels in (
                (leader, "chat", {f"{lws_labels}/worker-index": "0", "apps.kubernetes.io/pod-index": str(index)}),
                (worker, f"chat-{index}", {f"{lws_labels}/group-index": str(index)})):
            pod["metadata"]["labels"].update({f"{lws_labels}/name": "chat", **labels})
            pod["metadata"]["ownerReferences"] = [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": owner, "uid": f"uid-{owner}",
                 "controller": True}]
        return [leader, worker]

    async def go() -> None:
        api, clock = cluster(gpus=16), FakeClock()
        lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
               "metadata": {"name": "chat", "namespace": NS},
               "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
                   "spec": {"containers": [{"name": "c"}]}}}}}
        api.add(lws, gang("chat-0", 2, 2)[0], gang("chat-1", 2, 2)[0], *replica_group(0), *replica_group(1))
        api.discovery = {"leaderworkerset.x-k8s.io/v1": ["leaderworkersets"], "apps/v1": []}
        settings = OperatorSettings(leader_election=False, kubernetes_version="1.35",
                                    frameworks=("leaderworkerset.x-k8s.io/leaderworkerset",))
        operator = Operator(settings, api=api, clock=clock)
        await operator.watch_owners()
        await operator.cache.start(timeout=5)
        await settle(operator)
        phases = {g: (record(api, g)["phase"], record(api, g)["message"]) for g in ("chat-0", "chat-1")}
        assert [phase for phase, _ in phases.values()] == ["Admitted", "Admitted"], phases
        await operator.cache.stop()

    asyncio.run(go())


def test_a_waiting_jobs_reason_is_an_event_on_the_job_and_on_one_member() -> None:
    async def go() -> None:
        api, clock = cluster(gpus=4), FakeClock()
        big = job("big", 3)
        big["metadata"]["uid"] = "uid-big"
        api.add(big, *owned(gang("big", 3, 4), "batch/v1", "Job", "big"))  # 12 GPUs, queue of 4
        operator = await operator_of(api, clock)
        await settle(operator)
        await settle(operator)
        said = events(api, "NeverAdmissible")
        on = sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in said)
        assert on == [("Job", "big"), ("Pod", "big-0"), ("PodGroup", "big")]
        job_event = next(e for e in said if e["involvedObject"]["kind"] == "Job")
        assert job_event["involvedObject"]["uid"] == "uid-big" and job_event["type"] == "Warning"
        assert job_event["message"].endswith(f"(details: draq why {NS}/big)")
        await operator.cache.stop()

    asyncio.run(go())
