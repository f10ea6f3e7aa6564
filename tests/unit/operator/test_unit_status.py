"""The operator writes QuotaUnit status (matching devices, capacity, Ready) and the ClusterQueue's Active
condition, and writes them again only when something besides a transition time changed."""

from __future__ import annotations

import asyncio

from pytest import MonkeyPatch

from admission.core.labels import API_VERSION
from admission.operator import unit_status
from tests.support.builders import cluster_queue, pod_group, quota, quota_unit
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, gpu_node

from .operator_world import cluster, started


def unit_writes(api: FakeApi, name: str) -> list[dict[str, object]]:
    return [w.body["status"] for w in api.writes if w.path.endswith(f"/quotaunits/{name}/status")]


def queue_conditions(api: FakeApi, name: str) -> list[list[dict[str, str]]]:
    return [w.body["status"]["conditions"] for w in api.writes
            if w.path.endswith(f"/clusterqueues/{name}/status") and "conditions" in w.body["status"]]


def test_unit_status_and_queue_condition_are_written_once() -> None:
    async def go() -> None:
        api = cluster(nodes=2)  # 2 nodes of 4 GPUs; unit gpus; ClusterQueue main quoting it
        operator = await started(api)
        await operator.reconcile()
        (status,) = unit_writes(api, "gpus")
        assert (status["summary"], status["matchingDevices"], status["capacity"]) == ("devices of gpu", 8, "8")
        (ready,) = status["conditions"]  # type: ignore[misc]
        assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Counting")
        assert ready["message"] == "counts 8 devices, capacity 8"
        ((active,),) = queue_conditions(api, "main")
        assert (active["type"], active["status"], active["reason"]) == ("Active", "True", "Ready")
        stored = api.get_object("QuotaUnit", "", "gpus")
        assert stored is not None and stored["status"]["capacity"] == "8"

        await asyncio.sleep(0.05)  # the watch delivers the written status to the cache
        await operator.reconcile()
        assert len(unit_writes(api, "gpus")) == 1
        assert len(queue_conditions(api, "main")) == 1
        await operator.cache.stop()

    asyncio.run(go())


def test_a_unit_that_does_not_compile_is_not_ready_and_its_queue_not_active() -> None:
    async def go() -> None:
        api = cluster(nodes=1)
        broken = {"apiVersion": API_VERSION, "kind": "QuotaUnit", "metadata": {"name": "gpus"},
                  "spec": {"devices": {"deviceClassNames": ["gpu"], "selector": "device.driver =="}}}
        api.add(broken)
        operator = await started(api)
        await operator.reconcile()
        (status,) = unit_writes(api, "gpus")
        (ready,) = status["conditions"]  # type: ignore[misc]
        assert (ready["status"], ready["reason"]) == ("False", "Invalid")
        assert ready["message"].startswith("QuotaUnit gpus, field spec.devices.selector: does not compile")
        assert status["matchingDevices"] is None and status["summary"] is None
        ((active,),) = queue_conditions(api, "main")
        assert (active["status"], active["reason"]) == ("False", "QuotaUnitInvalid")
        await operator.cache.stop()

    asyncio.run(go())


def test_a_queue_quoting_a_unit_that_does_not_exist_is_not_active() -> None:
    async def go() -> None:
        api = cluster(nodes=1)
        api.objects.pop(("quotaunits", "", "gpus"))
        operator = await started(api)
        await operator.reconcile()
        ((active,),) = queue_conditions(api, "main")
        assert (active["status"], active["reason"]) == ("False", "QuotaUnitMissing")
        assert unit_writes(api, "gpus") == []
        await operator.cache.stop()

    asyncio.run(go())


def test_a_unit_that_fails_on_a_device_is_not_ready_says_why_once_and_stops_only_its_queues() -> None:
    async def go() -> None:
        api = cluster(nodes=1)
        api.add(quota_unit("weighted", weight={"deviceClassNames": ["gpu"],
                                               "expression": 'device.attributes["gpu.example.com"].missing * 2'}),
                cluster_queue("other", quota("weighted", 100)))
        operator = await started(api)
        await operator.reconcile()
        (status,) = unit_writes(api, "weighted")
        (ready,) = status["conditions"]  # type: ignore[misc]
        assert (ready["status"], ready["reason"]) == ("False", "Invalid")
        assert ready["message"] == ("QuotaUnit weighted: expression fails on device gpu.example.com/node-0/gpu-0: "
                                    "no such key: missing")
        assert status["summary"] == "weighted devices of gpu" and status["matchingDevices"] is None
        (event,) = [w.body for w in api.writes_to("/events")]
        assert (event["reason"], event["type"], event["involvedObject"]["name"]) == (
            "QuotaUnitInvalid", "Warning", "weighted")
        assert event["message"].startswith(ready["message"])
        ((other,),) = queue_conditions(api, "other")
        assert (other["status"], other["reason"]) == ("False", "QuotaUnitInvalid")
        assert "no such key: missing" in other["message"]
        ((main,),) = queue_conditions(api, "main")
        assert (main["status"], main["reason"]) == ("True", "Ready")

        await asyncio.sleep(0.05)  # the watch delivers the written status to the cache
        await operator.reconcile()
        assert len(api.writes_to("/events")) == 1 and len(unit_writes(api, "weighted")) == 1
        await operator.cache.stop()

    asyncio.run(go())


def test_a_queue_that_does_not_parse_or_whose_usage_is_unknown_is_not_active() -> None:
    async def go() -> None:
        api = cluster(nodes=1)
        held = pod_group("held", 1, "lq", namespace=NS, status={
            "phase": "Running", "clusterQueue": "main", "charge": [{"unit": "gpus", "amount": "lots"}]})
        api.add(cluster_queue("broken", quota("gpus", "lots")), held)
        operator = await started(api)
        await operator.reconcile()
        ((broken,),) = queue_conditions(api, "broken")
        assert (broken["status"], broken["reason"]) == ("False", "Invalid")
        assert broken["message"].startswith("admits nothing: ClusterQueue broken, field spec.quotas[0].nominal")
        ((main,),) = queue_conditions(api, "main")
        assert (main["status"], main["reason"]) == ("False", "UsageUnknown")
        assert "PodGroup team/held records an admission that cannot be read" in main["message"]
        await operator.cache.stop()

    asyncio.run(go())


def test_unit_figures_are_counted_again_only_when_the_devices_or_nodes_change(monkeypatch: MonkeyPatch) -> None:
    counted: list[str] = []
    real = unit_status.quota_unit_status

    def counting(unit, *args, **kwargs):  # type: ignore[no-untyped-def]
        counted.append(unit.name)
        return real(unit, *args, **kwargs)

    monkeypatch.setattr(unit_status, "quota_unit_status", counting)

    async def go() -> None:
        api = cluster(nodes=1)
        operator = await started(api)
        await operator.reconcile()
        await asyncio.sleep(0.05)
        await operator.reconcile()
        await operator.reconcile()
        assert counted == ["gpus"]  # nothing changed since the first count but the status written
        api.add(*gpu_node("node-1"))
        await asyncio.sleep(0.05)
        await operator.reconcile()
        assert counted == ["gpus", "gpus"]
        assert unit_writes(api, "gpus")[-1]["matchingDevices"] == 8
        await operator.cache.stop()

    asyncio.run(go())
