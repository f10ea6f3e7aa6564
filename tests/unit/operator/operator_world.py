"""A small cluster in the in-memory fake API, and an operator on it, for the operator's unit tests."""

from __future__ import annotations

import asyncio
from typing import Any

from admission.core.labels import MANAGED_LABEL
from admission.operator import Operator, OperatorSettings
from tests.support import builders as b
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import GPU_CLASS, NS, gang, gpu_node


def queues(gpus: int) -> list[dict[str, Any]]:
    return [b.quota_unit("gpus", devices={"deviceClassNames": ["gpu"]}),
            b.cluster_queue("main", b.quota("gpus", gpus)), b.local_queue("lq", "main", NS)]


def cluster(nodes: int = 2, gpus: int = 8) -> FakeApi:
    """`nodes` nodes of 4 GPUs, a ClusterQueue `main` with `gpus` GPUs, LocalQueue `team/lq`."""
    api = FakeApi()
    api.add(b.namespace(NS, {MANAGED_LABEL: "true"}), GPU_CLASS, *queues(gpus))
    for i in range(nodes):
        api.add(*gpu_node(f"node-{i}"))
    return api


def submit(api: FakeApi, group: str, size: int, gpus_each: int) -> None:
    api.add(*gang(group, size, gpus_each))


DEADLINE = 10.0
"""The renew deadline of `leading` operators."""


async def started(api: FakeApi, clock: FakeClock | None = None, release: str = "1.35",
                  gangs: bool = False, owners: bool = False) -> Operator:
    """An operator on `api` with its cache listed; with `gangs`, after it found the gang API served (as at
    start); with `owners`, watching the owner kinds of the default integrations, served by `api` (as
    `draq run` does)."""
    operator = Operator(OperatorSettings(leader_election=False, kubernetes_version=release), api=api,
                        clock=clock or FakeClock())
    if gangs:
        await operator.discover_gangs()
    if owners:
        api.discovery.update({"batch/v1": ["jobs"], "apps/v1": ["replicasets", "deployments", "statefulsets"]})
        await operator.watch_owners()
    await operator.cache.start(timeout=5)
    return operator


async def leading(api: FakeApi, clock: FakeClock, identity: str = "draq-0") -> Operator:
    """An operator with leader election, in its first term."""
    settings = OperatorSettings(kubernetes_version="1.35", lease_namespace="draq-system", lease_seconds=15,
                                renew_deadline_seconds=DEADLINE, retry_period_seconds=2, identity=identity)
    operator = Operator(settings, api=api, clock=clock)
    await operator.cache.start(timeout=5)
    assert operator.elector is not None
    await operator.elector.step()
    assert operator.elector.leading.is_set()
    assert await operator._begin_term()
    return operator


def gates_of(api: FakeApi, pod: str) -> list[str]:
    obj = api.get_object("Pod", NS, pod)
    assert obj is not None
    return [g["name"] for g in obj["spec"].get("schedulingGates") or []]


async def bind_as_planned(api: FakeApi, pod: str, group: str, devices: int | None = None) -> None:
    """What the scheduler does for a planned member: create its template claim with the planned devices
    allocated (only the first `devices` of them, to play a scheduler that allocated differently), then
    bind the pod to the planned node."""
    record = api.get_object("PodGroup", NS, group)
    assert record is not None
    plan = record["status"]["plan"]
    node = next(p["node"] for p in plan["pods"] if p["name"] == pod)
    planned = next(c for c in plan["claims"] if c["name"] == f"{pod}/gpu")
    results = []
    for entry in planned["devices"][:devices]:
        driver, pool, device = entry["device"].split("/")
        results.append({"request": entry["request"], "driver": driver, "pool": pool, "device": device})
    template = api.get_object("ResourceClaimTemplate", NS, f"{group}-gpus")
    assert template is not None
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"{pod}-gpu-x1", "namespace": NS}, "spec": template["spec"]["spec"],
             "status": {"allocation": {"devices": {"results": results}}}}
    await api.create(f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims", claim)
    await api.merge_patch(f"/api/v1/namespaces/{NS}/pods/{pod}", {
        "spec": {"nodeName": node},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"{pod}-gpu-x1"}]}})


async def settle(operator: Operator) -> None:
    """Let the watches deliver what the last pass wrote (as the loop's wait for changes does), then run one."""
    await asyncio.sleep(0.02)
    await operator.reconcile()


def record(api: FakeApi, group: str) -> dict[str, Any]:
    """The status of the group's PodGroup."""
    found = api.get_object("PodGroup", NS, group)
    assert found is not None
    return dict(found["status"])
