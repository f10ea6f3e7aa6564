"""Reconciliation that corrects: a running group's charge follows what its claims really hold."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support.builders import cluster_queue, quota, quota_unit
from tests.unit.cycle.cycle_builders import NS

from .operator_world import bind_as_planned, cluster, settle, started, submit


def charge(api: Any, group: str) -> list[dict[str, str]]:
    record = api.get_object("PodGroup", NS, group)
    assert record is not None
    return list(record["status"]["charge"])


def test_a_charge_that_differs_from_the_allocation_is_corrected_and_said() -> None:
    async def go() -> None:
        api = cluster()
        submit(api, "train", 2, 4)
        operator = await started(api)
        await settle(operator)
        await bind_as_planned(api, "train-0", "train")
        await bind_as_planned(api, "train-1", "train", devices=2)  # the scheduler gave it fewer devices
        await settle(operator)  # Running
        await settle(operator)  # corrected
        assert charge(api, "train") == [{"unit": "gpus", "amount": "6"}]
        record = api.get_object("PodGroup", NS, "train")
        assert record["status"]["reconciliation"] == [{"unit": "gpus", "charged": "8", "allocated": "6"}]
        events = [w.body for w in api.writes_to("/events") if w.body["reason"] == "ChargeCorrected"]
        assert len(events) == 1 and "gpus: charged 8, allocated 6" in events[0]["message"]
        queue = api.get_object("ClusterQueue", "", "main")
        assert queue["status"]["quotas"][0]["used"] == "6"  # usage follows the real allocation
        await settle(operator)
        assert len([w for w in api.writes_to("/events") if w.body["reason"] == "ChargeCorrected"]) == 1
        await operator.cache.stop()

    asyncio.run(go())


def test_a_finished_member_releases_its_part_of_the_charge() -> None:
    async def go() -> None:
        api = cluster()
        submit(api, "train", 2, 4)
        operator = await started(api)
        await settle(operator)
        for pod in ("train-0", "train-1"):
            await bind_as_planned(api, pod, "train")
        await settle(operator)
        assert charge(api, "train") == [{"unit": "gpus", "amount": "8"}]  # as admitted: nothing to correct
        await api.merge_patch(f"/api/v1/namespaces/{NS}/pods/train-0", {"status": {"phase": "Succeeded"}})
        await settle(operator)
        assert charge(api, "train") == [{"unit": "gpus", "amount": "4"}]
        await operator.cache.stop()

    asyncio.run(go())


def test_the_charge_stands_while_an_allocation_is_still_arriving() -> None:
    async def go() -> None:
        api = cluster()
        submit(api, "train", 1, 4)
        operator = await started(api)
        await settle(operator)
        # Bound, but the claim's allocation has not reached the cache yet.
        await api.merge_patch(f"/api/v1/namespaces/{NS}/pods/train-0", {"spec": {"nodeName": "node-0"}})
        await settle(operator)
        await settle(operator)
        assert charge(api, "train") == [{"unit": "gpus", "amount": "4"}]
        assert not [w for w in api.writes_to("/events") if w.body["reason"] == "ChargeCorrected"]
        await operator.cache.stop()

    asyncio.run(go())


def test_a_recorded_charge_in_a_unit_that_became_invalid_is_kept() -> None:
    async def go() -> None:
        api = cluster()
        weights = {"deviceClassNames": ["gpu"], "expression": 'device.attributes["gpu.example.com"].model == "H100" '
                                                              '? 2 : 1'}
        api.add(quota_unit("weights", weight=weights), cluster_queue("main", quota("gpus", 8), quota("weights", 100)))
        submit(api, "train", 2, 4)
        operator = await started(api)
        await settle(operator)
        assert charge(api, "train") == [{"unit": "gpus", "amount": "8"}, {"unit": "weights", "amount": "16"}]
        # The unit now fails on every device: what it recorded cannot be computed again, and is not dropped.
        api.add(quota_unit("weights", weight={**weights, "expression": 'device.attributes["gpu.example.com"].x'}))
        await bind_as_planned(api, "train-0", "train")
        await bind_as_planned(api, "train-1", "train", devices=2)
        await settle(operator)  # Running
        await settle(operator)  # corrected where it can be
        assert charge(api, "train") == [{"unit": "gpus", "amount": "6"}, {"unit": "weights", "amount": "16"}]
        await operator.cache.stop()

    asyncio.run(go())
