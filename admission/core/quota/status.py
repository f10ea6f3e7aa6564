"""Status bodies and conditions of ClusterQueues, LocalQueues and QuotaUnits."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from fractions import Fraction
from typing import Any

from admission.core.errors import DraqError
from admission.core.models import Device, DeviceClass, DeviceSelection, Node, ResourceSlice
from admission.core.quantity import Quantity
from admission.core.quota.accounting import QueueState
from admission.core.quota.amounts import NONE, format_amount
from admission.core.quota.charging import Inventory, SelectionFilter
from admission.core.quota.device_values import CompiledUnit, device_value, selects
from admission.core.quota.queues import ClusterQueue
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


CounterSets = Mapping[str, Mapping[str, Mapping[str, Quantity]]]
"""Shared counter sets per pool (`driver/pool`), per set name: counter -> value."""

READY = "Ready"
ACTIVE = "Active"


def quota_unit_status(unit: CompiledUnit, inventory: Inventory, matches: SelectionFilter, nodes: Iterable[Node] = (),
                      counter_sets: CounterSets | None = None) -> dict[str, Any]:
    """`status` of a QuotaUnit (without conditions): what it counts, how many devices it covers, and its
    total capacity in its own terms (devices, or the sum of their capacities, counters or weights; plus
    device-plugin resources in the nodes' allocatable and, for a core unit, the nodes' allocatable).

    Raises DraqError when the unit's selector or valuation fails on a device (the unit is then not Ready,
    see `unit_problem`). A device a DeviceClass's own selector fails on is not counted: that is the
    class's fault, reported on the groups that use the class.
    """
    spec = unit.unit
    nodes = tuple(nodes)
    plugin = sum((n.allocatable[e.name].value * e.counts_as for n in nodes for e in spec.extended_resources
                  if e.name in n.allocatable), Fraction(0))
    if spec.counting is Counting.CORE:
        core = sum((n.allocatable[spec.resource].value for n in nodes if spec.resource in n.allocatable), Fraction(0))
        return {"summary": spec.describe(), "matchingDevices": 0, "capacity": format_amount(core)}
    counted = _counted_devices(unit, inventory, matches)
    if spec.counting is Counting.COUNTERS:
        capacity = _counter_capacity(spec.counter, spec.counter_set, counted.values(), counter_sets or {})
    else:
        capacity = sum((_whole_value(unit, device, class_name) for device, class_name in counted.values()),
                       Fraction(0))
    return {"summary": spec.describe(), "matchingDevices": len(counted), "capacity": format_amount(capacity + plugin)}


def unit_problems(units: Iterable[CompiledUnit], inventory: Inventory, matches: SelectionFilter) -> dict[str, str]:
    """Units that cannot be used on the cluster's devices: name -> `unit_problem`."""
    return {unit.name: problem for unit in units if (problem := unit_problem(unit, inventory, matches))}


def unit_problem(unit: CompiledUnit, inventory: Inventory, matches: SelectionFilter) -> str:
    """Why the unit cannot value the devices it counts ("" when it can): its selector or weight fails on a
    device (naming the unit, the device and the CEL error), or a device lacks the capacity it sums."""
    spec = unit.unit
    if spec.counting is Counting.CORE or (spec.counting is Counting.DEVICES and unit.select is None):
        return ""  # nothing to evaluate
    try:
        for device, class_name in _counted_devices(unit, inventory, matches).values():
            _whole_value(unit, device, class_name)
    except DraqError as err:
        return str(err)
    return ""


def _counted_devices(unit: CompiledUnit, inventory: Inventory,
                     matches: SelectionFilter) -> dict[str, tuple[Device, str]]:
    """Device id -> (device, the first of the unit's classes that selects it)."""
    counted: dict[str, tuple[Device, str]] = {}
    for class_name in unit.unit.device_class_names:
        device_class = inventory.device_classes.get(class_name)
        if device_class is None:
            continue
        selection = DeviceSelection("quota-unit", class_name)
        for device in inventory.devices(None):
            if device.id not in counted and _draws_on(unit, device) and \
                    _in_class(device, device_class, selection, matches) and selects(unit, device):
                counted[device.id] = (device, class_name)
    return counted


def _in_class(device: Device, device_class: DeviceClass, selection: DeviceSelection, matches: SelectionFilter) -> bool:
    try:
        return matches(device, device_class, selection)
    except DraqError:
        return False  # the class's selector fails on it: the class's fault, not the unit's


def _draws_on(unit: CompiledUnit, device: Device) -> bool:
    """A counters unit covers only devices that consume its counter; other units every device."""
    spec = unit.unit
    return spec.counting is not Counting.COUNTERS or any(
        spec.counter in c.counters and spec.counter_set in (None, c.counter_set) for c in device.consumes_counters)


def _whole_value(unit: CompiledUnit, device: Device, class_name: str) -> Fraction:
    """What the whole device counts (a shared device's whole capacity, not one share)."""
    whole = {c.qualified: c.value for c in device.capacities.values()}
    return device_value(unit, device, DeviceSelection("quota-unit", class_name), whole)


