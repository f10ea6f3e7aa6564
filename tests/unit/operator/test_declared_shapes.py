"""A group admitted from its declared shape, through the operator: the record reserves slots before any
member exists, and a member created later is released pinned to its slot, with its native gang made first."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from admission.core.labels import GATE
from admission.core.models import DeclaredShape, ObjectRef, Pod, Role
from admission.core.native_gangs import V1ALPHA1, pod_reference
from admission.operator import Operator
from admission.operator.reading import Reading
from tests.support import builders as b
from tests.support.affinity import pinned_node
from tests.unit.cycle.cycle_builders import NS, gpu_template, member

from .operator_world import cluster, gates_of, started


def worker(name: str) -> dict[str, Any]:
    manifest = member(name, "js", group_min=4, template="js-gpus")
    manifest["spec"]["workloadRef"] = pod_reference(V1ALPHA1, "js")
    return manifest


def shape() -> DeclaredShape:
    template: Pod = b.model(worker("template"))
    template = dataclasses.replace(template, meta=dataclasses.replace(template.meta, name=""))
    return DeclaredShape(ObjectRef("JobSet", NS, "js"), (Role("worker", template, 4),))


def knowing_the_owner(operator: Operator) -> None:
    """The reader as it is once it reads the group's owner: group `js` carries its declared shape."""
    read = operator.reader.read

    def with_shape() -> Reading:
        reading = read()
        groups = tuple(dataclasses.replace(g, declared=shape()) if g.name == "js" else g
                       for g in reading.cycle.groups)
        return dataclasses.replace(reading, cycle=dataclasses.replace(reading.cycle, groups=groups))

    operator.reader.read = with_shape  # type: ignore[method-assign]


def test_a_declared_group_is_admitted_empty_and_its_member_released_to_its_slot() -> None:
    async def go() -> None:
        api = cluster()
        api.add(gpu_template("js-gpus", 1), b.pod_group("js", 4, "lq", namespace=NS))
        operator = await started(api)
        knowing_the_owner(operator)
        await operator.reconcile()
        status = api.get_object("PodGroup", NS, "js")["status"]  # type: ignore[index]
        assert status["phase"] == "Admitted" and status["charge"] == [{"unit": "gpus", "amount": "4"}]
        assert status["plan"]["pods"] == [] and [s["role"] for s in status["plan"]["slots"]] == ["worker"] * 4
        api.add(worker("js-w-0"))
        await asyncio.sleep(0.05)
        await operator.reconcile()
        plan = api.get_object("PodGroup", NS, "js")["status"]["plan"]  # type: ignore[index]
        [slot] = [s for s in plan["slots"] if s.get("pod") == "js-w-0"]
        pod = api.get_object("Pod", NS, "js-w-0")
        assert pod is not None and gates_of(api, "js-w-0") == [] and GATE not in str(pod["spec"])
        assert pinned_node(pod["spec"]["affinity"]) == slot["node"]
        workload = api.get_object("Workload", NS, "js")
        assert workload is not None and workload["spec"]["podGroups"][0]["policy"] == {"gang": {"minCount": 1}}
        await operator.cache.stop()

    asyncio.run(go())


def test_a_member_that_matches_no_role_gives_its_slot_up_says_so_then_is_released_as_itself() -> None:
    async def go() -> None:
        api = cluster()
        api.add(gpu_template("js-gpus", 1), gpu_template("big", 2), b.pod_group("js", 4, "lq", namespace=NS))
        operator = await started(api)
        knowing_the_owner(operator)
        await operator.reconcile()
        odd = member("js-odd", "js", group_min=4, template="big")
        odd["spec"]["workloadRef"] = pod_reference(V1ALPHA1, "js")
        api.add(odd)
        await asyncio.sleep(0.05)
        await operator.reconcile()
        status = api.get_object("PodGroup", NS, "js")["status"]  # type: ignore[index]
        assert [s.get("pod", "") for s in status["plan"]["slots"]] == ["", "", "", "js-odd"]
        assert status["charge"] == [{"unit": "gpus", "amount": "3"}] and gates_of(api, "js-odd") == [GATE]
        events = [w.body for w in api.writes_to("/events")]
        assert [e["reason"] for e in events][-1] == "SlotsGivenUp" and events[-1]["type"] == "Warning"
        await operator.reconcile()
        status = api.get_object("PodGroup", NS, "js")["status"]  # type: ignore[index]
        assert status["charge"] == [{"unit": "gpus", "amount": "5"}] and gates_of(api, "js-odd") == []
        assert "js-odd" in [p["name"] for p in status["plan"]["pods"]]
        assert "MembersAdmitted" in [w.body["reason"] for w in api.writes_to("/events")]
        await operator.cache.stop()

    asyncio.run(go())
