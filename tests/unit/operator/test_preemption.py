"""Preemption in the shell: a higher-priority gang's victims get their record (Evicted, condition
Preempted naming the preemptor) and an Event before their members are deleted; the gang is admitted
once they are gone."""

from __future__ import annotations

import asyncio

from tests.support.builders import pod_group
from tests.support.clock import FakeClock
from tests.unit.cycle.cycle_builders import NS, gang

from .operator_world import bind_as_planned, cluster, record, started


def test_a_higher_priority_gang_preempts_the_running_group_and_is_admitted_after() -> None:
    async def go() -> None:
        api, clock = cluster(nodes=2, gpus=8), FakeClock()
        queue = api.get_object("ClusterQueue", "", "main")
        assert queue is not None
        queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        api.add(*gang("low", 2, 4))
        operator = await started(api, clock)
        await operator.reconcile()
        assert record(api, "low")["phase"] == "Admitted"
        for pod in ("low-0", "low-1"):
            await bind_as_planned(api, pod, "low")
        await asyncio.sleep(0.02)
        await operator.reconcile()
        assert record(api, "low")["phase"] == "Running"
        api.add(pod_group("high", 2, "lq", namespace=NS), *gang("high", 2, 4, priority=5))
        await asyncio.sleep(0.02)
        await operator.reconcile()
        low = record(api, "low")
        assert low["phase"] == "Evicted" and "charge" not in low
        [condition] = low["conditions"]
        assert condition["reason"] == "Preempted" and "preempted by group team/high" in condition["message"]
        assert "preempting group(s) team/low" in record(api, "high")["message"]
        preempted = [w.body for w in api.writes_to("/events") if w.body["reason"] == "Preempted"]
        assert len(preempted) == 1 and "team/high" in preempted[0]["message"]
        assert preempted[0]["message"].endswith("; pod(s) low-0, low-1 have no controller to recreate them: they are "
                                                "deleted for good and must be created again to run")
        status_write = next(i for i, w in enumerate(api.writes) if isinstance(w.body, dict)
                            and w.body.get("status", {}).get("phase") == "Evicted")
        deletes = [i for i, w in enumerate(api.writes) if w.method == "DELETE"]
        assert sorted(api.writes[i].path for i in deletes) == [
            f"/api/v1/namespaces/{NS}/pods/low-0", f"/api/v1/namespaces/{NS}/pods/low-1"]
        assert status_write < min(deletes)  # the record comes first
        for pod in ("low-0", "low-1"):  # the resourceclaim controller deletes the pods' claims
            await api.delete(f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/{pod}-gpu-x1")
        await asyncio.sleep(0.02)
        await operator.reconcile()
        assert record(api, "high")["phase"] == "Admitted"
        await operator.cache.stop()

    asyncio.run(go())


def test_a_pod_group_priority_written_by_a_tenant_preempts_nothing() -> None:
    async def go() -> None:
        api, clock = cluster(nodes=2, gpus=8), FakeClock()
        queue = api.get_object("ClusterQueue", "", "main")
        assert queue is not None
        queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        api.add(*gang("other-team", 2, 4))
        operator = await started(api, clock)
        await operator.reconcile()
        for pod in ("other-team-0", "other-team-1"):
            await bind_as_planned(api, pod, "other-team")
        await asyncio.sleep(0.02)
        await operator.reconcile()
        assert record(api, "other-team")["phase"] == "Running"
        api.add(pod_group("tenant", 2, "lq", namespace=NS, priority=2147483647), *gang("tenant", 2, 4))
        await asyncio.sleep(0.02)
        await operator.reconcile()
        await asyncio.sleep(0.02)
        await operator.reconcile()
        assert record(api, "other-team")["phase"] == "Running"
        assert not [w for w in api.writes if w.method == "DELETE"]
        tenant = record(api, "tenant")
        assert tenant["phase"] == "Pending" and tenant["conditions"][0]["reason"] == "QuotaExceeded"
    asyncio.run(go())
