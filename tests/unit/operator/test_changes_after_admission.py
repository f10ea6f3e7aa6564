"""What changes under an admitted group: its planned node deleted or tainted, its planned devices tainted
`NoExecute` (Kubernetes 1.37, device taints GA) or allocated by someone else. The affected group is evicted
at its bind timeout and, requeued, waits with a reason; the other groups go on, bound and charged as they
were."""

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


async def two_groups_admitted(api: FakeApi, clock: FakeClock, release: str = "1.35") -> tuple[Any, str, str]:
    """Groups `lost` and `kept` (one pod of 4 GPUs each) admitted on the two nodes; `kept` bound and Running.
    Returns the operator and the nodes planned for `lost` and `kept`."""
    submit(api, "kept", 1, 4)
    submit(api, "lost", 1, 4)
    operator = await started(api, clock, release)
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


async def taint_device(api: FakeApi, node: str, effect: str) -> None:
    """The node's DRA driver taints its first GPU (a health event, say an XID error)."""
    path = f"/apis/resource.k8s.io/v1/resourceslices/{node}-gpus"
    found = await api.get(path)
    devices = found["spec"]["devices"]
    devices[0]["taints"] = [{"key": "gpu.example.com/unhealthy", "value": "xid-79", "effect": effect}]
    await api.merge_patch(path, {"spec": {"devices": devices}})


def test_planned_devices_tainted_no_execute_after_admission_on_1_37() -> None:
    """Like a planned node tainted after admission: held until the bind timeout, evicted as a whole, and
    requeued to wait saying a tainted device keeps it out; the other group goes on."""
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        operator, lost_node, _ = await two_groups_admitted(api, clock, release="1.37")
        await taint_device(api, lost_node, "NoExecute")
        await settle(operator)
        assert record(api, "lost")["phase"] == "Admitted"
        await after_the_bind_timeout(api, clock, operator)
        message = await requeued_waits(api, clock, operator, "3 free (1 has a taint that is not tolerated)")
        assert record(api, "lost")["conditions"][0]["reason"] == "DevicesUnavailable", message
        await operator.cache.stop()

    asyncio.run(go())


def test_a_no_execute_device_taint_is_ignored_where_the_release_ignores_device_taints() -> None:
    """On 1.35 (DRADeviceTaints off by default) the scheduler allocates tainted devices as any other; so does
    draq: the group planned on them is not held back once requeued."""
    async def go() -> None:
        api, clock = cluster(), FakeClock()
        operator, lost_node, _ = await two_groups_admitted(api, clock)
        await taint_device(api, lost_node, "NoExecute")
        await after_the_bind_timeout(api, clock, operator)
        submit(api, "lost", 1, 4)
        clock.advance(31)
        await settle(operator)
        await settle(operator)
        assert record(api, "lost")["phase"] == "Admitted"
        await operator.cache.stop()

    asyncio.run(go())
