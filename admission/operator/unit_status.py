"""Status of QuotaUnits (matching devices, capacity, Ready) and the ClusterQueues' Active condition.

Computed in the core (`quota_unit_status`, `quota_unit_ready`, `cluster_queue_active`) from the same
reading as the cycle; written only when something besides a transition time changed. The
ClusterQueue's other status fields are the loop's (`_write_queue_status`): this step merges only
`status.conditions` into them. Each write is a merge patch of the status subresource, made only when the
cached object says something else. A unit that becomes invalid (it does not compile, or fails on a
device: `CycleInput.invalid`) also gets a Warning Event, once per problem; a ClusterQueue that does not
parse gets `Active=False` with the parser's reason.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from admission.core.cycle import charging_inventory
from admission.core.errors import DraqError
from admission.core.models import Node, ObjectRef
from admission.core.quota import (
    CompiledUnit,
    CounterSets,
    DraCel,
    Inventory,
    cluster_queue_active,
    compile_unit,
    device_selected,
    invalid_queue_active,
    invalid_unit_event,
    parse_quota_unit,
    pool_counter_sets,
    quota_unit_ready,
    quota_unit_status,
)
from admission.kube.client import KubeApiError
from admission.operator.cache import OperatorCache
from admission.operator.reading import Reading
from admission.operator.writer import Writer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Unit:
    name: str
    compiled: CompiledUnit | None
    problem: str | None
    manifest: Mapping[str, Any]  # as found in the cache

    @property
    def previous(self) -> Mapping[str, Any]:
        """The status found in the cache."""
        return self.manifest.get("status") or {}


class UnitStatusWriter:
    """Writes the statuses after each pass. What they are computed from is kept while it is the same: a
    unit's compiled form while its manifest is the same object, and its device figures while the unit, the
    devices, the nodes and the counter sets are (a pass with nothing changed recounts nothing)."""

    def __init__(self, cache: OperatorCache, writer: Writer) -> None:
        self.cache = cache
        self.writer = writer
        self._units: dict[str, tuple[Mapping[str, Any], _Unit]] = {}  # by name: the manifest compiled, its unit
        self._counting: _Counting | None = None

    async def write(self, reading: Reading) -> None:
        now = self.writer.now()
        units = [self._kept_unit(m, reading.cycle.invalid) for m in self.cache.objects("QuotaUnit")]
        if len(self._units) > len(units):  # units deleted
            self._units = {u.name: self._units[u.name] for u in units}
        counting = self._counting = _Counting.of(reading, self._counting)
        for unit in units:
            status = counting.status(unit, now)
            if await self._write(f"QuotaUnit {unit.name}", unit.previous, status,
                                 partial(self.writer.quota_unit_status, unit.name, status)):
                event = invalid_unit_event(unit.previous.get("conditions") or (), status["conditions"][0])
                if event is not None:
                    await self.writer.event(unit.manifest, *event, warning=True)
        await self._write_queues(reading, units, now)

    async def _write_queues(self, reading: Reading, units: list[_Unit], now: str) -> None:
        usable = {u.name for u in units if u.compiled is not None}
        invalid = {u.name: u.problem for u in units if u.problem is not None}
        queues = {str((m.get("metadata") or {}).get("name")): m for m in self.cache.objects("ClusterQueue")}
        for queue in reading.cluster_queues:
            previous = (queues.get(queue.name) or {}).get("status") or {}
            active = cluster_queue_active(queue, usable, invalid, reading.usage_current, now,
                                          previous.get("conditions") or (),
                                          reading.cycle.state.usage_unknown(queue.name))
            await self._write_active(queue.name, previous, active)
        for name, manifest in queues.items():
            problem = reading.cycle.invalid.get(ObjectRef("ClusterQueue", "", name))
            if problem is not None:
                previous = manifest.get("status") or {}
                await self._write_active(name, previous,
                                         invalid_queue_active(problem, now, previous.get("conditions") or ()))

    async def _write_active(self, queue: str, previous: Mapping[str, Any], active: dict[str, str]) -> None:
        body = {"conditions": [active]}
        await self._write(f"ClusterQueue {queue}", previous, body,
                          partial(self.writer.cluster_queue_status, queue, body))

    def _kept_unit(self, manifest: Mapping[str, Any], invalid: Mapping[ObjectRef, str]) -> _Unit:
        """`_unit`, compiled again only when the spec changed (not when only the status written last did)."""
        name = str((manifest.get("metadata") or {}).get("name"))
        kept = self._units.get(name)
        if kept is None or (kept[0] is not manifest and kept[0].get("spec") != manifest.get("spec")):
            kept = self._units[name] = (manifest, self._unit(manifest, {}))
        compiled, problem = kept[1].compiled, kept[1].problem
        if compiled is not None:
            problem = invalid.get(ObjectRef("QuotaUnit", "", name))
        return _Unit(name, compiled, problem, manifest)

    def _unit(self, manifest: Mapping[str, Any], invalid: Mapping[ObjectRef, str]) -> _Unit:
        """The unit compiled, with its problem: it does not compile, or (as the reading found) it fails on a device."""
        name = str((manifest.get("metadata") or {}).get("name"))
        try:
            compiled = compile_unit(parse_quota_unit(manifest), DraCel())
        except DraqError as err:
            return _Unit(name, None, str(err), manifest)
        return _Unit(name, compiled, invalid.get(ObjectRef("QuotaUnit", "", name)), manifest)

    async def _write(self, what: str, previous: Mapping[str, Any], status: Mapping[str, Any],
                     write: Callable[[], Awaitable[None]]) -> bool:
        """Write unless the cached object already says the same (transition times aside); True if written."""
        if _without_times({k: previous.get(k) for k in status}) == _without_times(status):
            return False
        try:
            await write()
        except KubeApiError as err:
            log.warning("status of %s: %s", what, err)
            return False
        return True


@dataclass(frozen=True, slots=True)
class _Counting:
    """What every unit's status is computed from: one reading's devices, nodes and counter sets, and the
    device figures computed from them by compiled unit (`figures`; handed on while they are the same)."""

    nodes: Mapping[str, Node]
    slices: object  # the snapshot's slices by pool, which `counters` is made of
    inventory: Inventory
    counters: CounterSets
    figures: dict[int, tuple[CompiledUnit, dict[str, Any]]]

    @staticmethod
    def of(reading: Reading, last: _Counting | None = None) -> _Counting:
        snapshot = reading.cycle.snapshot
        inventory = charging_inventory(snapshot, reading.cycle.gates)  # the same object while the devices are
        slices = snapshot.inventory.slices_by_pool
        if last is not None and last.slices is slices:
            if last.nodes is snapshot.nodes and last.inventory is inventory:
                return last
            counters = last.counters
        else:
            counters = pool_counter_sets(s for found in slices.values() for s in found)
        return _Counting(snapshot.nodes, slices, inventory, counters, {})

    def status(self, unit: _Unit, now: str) -> dict[str, Any]:
        if unit.compiled is None or unit.problem is not None:
            return self._invalid(unit, unit.problem or "", now)
        kept = self.figures.get(id(unit.compiled))
        if kept is not None and kept[0] is unit.compiled:
            status = kept[1]
        else:
            try:
                status = quota_unit_status(unit.compiled, self.inventory, device_selected, self.nodes.values(),
                                           self.counters)
            except DraqError as err:  # a failure the reading did not see yet
                return self._invalid(unit, str(err), now)
            self.figures[id(unit.compiled)] = (unit.compiled, status)
        return {**status, "conditions": [quota_unit_ready(None, status, now, unit.previous.get("conditions") or ())]}

    @staticmethod
    def _invalid(unit: _Unit, problem: str, now: str) -> dict[str, Any]:
        summary = unit.compiled.unit.describe() if unit.compiled is not None else None
        ready = quota_unit_ready(problem, None, now, unit.previous.get("conditions") or ())
        return {**_UNKNOWN, "summary": summary, "conditions": [ready]}


_UNKNOWN = {"matchingDevices": None, "capacity": None}  # merge patch: removed, not left stale


def _without_times(status: Mapping[str, Any]) -> Any:
    conditions = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions") or []]
    return {**status, "conditions": conditions}