def _counter_capacity(counter: str, counter_set: str | None, devices: Iterable[tuple[Device, str]],
                      counter_sets: CounterSets) -> Fraction:
    """The counter's value in every counter set the counted devices draw from, each set once."""
    sets = {(f"{d.driver}/{d.pool}", c.counter_set) for d, _ in devices for c in d.consumes_counters
            if counter in c.counters and counter_set in (None, c.counter_set)}
    values = (counter_sets.get(pool, {}).get(name, {}).get(counter) for pool, name in sets)
    return sum((v.value for v in values if v is not None), Fraction(0))


def pool_counter_sets(slices: Iterable[ResourceSlice]) -> dict[str, dict[str, Mapping[str, Quantity]]]:
    """The shared counter sets of each pool's newest generation."""
    newest: dict[str, int] = {}
    slices = tuple(slices)
    for item in slices:
        pool = f"{item.driver}/{item.pool_name}"
        newest[pool] = max(newest.get(pool, item.pool_generation), item.pool_generation)
    found: dict[str, dict[str, Mapping[str, Quantity]]] = {}
    for item in slices:
        pool = f"{item.driver}/{item.pool_name}"
        if item.pool_generation == newest[pool]:
            found.setdefault(pool, {}).update({c.name: c.counters for c in item.shared_counters})
    return found


# ----- conditions ---------------------------------------------------------------------------------
def condition(kind: str, ok: bool, reason: str, message: str, now: str,
              previous: Iterable[Mapping[str, Any]] = ()) -> dict[str, str]:
    """A standard condition; its lastTransitionTime is kept from `previous` while its status stays."""
    status = "True" if ok else "False"
    before = next((c for c in previous if c.get("type") == kind), None)
    since = str(before.get("lastTransitionTime") or now) if before is not None and before.get("status") == status \
        else now
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": since}


def quota_unit_ready(problem: str | None, status: Mapping[str, Any] | None, now: str,
                     previous: Iterable[Mapping[str, Any]] = ()) -> dict[str, str]:
    """`Ready` of a QuotaUnit: False with the problem (the unit does not parse or compile, or fails on a
    device); True with what it covers otherwise."""
    if problem is not None:
        return condition(READY, False, "Invalid", problem, now, previous)
    assert status is not None
    message = f"counts {status['matchingDevices']} devices, capacity {status['capacity']}"
    if not status["matchingDevices"] and status["capacity"] == "0":
        return condition(READY, True, "NothingToCount", message + ": no device or node offers what it counts yet",
                         now, previous)
    return condition(READY, True, "Counting", message, now, previous)


def cluster_queue_active(queue: ClusterQueue, usable_units: Collection[str], unit_problems: Mapping[str, str],
                         usage_current: bool, now: str, previous: Iterable[Mapping[str, Any]] = (),
                         usage_unknown: str = "") -> dict[str, str]:
    """`Active` of a ClusterQueue: whether it admits groups now, and if not, why. `usage_unknown` says why
    the usage of this queue (or its cohort) alone is unknown (`QueueState.usage_unknown`)."""
    if not usage_current:
        return condition(ACTIVE, False, "UsageUnknown", "queue usage cannot be rebuilt from PodGroup status; "
                         "nothing is admitted until it can (the operator's log says why)", now, previous)
    broken = [f"{q.unit} ({unit_problems[q.unit]})" for q in queue.quotas if q.unit in unit_problems]
    if broken:
        return condition(ACTIVE, False, "QuotaUnitInvalid", "admits nothing new: QuotaUnit " + "; ".join(broken),
                         now, previous)
    missing = [q.unit for q in queue.quotas if q.unit not in usable_units]
    if missing:
        return condition(ACTIVE, False, "QuotaUnitMissing", f"admits nothing new: QuotaUnit {', '.join(missing)} "
                         "does not exist; restore it or remove it from spec.quotas", now, previous)
    if usage_unknown:
        return condition(ACTIVE, False, "UsageUnknown", f"admits nothing new while its usage is unknown: "
                         f"{usage_unknown}", now, previous)
    return condition(ACTIVE, True, "Ready", "admitting groups", now, previous)


def invalid_queue_active(problem: str, now: str, previous: Iterable[Mapping[str, Any]] = ()) -> dict[str, str]:
    """`Active` of a ClusterQueue that does not parse: its groups wait, naming the reason."""
    return condition(ACTIVE, False, "Invalid", f"admits nothing: {problem}", now, previous)


def invalid_unit_event(previous: Iterable[Mapping[str, Any]], ready: Mapping[str, str]) -> tuple[str, str] | None:
    """The Event (reason, message) to send when a QuotaUnit's `Ready` turns False or names another problem
    (`previous`: its conditions before); None otherwise."""
    before = next((c for c in previous if c.get("type") == READY), {})
    if ready["status"] != "False" or (before.get("status"), before.get("message")) == ("False", ready["message"]):
        return None
    return "QuotaUnitInvalid", f"{ready['message']}; ClusterQueues that quote it admit nothing new until it is fixed"
