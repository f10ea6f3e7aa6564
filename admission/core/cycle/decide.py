"""The whole admission decision, the same for the operator and for `draq simulate`.

`cycle_input` builds the decision's input from parsed objects; `decide` runs the admission pass (late
members first, then the pending groups in order) and then preemption for the groups left waiting.
The operator writes what `decide` returns; the simulator applies it to its simulated cluster.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import replace

from admission.core.allocator import Snapshot
from admission.core.cycle.admit import run_cycle
from admission.core.cycle.groups import GroupView
from admission.core.cycle.inventory import charging_inventory
from admission.core.cycle.preemption import plan_preemptions
from admission.core.cycle.promises import settled_promises
from admission.core.cycle.types import CycleInput, CycleResult, Wait
from admission.core.features import FeatureGates
from admission.core.models import ObjectRef, Topology
from admission.core.quota import CompiledUnit, LocalQueue, QueueState, device_selected
from admission.core.quota.status import unit_problems


def decide(cycle: CycleInput) -> CycleResult:
    """Admit or wait for every pending group, extend admitted groups with late members, and choose whom to
    preempt for the groups that wait; the preemptors' Waits say what happens to them."""
    result = run_cycle(cycle)
    preemptions = plan_preemptions(cycle, result)
    if not preemptions.preempts and not preemptions.waits:
        return result
    decisions = tuple(preemptions.waits.get(d.group, d) if isinstance(d, Wait) else d for d in result.decisions)
    return replace(result, decisions=decisions, preemptions=preemptions)


def cycle_input(snapshot: Snapshot, gates: FeatureGates, groups: tuple[GroupView, ...], state: QueueState,
                local_queues: Mapping[str, LocalQueue], units: tuple[CompiledUnit, ...], *,
                namespace_labels: Mapping[str, Mapping[str, str]] | None = None, now: dt.datetime | None = None,
                timer: Callable[[], float] | None = None, invalid: Mapping[ObjectRef, str] | None = None,
                unit_failures: Mapping[str, str] | None = None,
                topologies: Mapping[str, Topology] | None = None) -> CycleInput:
    """The decision's input. `invalid`: objects that did not parse, with why; `unit_failures`: the
    units that fail on the cluster's devices (name -> why), computed here when not given. Failing units are
    left out and named in `CycleInput.invalid`, so that only the queues quoting them wait."""
    failing = unit_failures if unit_failures is not None else unit_failures_of(snapshot, gates, units)
    usable = tuple(u for u in units if u.name not in failing)
    named = {**(invalid or {}), **{ObjectRef("QuotaUnit", "", name): why for name, why in failing.items()}}
    return CycleInput(snapshot, gates, groups, local_queues, usable, state, device_selected,
                      settled_promises(snapshot, gates, groups), namespace_labels, now, timer, named,
                      topologies=topologies or {})


def unit_failures_of(snapshot: Snapshot, gates: FeatureGates, units: tuple[CompiledUnit, ...]) -> dict[str, str]:
    """The units that cannot be evaluated on the snapshot's devices: name -> why."""
    return unit_problems(units, charging_inventory(snapshot, gates), device_selected)
