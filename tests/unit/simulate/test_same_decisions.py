"""`draq simulate` decides exactly as the operator does, preemption included: the same cluster, read once
by the operator from its cache and once by the simulator from a listing, gives the same decision for every
group and the same victims; the simulator then plays the preemption as the operator carries it out."""

from __future__ import annotations

import asyncio
from typing import Any

from admission.core.cycle import CycleResult, decide
from admission.core.features import gates_for
from admission.core.simulate import SimulationSettings, load, simulate
from admission.operator import Operator
from tests.support.builders import pod_group
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, gang
from tests.unit.operator.operator_world import bind_as_planned, cluster, record, started

GATES = gates_for("1.35")


async def world() -> tuple[FakeApi, Operator]:
    """Two 4-GPU nodes under a queue of 8 GPUs that preempts lower priorities: `low` (2 × 2 GPUs) and `solo`
    (4 GPUs) run, `high` (4 GPUs, priority 5) and `late` (2 GPUs, priority 0) wait."""
    api = cluster(nodes=2, gpus=8)
    queue = api.get_object("ClusterQueue", "", "main")
    assert queue is not None
    queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    api.add(*gang("low", 2, 2), *gang("solo", 1, 4))
    operator = await started(api, FakeClock())
    await operator.reconcile()
    for pod, group in (("low-0", "low"), ("low-1", "low"), ("solo-0", "solo")):
        await bind_as_planned(api, pod, group)
    await asyncio.sleep(0.02)
    await operator.reconcile()
    assert record(api, "low")["phase"] == record(api, "solo")["phase"] == "Running"
    api.add(pod_group("high", 1, "lq", namespace=NS), *gang("high", 1, 4, priority=5), *gang("late", 1, 2))
    await asyncio.sleep(0.02)
    return api, operator


def listing(api: FakeApi) -> list[dict[str, Any]]:
    return [dict(obj) for obj in api.objects.values()]


def simulated(api: FakeApi, operator: Operator) -> CycleResult:
    loaded = load(listing(api), GATES, submitted=False)
    return decide(loaded.cluster.cycle_input(GATES, operator.clock.now()))


def test_the_operator_and_the_simulator_make_the_same_decisions_with_preemption() -> None:
    async def go() -> None:
        api, operator = await world()
        ours = decide(operator.reader.read().cycle)
        theirs = simulated(api, operator)
        assert ours.decisions == theirs.decisions
        assert ours.preemptions.preempts == theirs.preemptions.preempts
        [preempt] = ours.preemptions.preempts
        assert preempt.group == f"{NS}/high" and preempt.victims  # the scenario does preempt
        assert {d.group for d in ours.decisions} == {f"{NS}/high", f"{NS}/late"}
        await operator.cache.stop()

    asyncio.run(go())


def test_the_simulation_carries_out_the_preemption_the_operator_carries_out() -> None:
    async def go() -> None:
        api, operator = await world()
        loaded = load(listing(api), GATES, submitted=False)
        result = simulate(loaded.cluster, SimulationSettings(GATES, operator.clock.now(), default_run_time=None))
        await operator.reconcile()
        evicted = sorted(g for g in ("low", "solo") if record(api, g).get("phase") == "Evicted")
        assert evicted  # the operator preempted
        outcomes = {o.group: o for o in result.outcomes}
        assert sorted(k.split("/")[1] for k, o in outcomes.items() if o.preempted) == evicted
        # Bare pods, as here, are deleted for good: the simulated victims are gone, and `high` is admitted
        # by the next cycle, as the operator admits it once the victims' pods and claims are gone.
        assert all(outcomes[f"{NS}/{g}"].fate.value == "Preempted" for g in evicted)
        assert outcomes[f"{NS}/high"].fate.value == "Admitted" and outcomes[f"{NS}/high"].cycle == 2
        for name in evicted:
            for pod in [p for p in api.objects.values() if p["kind"] == "ResourceClaim"
                        and p["metadata"]["name"].startswith(f"{name}-")]:
                await api.delete(f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/{pod['metadata']['name']}")
        await asyncio.sleep(0.02)
        await operator.reconcile()
        assert record(api, "high")["phase"] == "Admitted"
        planned = {p["name"]: p["node"] for p in record(api, "high")["plan"]["pods"]}
        assert planned == dict(outcomes[f"{NS}/high"].nodes)
        await operator.cache.stop()

    asyncio.run(go())


def test_a_preempted_jobs_members_queue_again_in_the_simulation() -> None:
    """The operator suspends a preempted group's Jobs and resumes them at once: their new pods queue again.
    The simulated victims come back gated and unbound, with no charge, and wait behind `high`."""
    async def go() -> None:
        api, operator = await world()
        objects = listing(api)
        for obj in objects:
            name = obj["metadata"]["name"]
            if obj["kind"] == "Pod" and name.startswith(("low-", "solo-")):
                obj["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "controller": True,
                                                       "name": name.rsplit("-", 1)[0], "uid": f"uid-{name}"}]
        loaded = load(objects, GATES, submitted=False)
        result = simulate(loaded.cluster, SimulationSettings(GATES, operator.clock.now(), default_run_time=None))
        victims = [o for o in result.outcomes if o.preempted]
        assert victims and all(o.fate.value == "Waiting" and o.reason == "QuotaExceeded" for o in victims)
        assert result.outcome(f"{NS}/high").fate.value == "Admitted"  # type: ignore[union-attr]
        await operator.cache.stop()

    asyncio.run(go())
