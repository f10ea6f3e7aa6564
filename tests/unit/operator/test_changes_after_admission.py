"""What changes under an admitted group: its planned node deleted or tainted, its planned devices allocated by
someone else. The affected group is evicted at its bind timeout and, requeued, waits with a reason; the
other groups go on, bound and charged as they were."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS

from .operator_world import bind_as_planned, cluster, record, settle, started, submit


def planned_node(api: FakeApi, group: str) -> str:
    (entry,) = record(api, group)["plan"]["pods"]
    return str(entry["node"])


async def two_groups_admitted(api: FakeApi, clock: FakeClock) -> tuple[Any, str, str]:
    """Groups `lost` and `kept` (one pod of 4 GPUs each) admitted on the two nodes; `kept` bound and Running.
    Returns the operator and the nodes planned for `lost` and `kept`."""
    submit(api, "kept", 1, 4)
    submit(api, "lost", 1, 4)
    operator = await started(api, clock)
    await settle(operator)
    assert record(api, "kept")["phase"] == record(api, "lost")["phase"] == "Admitted"
    lost_node, kept_node = planned_node(api, "lost"), planned_node(api, "kept")
    assert lost_node != kept_node
    await bind_as_planned(api, "kept-0", "kept")
    await settle(operator)
    assert record(api, "kept")["phase"] == "Running"
    return operator, lost_node, kept_node


async def after_the_bind_timeout(api: FakeApi, clock: FakeClock, operator: Any) -> None:
    clock.advance(301)
    await settle(operator)
    lost = record(api, "lost")
    assert lost["phase"] == "Evicted" and lost["evictions"] == 1 and "charge" not in lost
    assert api.get_object("Pod", NS, "lost-0") is None  # its member is deleted
    kept = record(api, "kept")
    assert kept["phase"] == "Running" and kept["charge"] == [{"unit": "gpus", "amount": "4"}]
    assert api.get_object("Pod", NS, "kept-0") is not None
    queue = api.get_object("ClusterQueue", "", "main")
    assert queue is not None and queue["status"]["quotas"][0]["used"] == "4"  # only `kept` is charged


async def requeued_waits(api: FakeApi, clock: FakeClock, operator: Any, expected: str) -> str:
    """The evicted group's controller recreates its member; after the backoff it waits with a reason."""
    submit(api, "lost", 1, 4)
    clock.advance(31)
    await settle(operator)
    await settle(operator)
    lost = record(api, "lost")
    assert lost["phase"] != "Admitted"
    message = str(lost.get("message", ""))
    assert expected in message, message
    assert record(api, "kept")["phase"] == "Running"
    return message


def test_a_planned_node_deleted_after_admission() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        operator, lost_node, _ = await two_groups_admitted(api, clock)
        await api.delete(f"/api/v1/nodes/{lost_node}")
        await settle(operator)
        assert record(api, "lost")["phase"] == "Admitted"  # held until its bind timeout
        await after_the_bind_timeout(api, clock, operator)
        # One node left, and `kept` holds its 4 GPUs.
        await requeued_waits(api, clock, operator, "pod team/lost-0")
        await operator.cache.stop()

    asyncio.run(go())


def test_a_planned_node_tainted_after_admission() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        operator, lost_node, _ = await two_groups_admitted(api, clock)
        await api.merge_patch(f"/api/v1/nodes/{lost_node}",
                              {"spec": {"taints": [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]}})
        await settle(operator)
        assert record(api, "lost")["phase"] == "Admitted"
        await after_the_bind_timeout(api, clock, operator)
        message = await requeued_waits(api, clock, operator, "node(s) had untolerated taint {maintenance: true}")
        assert record(api, "lost")["conditions"][0]["reason"] in ("NodesUnavailable", "DevicesUnavailable"), message
        await operator.cache.stop()

    asyncio.run(go())


def test_planned_devices_allocated_by_someone_else_after_admission() -> None:
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        operator, lost_node, _ = await two_groups_admitted(api, clock)
        # Another scheduler allocates every GPU of the node planned for `lost` to a claim of its own.
        results = [{"request": "gpus", "driver": "gpu.example.com", "pool": lost_node, "device": f"gpu-{i}"}
                   for i in range(4)]
        taken = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "elsewhere", "namespace": "other"},
                 "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu",
                                                                                 "count": 4}}]}},
                 "status": {"allocation": {"devices": {"results": results}}}}
        await api.create("/apis/resource.k8s.io/v1/namespaces/other/resourceclaims", taken)
        await settle(operator)
        assert record(api, "lost")["phase"] == "Admitted"
        await after_the_bind_timeout(api, clock, operator)
        await requeued_waits(api, clock, operator, "pod team/lost-0")
        assert record(api, "lost")["conditions"][0]["reason"] == "DevicesUnavailable"
        await operator.cache.stop()

    asyncio.run(go())
