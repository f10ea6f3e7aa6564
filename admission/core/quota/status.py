"""Status bodies for ClusterQueue and LocalQueue, computed from the accounting state."""

from __future__ import annotations

from typing import Any

from admission.core.models import DeviceSelection
from admission.core.quota.accounting import QueueState
from admission.core.quota.amounts import NONE, format_amount
from admission.core.quota.charging import Inventory, SelectionFilter
from admission.core.quota.device_values import CompiledUnit
from admission.core.quota.units import Counting


def cluster_queue_status(state: QueueState, queue: str, pending_groups: int) -> dict[str, Any]:
    """`status` of a ClusterQueue (without conditions): per unit usage, counts and the summary."""
    cq = state.queue(queue)
    quotas = []
    for unit in state.unit_statuses(queue):
        quota = cq.quota(unit.unit)
        fmt = quota.nominal.format if quota else None
        entry = {"unit": unit.unit, "used": format_amount(unit.used, fmt),
                 "reserved": format_amount(unit.reserved, fmt), "borrowed": format_amount(unit.borrowed, fmt)}
        if quota is not None:
            entry["nominal"] = str(quota.nominal)
        quotas.append(entry)
    return {"quotas": quotas, "summary": state.summary(queue), "pendingGroups": pending_groups,
            "admittedGroups": len(state.groups_of(queue))}


def local_queue_status(state: QueueState, local_queue: str, pending_groups: int) -> dict[str, Any]:
    """`status` of a LocalQueue (`namespace/name`): its share of its ClusterQueue."""
    groups = [a for a in state.admissions.values() if a.local_queue == local_queue]
    used = sum((a.charge for a in groups if a.bound), start=NONE)
    reserved = sum((a.charge for a in groups if not a.bound), start=NONE)
    units = sorted(set(used.units) | set(reserved.units))
    return {
        "quotas": [{"unit": u, "used": format_amount(used.get(u)), "reserved": format_amount(reserved.get(u))}
                   for u in units],
        "summary": (used + reserved).describe() if units else "nothing admitted",
        "pendingGroups": pending_groups,
        "admittedGroups": len(groups),
    }


def quota_unit_status(unit: CompiledUnit, inventory: Inventory, matches: SelectionFilter) -> dict[str, Any]:
    """`status` of a QuotaUnit (without conditions): what it counts and how many devices it covers.

    Raises DraqError when a class or unit selector fails on a device (the unit is then not Ready).
    """
    spec = unit.unit
    if spec.counting is Counting.CORE:
        return {"summary": spec.describe(), "matchingDevices": 0}
    counted = set()
    for class_name in spec.device_class_names:
        device_class = inventory.device_classes.get(class_name)
        if device_class is None:
            continue
        selection = DeviceSelection("quota-unit", class_name)
        for device in inventory.devices(None):
            if matches(device, device_class, selection) and (unit.select is None or unit.select(device)):
                counted.add(device.id)
    return {"summary": spec.describe(), "matchingDevices": len(counted)}
