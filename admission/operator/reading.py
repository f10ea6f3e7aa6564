"""From cached manifests to the pure core's input: one `Reading` of the cache holds the `CycleInput`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from admission.core.allocator import Snapshot
from admission.core.cycle import (
    CycleInput,
    GroupView,
    charging_inventory,
    collect_groups,
    promised_devices,
    rebuild_state,
)
from admission.core.errors import DraqError
from admission.core.features import FeatureGates
from admission.core.labels import QUEUE_LABEL
from admission.core.models import Model, Pod, parse_object
from admission.core.quota import (
    ClusterQueue,
    CompiledUnit,
    DraCel,
    QueueState,
    compile_unit,
    device_selected,
    parse_cluster_queue,
    parse_local_queue,
    parse_pod_group,
    parse_quota_unit,
)
from admission.core.quota.status import unit_problems
from admission.core.quota.unreadable import Unreadable, unreadable
from admission.kube.clock import SYSTEM_CLOCK, Clock
from admission.operator.cache import OperatorCache

log = logging.getLogger(__name__)
T = TypeVar("T")
DRA_KINDS = ("Node", "DeviceClass", "ResourceSlice", "DeviceTaintRule", "ResourceClaim", "ResourceClaimTemplate")


@dataclass(frozen=True, slots=True)
class Reading:
    """One consistent reading of the cache: the cycle's input, plus what the shell needs to write back."""

    cycle: CycleInput
    cluster_queues: tuple[ClusterQueue, ...]
    manifests: Mapping[str, Mapping[str, Any]]  # `Pod ns/name`, `PodGroup ns/name` -> cached manifest
    # False when the usage could not be rebuilt from PodGroup status: `cycle.state` is then the last good one.
    usage_current: bool = True


