"""Charging inputs from the allocator's objects: its snapshot's devices and a gang's plan."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from admission.core.allocator import Allocator
from admission.core.models import AllocationResult, Pod
from admission.core.quota.charging import Inventory, Plan, template_claim_id


class AllocatorPlan(Protocol):
    """What a gang plan offers (`admission.core.allocator.GangPlan`)."""

    @property
    def placements(self) -> Mapping[str, str]: ...

    @property
    def allocations(self) -> Mapping[str, AllocationResult]: ...


def inventory_from_allocator(allocator: Allocator) -> Inventory:
    """The devices each node of the allocator's snapshot sees (usable pools only), and its classes."""
    snapshot = allocator.snapshot
    devices = {}
    for name in snapshot.nodes:
        view = allocator.view(name)
        devices[name] = tuple(d for d in view.devices if view.pool_of[d.id].usable)
    return Inventory.of(snapshot.inventory.classes.values(), devices, snapshot.nodes.values())


def plan_from_allocator(plan: AllocatorPlan, pods: Iterable[Pod]) -> Plan:
    """A charging Plan from a gang plan; template claims the allocator made in memory (named
    `<pod>-<entry>`, not created yet) are re-keyed to `template_claim_id`."""
    allocations = dict(plan.allocations)
    for pod in pods:
        for entry in pod.resource_claims:
            if entry.resource_claim_template_name is None or pod.claim_name_for(entry) is not None:
                continue
            made = f"{pod.namespace}/{pod.name}-{entry.name}"
            if made in allocations:
                allocations[template_claim_id(pod, entry.name)] = allocations.pop(made)
    return Plan(dict(plan.placements), allocations)
