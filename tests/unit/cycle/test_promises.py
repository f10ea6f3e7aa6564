"""Promised devices settled against what the scheduler allocated on the pinned nodes."""

from __future__ import annotations

from typing import Any

from admission.core.allocator import Snapshot
from admission.core.cycle import Admit, cycle_input, decide, rebuild_state
from admission.core.cycle.promises import settled_promises
from admission.core.models import AllocationResult
from tests.support.builders import DRIVER, Manifest, claim, exactly, models, pod, result
from tests.unit.cycle.cycle_builders import (
    GATES,
    GPU_CLASS,
    LOCAL_QUEUES,
    NS,
    gang,
    gpu_node,
    gpu_queue,
    gpu_units,
    group_record,
    groups_of,
)


def released(name: str, claim_name: str) -> Manifest:
    """A released one-pod group's member, not bound yet, its claim made from a template."""
    return pod(name, NS, queue="lq", group=name, gated=False, templates={"gpu": "one-gpu"},
               claim_statuses={"gpu": claim_name})


def admitted_on(name: str, node: str, device: str) -> dict[str, Any]:
    return {"phase": "Admitted", "clusterQueue": "main", "charge": [{"unit": "gpus", "amount": "1"}],
            "plan": {"pods": [{"name": name, "node": node}],
                     "claims": [{"name": f"{name}/gpu", "devices": [{"request": "gpus", "device": device}]}]}}


def devices(promised: tuple[AllocationResult, ...]) -> list[str]:
    return sorted(r.device_id for a in promised for r in a.results)


def scene(x_allocated_to: str) -> tuple[list[Manifest], list[Any]]:
    """node-a has 2 GPUs: x was planned on gpu-0 and y on gpu-1, and the scheduler gave x's claim
    `x_allocated_to`; y's claim is not allocated yet. z (one GPU) waits."""
    objects = [*gpu_node("node-a", gpus=2),
               released("x", "x-gpu"), released("y", "y-gpu"),
               claim("x-gpu", exactly("gpus"), namespace=NS, allocation=[result("gpus", x_allocated_to, "node-a")]),
               claim("y-gpu", exactly("gpus"), namespace=NS), *gang("z", 1, 1)]
    records = [group_record("x", 1, status=admitted_on("x", "node-a", f"{DRIVER}/node-a/gpu-0")),
               group_record("y", 1, status=admitted_on("y", "node-a", f"{DRIVER}/node-a/gpu-1"))]
    return objects, records


def test_a_promise_whose_device_the_scheduler_gave_away_is_placed_again_on_its_node() -> None:
    objects, records = scene("gpu-1")
    snapshot = Snapshot.from_models(models(GPU_CLASS, *objects))
    promised = settled_promises(snapshot, GATES, groups_of(objects, records))
    assert devices(promised) == [f"{DRIVER}/node-a/gpu-0"], "y now holds the device x was planned on"


def test_a_full_node_takes_no_member_when_the_scheduler_swapped_devices() -> None:
    objects, records = scene("gpu-1")
    groups = groups_of(objects, records)
    snapshot = Snapshot.from_models(models(GPU_CLASS, *objects))
    queues = [gpu_queue("main", 8)]
    decision = decide(cycle_input(snapshot, GATES, groups, rebuild_state(queues, groups),
                                  {q.key: q for q in LOCAL_QUEUES}, gpu_units())).decision(f"{NS}/z")
    assert not isinstance(decision, Admit), "both GPUs of node-a are held: x's allocated, y's promised"


def test_promises_the_scheduler_kept_stay_as_planned() -> None:
    objects, records = scene("gpu-0")
    snapshot = Snapshot.from_models(models(GPU_CLASS, *objects))
    promised = settled_promises(snapshot, GATES, groups_of(objects, records))
    assert devices(promised) == [f"{DRIVER}/node-a/gpu-1"]