class CacheReader:
    """Parses the cache; objects that do not parse are skipped with one warning each (per version).

    draq's own objects that do not parse, and QuotaUnits that fail on the cluster's devices, are named in
    `CycleInput.invalid` with the reason, so that only the groups and queues that use them wait.
    """

    def __init__(self, cache: OperatorCache, gates: FeatureGates, clock: Clock = SYSTEM_CLOCK) -> None:
        self.cache = cache
        self.gates = gates
        self.clock = clock
        self._warned: set[tuple[str, str]] = set()
        self._last_good: QueueState | None = None
        self._known_pods: dict[str, tuple[str, Pod]] = {}  # `ns/name` -> (resourceVersion, parsed)

    def read(self) -> Reading:
        models: list[Model] = []
        for kind in DRA_KINDS:
            models.extend(self._parsed(kind, lambda m: parse_object(m)))
        pod_manifests = self.cache.objects("Pod")
        pods = self._pods(pod_manifests)
        group_manifests = self.cache.objects("PodGroup")
        bad: list[Unreadable] = []
        pod_groups = self._parse_each("PodGroup", group_manifests, parse_pod_group, bad)
        created = {f"{_meta(m).get('namespace')}/{_meta(m).get('name')}": str(_meta(m).get("creationTimestamp", ""))
                   for m in group_manifests}
        groups = collect_groups(pods, pod_groups, created, {b.key: b.reason for b in bad})
        queues = tuple(self._parsed("ClusterQueue", parse_cluster_queue, bad))
        local_queues = {q.key: q for q in self._parsed("LocalQueue", parse_local_queue, bad)}
        compiled = self._parsed("QuotaUnit", lambda m: compile_unit(parse_quota_unit(m), DraCel()), bad)
        labels = {str(_meta(n).get("name")): dict(_meta(n).get("labels") or {})
                  for n in self.cache.objects("Namespace")}
        manifests = {f"Pod {_key(m)}": m for m in pod_manifests if QUEUE_LABEL in (_meta(m).get("labels") or {})}
        manifests.update({f"PodGroup {_key(m)}": m for m in group_manifests})
        state, current = self._state(queues, groups, bad)
        snapshot = Snapshot.from_models([*models, *pods])  # every pod: those on nodes take their room
        units, invalid = self._usable(compiled, snapshot, bad)
        cycle = CycleInput(snapshot, self.gates, groups, local_queues, units, state, device_selected,
                           promised_devices(groups, snapshot.claims), labels, self.clock.now(),
                           timer=self.clock.monotonic, invalid=invalid)
        return Reading(cycle, queues, manifests, current)

    def _usable(self, units: list[CompiledUnit], snapshot: Snapshot,
                bad: list[Unreadable]) -> tuple[tuple[CompiledUnit, ...], dict[str, str]]:
        """The units that work on the cluster's devices, and every object found invalid: `Kind key` -> why."""
        failing = unit_problems(units, charging_inventory(snapshot, self.gates), device_selected)
        for name, problem in sorted(failing.items()):
            self._warn_once(f"QuotaUnit {name}", problem, "QuotaUnit %s cannot be used: %s", name, problem)
        invalid = {b.label: b.reason for b in bad} | {f"QuotaUnit {name}": why for name, why in failing.items()}
        return tuple(u for u in units if u.name not in failing), invalid

    def _state(self, queues: tuple[ClusterQueue, ...], groups: tuple[GroupView, ...],
               bad: list[Unreadable]) -> tuple[QueueState, bool]:
        """The usage recorded in PodGroup status (unknown where an unreadable object may hold quota); when it
        cannot be rebuilt at all, the last good usage, never an empty one."""
        try:
            self._last_good = rebuild_state(queues, groups, bad)
            return self._last_good, True
        except DraqError as err:
            kept = "keeping the last good usage" if self._last_good is not None else "no usage known yet"
            log.error("rebuilding queue usage from PodGroup status: %s; %s and admitting nothing until "
                      "it can be rebuilt", err, kept)
            return self._last_good or QueueState.empty(queues), False

    def _pods(self, manifests: Iterable[Mapping[str, Any]]) -> list[Pod]:
        """Every cached pod parsed; a pod whose resourceVersion did not change since the last reading is
        not parsed again (a cluster's pods are many, and most do not change between cycles)."""
        known, self._known_pods = self._known_pods, {}
        pods = []
        for manifest in manifests:
            version = str(_meta(manifest).get("resourceVersion") or "")
            key = _key(manifest)
            seen = known.get(key)
            if version and seen is not None and seen[0] == version:
                pod: Pod | None = seen[1]
            else:
                parsed = self._parse_each("Pod", [manifest], parse_object)
                pod = parsed[0] if parsed and isinstance(parsed[0], Pod) else None
            if pod is not None:
                pods.append(pod)
                if version:
                    self._known_pods[key] = (version, pod)
        return pods

    def _parsed(self, kind: str, parse: Callable[[Mapping[str, Any]], T],
                bad: list[Unreadable] | None = None) -> list[T]:
        return self._parse_each(kind, self.cache.objects(kind), parse, bad)

    def _parse_each(self, kind: str, manifests: Iterable[Mapping[str, Any]],
                    parse: Callable[[Mapping[str, Any]], T], bad: list[Unreadable] | None = None) -> list[T]:
        """The objects that parse; the others are warned about once per version and, with `bad`, listed there."""
        parsed = []
        for manifest in manifests:
            try:
                parsed.append(parse(manifest))
            except DraqError as err:
                label = f"{kind} {_key(manifest)}"
                self._warn_once(label, str(_meta(manifest).get("resourceVersion")), "ignoring %s: %s", label, err)
                if bad is not None:
                    bad.append(unreadable(kind, manifest, err))
        return parsed

    def _warn_once(self, what: str, version: str, message: str, *args: object) -> None:
        if (what, version) not in self._warned:
            self._warned.add((what, version))
            log.warning(message, *args)


def _meta(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = manifest.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _key(manifest: Mapping[str, Any]) -> str:
    meta = _meta(manifest)
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))

