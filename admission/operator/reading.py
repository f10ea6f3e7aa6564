"""From cached manifests to the pure core's input: one `Reading` of the cache holds the `CycleInput`."""

from __future__ import annotations

import bisect
import gc
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import InitVar, dataclass, field, replace
from typing import Any, Generic, TypeVar

from admission.core.allocator import Snapshot
from admission.core.cycle import (
    CycleInput,
    GroupView,
    charging_inventory,
    claim_frees_room,
    cycle_input,
    node_frees_room,
    parse_pod_group_claims,
    pod_frees_room,
    rebuild_state,
    unit_failures_of,
    with_owners,
    with_pod_group_claims,
)
from admission.core.errors import DraqError
from admission.core.features import FeatureGates
from admission.core.labels import QUEUE_LABEL
from admission.core.models import (
    ObjectRef,
    Pod,
    ResourceQuota,
    Topology,
    apply_taint_rules,
    parse_object,
    parse_topology,
)
from admission.core.quota import (
    ClusterQueue,
    CompiledUnit,
    DraCel,
    LocalQueue,
    Phase,
    PodGroup,
    QueueState,
    Unreadable,
    compile_unit,
    parse_cluster_queue,
    parse_local_queue,
    parse_pod_group,
    parse_quota_unit,
    parse_sealed_pod_group,
    unreadable,
)
from admission.core.workloads import Membership, controller_of, membership, walk_key
from admission.kube import kinds
from admission.kube.clock import SYSTEM_CLOCK, Clock
from admission.kube.reflector import Key
from admission.operator.cache import OperatorCache
from admission.operator.grouping import GroupMemo

log = logging.getLogger(__name__)
T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
DRA_KINDS = ("Node", "DeviceClass", "ResourceSlice", "DeviceTaintRule", "ResourceClaim", "ResourceClaimTemplate")
# What could give a parked group room (`core.cycle.parking`): any change to these kinds, and the changes
# the predicates below tell for the others.
WORN_AFTER = 4096  # deleted models after which a kind's positions are numbered afresh (`_Positions`)
FREEZE_AFTER = 1000  # objects of one kind parsed afresh, from which the parsed models leave the collector's view
ROOM_ALWAYS = frozenset({"DeviceClass", "ResourceSlice", "DeviceTaintRule"})
ROOM_FREED: dict[str, Callable[[Any, Any], bool]] = {
    "Node": node_frees_room, "ResourceClaim": claim_frees_room, "Pod": pod_frees_room}


@dataclass(frozen=True, slots=True)
class Reading:
    """One consistent reading of the cache: the cycle's input, plus what the shell needs to write back."""

    cycle: CycleInput
    cluster_queues: tuple[ClusterQueue, ...]
    manifests: Mapping[ObjectRef, Mapping[str, Any]]  # managed Pods and PodGroups -> cached manifest
    # False when the usage could not be rebuilt from PodGroup status: `cycle.state` is then the last good one.
    usage_current: bool = True
    # Native ResourceQuotas: no admission decision reads them; the accounting gaps' metrics do.
    resource_quotas: tuple[ResourceQuota, ...] = ()
    # Group key -> member pod name -> its owner chain (only pods with a controller owner or a workloadRef).
    memberships: Mapping[str, Mapping[str, Membership]] = field(default_factory=dict)
    # The reader's index of `cycle.groups` when it is of these groups (kept while they are the same tuple).
    index: InitVar[GroupIndex | None] = None
    groups_index: GroupIndex = field(init=False)

    def __post_init__(self, index: GroupIndex | None) -> None:
        if index is None or index.groups is not self.cycle.groups:
            index = GroupIndex(self.cycle.groups)
        object.__setattr__(self, "groups_index", index)

    @property
    def by_key(self) -> Mapping[str, GroupView]:
        """`cycle.groups` by key."""
        return self.groups_index.by_key

    @property
    def holding(self) -> tuple[GroupView, ...]:
        """The groups whose record holds quota (admitted or running), in their order."""
        return self.groups_index.holding

    def pod_manifest(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.manifests.get(ObjectRef("Pod", namespace, name))


class GroupIndex:
    """A reading's groups by key, those whose record holds quota and those evicted: what the loop looks up or
    walks, made once per tuple of groups."""

    def __init__(self, groups: tuple[GroupView, ...]) -> None:
        self.groups = groups
        self.by_key: dict[str, GroupView] = {g.key: g for g in groups}
        self.holding = tuple(g for g in groups if g.holds_quota)
        self.evicted = tuple(g for g in groups if g.pod_group is not None and g.pod_group.phase is Phase.EVICTED)


class _Parsed:
    """One kind's cached objects parsed once per (uid, resourceVersion), in the cache's order, kept
    from one reading to the next; `models` and `bad` are new lists only when something changed."""

    def __init__(self) -> None:
        self.entries: dict[Key, _Entry] = {}
        self.kept: dict[Key, _Entry] = {}  # the entries `keep` selects (e.g. pods carrying draq's labels)
        # The entries with the operator's assumed writes in place of the stored objects (`cache.objects`).
        self.current: dict[Key, _Entry] = self.entries
        self.current_kept: dict[Key, _Entry] = self.kept
        self.models: list[Any] = []
        self.bad: list[Unreadable] = []
        self.overlaid = False  # the last output had assumed writes of the operator in it
        # The models by their own key (`ns/name`), as `models` orders them, and the keys changed in the
        # last reading (None: not known); kept where the reader asks for it (pods).
        self.by_key: dict[str, Any] = {}
        self.changed_keys: set[str] | None = None
        # ResourceQuotas only: `models` and the ResourceQuotas among them, kept while `models` is the same list.
        self.quotas: tuple[list[Any], tuple[ResourceQuota, ...]] | None = None
        # Bumped each time `models` is a new list, with the store keys whose entries that change touched (None:
        # not known, e.g. relisted or overlaid): what is derived from the entries follows them key by key.
        self.generation = 0
        self.changed_entries: set[Key] | None = None
        self.overlay_keys: set[Key] = set()  # the keys of the operator's writes overlaid in the last output
        # Each entry's index in `models` (entries without a model have none), made when first needed after
        # `models` was made afresh: a change replaces, appends or takes out models in a copy of the list.
        self.positions: _Positions | None = None

    def entries_changed_since(self, generation: int) -> set[Key] | None:
        """The store keys whose entries changed after `generation`, when known (it is the one before)."""
        return self.changed_entries if generation == self.generation - 1 else None


@dataclass(frozen=True, slots=True)
class _Entry:
    token: tuple[str, str]  # (uid, resourceVersion); ("", "") parses again every time
    manifest: Mapping[str, Any]
    model: Any  # the parsed object, or None
    bad: Unreadable | None


class _Derived(Generic[K, V]):
    """A mapping derived entry by entry from a kind's entries, `derive(key, entry) -> (its key, its value)`,
    made again only for the entries that are other objects than last time; the same mapping object while
    none is (a new one otherwise: an earlier reading's mapping never changes)."""

    def __init__(self, derive: Callable[[Key, _Entry], tuple[K, V]]) -> None:
        self._derive = derive
        self._entries: dict[Key, _Entry] = {}
        self._keys: dict[Key, K] = {}
        self._value: dict[K, V] = {}
        self._token: object = None
        self._generation = -2  # the kind's generation at the last `of` (none yet: compare all)

    def of(self, entries: Mapping[Key, _Entry], parsed: _Parsed) -> Mapping[K, V]:
        """`entries`: of the kind `parsed` (all of them, or those it keeps); looked at only where its entries
        changed when that is known, else all compared by identity."""
        token = parsed.models  # the same list while none of its entries changed
        if token is self._token:
            return self._value
        self._token = token
        touched = parsed.entries_changed_since(self._generation)
        self._generation = parsed.generation
        before = self._entries
        if touched is None:
            gone = before.keys() - entries.keys()
            changed = [(key, entry) for key, entry in entries.items() if before.get(key) is not entry]
        else:
            gone = {key for key in touched if key in before and key not in entries}
            changed = [(key, entry) for key in touched
                       if (entry := entries.get(key)) is not None and before.get(key) is not entry]
        if not gone and not changed:
            return self._value
        value = dict(self._value)
        for key in gone:
            del before[key]
            del value[self._keys.pop(key)]
        for key, entry in changed:
            derived_key, derived = self._derive(key, entry)
            old_key = self._keys.get(key)
            if old_key is not None and old_key != derived_key:
                del value[old_key]
            before[key], self._keys[key], value[derived_key] = entry, derived_key, derived
        self._value = value
        return value


class CacheReader:
    """Parses the cache; objects that do not parse are skipped with one warning each (per version).

    draq's own objects that do not parse, and QuotaUnits that fail on the cluster's devices, are named in
    `CycleInput.invalid` with the reason, so that only the groups and queues that use them wait.

    Kept between readings (`docs/operator.md`, "The cache and the snapshot"): every object parsed once per
    resourceVersion (only the keys the watch changed are looked at), the snapshot (each reading's is the
    previous one updated copy-on-write, with its node views and selector results), and what is derived
    from unchanged inputs (charging inventory, QuotaUnit problems).
    """

    def __init__(self, cache: OperatorCache, gates: FeatureGates, clock: Clock = SYSTEM_CLOCK) -> None:
        self.cache = cache
        self.gates = gates
        self.clock = clock
        self._warned: set[tuple[str, str]] = set()
        self._last_good: QueueState | None = None
        self._parsed: dict[str, _Parsed] = {}
        self._snapshot: Snapshot | None = None
        self._snapshot_inputs: dict[str, list[Any]] = {}
        self._pods_by_key: tuple[dict[str, Pod], set[str] | None] = ({}, None)
        # The nodes, claims and pods by key at the last reading, to tell which changes could give room.
        self._room_inputs: dict[str, dict[str, Any]] = {}
        # Bumped by every change that could give a waiting group room (`core.cycle.parking`).
        self.capacity_epoch = 0
        self._problems: tuple[tuple[CompiledUnit, ...], object, dict[str, str]] | None = None
        self.seal_key: bytes | None = None  # the record seal's key, loaded by the operator before its first pass
        self.adopting = False  # the first start with a new key: records it cannot verify are taken as draq's
        self._last_sealed: dict[str, PodGroup] = {}  # PodGroup uid -> its last record that traced to draq
        self.untraceable: set[str] = set()  # uids of the PodGroups whose record does not trace to draq
        # `_remember_sealed`: each PodGroup's part (its uid, and its key in the untraceable records when it is
        # one), those records, and the PodGroups' generation they follow.
        self._sealed_at: dict[Key, tuple[str, str | None]] = {}
        self._unsealed: dict[str, PodGroup | None] = {}
        self._sealed_generation = -2
        self.workload_kinds: frozenset[str] = frozenset()  # the enabled integrations' kinds the cache watches
        self._groups = GroupMemo()
        self._created: _Derived[str, str] = _Derived(lambda key, e: (f"{key[0]}/{key[1]}", _created(e.manifest)))
        self._pod_manifests: _Derived[ObjectRef, Mapping[str, Any]] = _Derived(
            lambda key, e: (ObjectRef("Pod", *key), e.manifest))
        self._group_manifests: _Derived[ObjectRef, Mapping[str, Any]] = _Derived(
            lambda key, e: (ObjectRef("PodGroup", *key), e.manifest))
        empty: dict[ObjectRef, Mapping[str, Any]] = {}
        self._index: GroupIndex | None = None
        # `_owned`: each group's view, owner chains and result at the last reading, and its last tuple.
        self._owners_memo: dict[str, tuple[GroupView, dict[str, Membership], GroupView]] = {}
        self._owned_last: tuple[GroupView, ...] = ()
        self._owned_input: tuple[GroupView, ...] | None = None
        self._owned_chains: dict[str, dict[str, Membership]] = {}
        self._state_inputs: tuple[tuple[ClusterQueue, ...], tuple[GroupView, ...], list[Unreadable]] | None = None
        self._kept_groups: tuple[tuple[object, object], tuple[GroupView, ...], dict[str, PodGroup | None]] | None = None
        self._merged: tuple[tuple[object, object], dict[ObjectRef, Mapping[str, Any]]] = ((None, None), empty)

    def read(self) -> Reading:
        inputs: dict[str, list[Any]] = {kind: self._models(kind, parse_object, keyed=kind in ROOM_FREED)
                                         for kind in DRA_KINDS}
        inputs["Pod"] = self._models("Pod", _pod_or_none, keep=_has_queue_label, keyed=True)
        pod_memo = self._parsed["Pod"]
        self._pods_by_key = (pod_memo.by_key, pod_memo.changed_keys)
        pod_groups = self._models("PodGroup", self._parse_pod_group, keyed=True)
        group_entries = self._parsed["PodGroup"].current
        groups, unsealed = self._collected(pod_memo, pod_groups)
        queues = tuple(self._models("ClusterQueue", parse_cluster_queue))
        local_queues = {q.key: q for q in self._models("LocalQueue", parse_local_queue)}
        compiled = self._models("QuotaUnit", lambda m: compile_unit(parse_quota_unit(m), DraCel()))
        # An untraceable record whose last sealed one is known holds what that one holds (`counted_record`).
        bad = [replace(b, holds_quota_in="") if unsealed.get(b.key) is not None
               else _own_queue(b, group_entries, local_queues) if b.unsealed else b for b in self._bad("PodGroup")]
        bad += [b for kind in ("ClusterQueue", "LocalQueue", "QuotaUnit") for b in self._bad(kind)]
        topologies = self._topologies()
        bad += self._bad("Topology") if "Topology" in self._parsed else []
        labels = {str(_meta(n).get("name")): dict(_meta(n).get("labels") or {})
                  for n in self.cache.objects("Namespace")}
        manifests = self._manifests(pod_memo, self._parsed["PodGroup"])
        groups, memberships = self._owned(groups, manifests)
        self._owned_last = groups
        groups = self._with_pod_group_claims(groups)
        state, current = self._state(queues, groups, bad)
        snapshot = self._snapshot_of(inputs)  # every pod: those on nodes take their room
        cycle = cycle_input(snapshot, self.gates, groups, state, local_queues, tuple(compiled),
                            namespace_labels=labels, now=self.clock.now(), timer=self.clock.monotonic,
                            invalid={b.ref: b.reason for b in bad},
                            unit_failures=self._unit_failures(compiled, snapshot), topologies=topologies)
        if self._index is None or self._index.groups is not groups:
            self._index = GroupIndex(groups)
        return Reading(cycle, queues, manifests, current, self._resource_quotas(), memberships, self._index)

    def _collected(self, pod_memo: _Parsed, pod_groups: list[PodGroup]
                   ) -> tuple[tuple[GroupView, ...], dict[str, PodGroup | None]]:
        """The groups from the managed pods and the PodGroups, and the untraceable records (`_remember_sealed`);
        the same as last time, at once, while neither kind changed (`_models` then returns the same list)."""
        tokens = (pod_memo.models, pod_groups)
        kept = self._kept_groups
        if kept is not None and kept[0][0] is tokens[0] and kept[0][1] is tokens[1]:
            return kept[1], kept[2]
        changed = pod_memo.changed_keys
        managed = [e.model for e in pod_memo.current_kept.values() if e.model is not None] if changed is None else []
        created = self._created.of(self._parsed["PodGroup"].current, self._parsed["PodGroup"])
        only_pods = kept is not None and kept[0][1] is pod_groups
        unsealed = kept[2] if kept is not None and only_pods else self._remember_sealed()
        group_memo = self._parsed["PodGroup"]
        groups = self._groups.collect(managed, pod_groups, created,
                                      {b.key: b.reason for b in self._bad("PodGroup")}, unsealed,
                                      None if changed is None else (pod_memo.by_key, changed),
                                      None if group_memo.changed_keys is None
                                      else (group_memo.by_key, group_memo.changed_keys))
        self._kept_groups = (tokens, groups, unsealed)
        return groups, unsealed

    def _owned(self, groups: tuple[GroupView, ...], manifests: Mapping[ObjectRef, Mapping[str, Any]]
               ) -> tuple[tuple[GroupView, ...], dict[str, dict[str, Membership]]]:
        """Each group as its members' owner chains make it (`with_owners`), and those chains. Pods with the
        same owner share one walk. While no owner object changed, a group that is the same view as last time
        is given its last result and chains at once, and the tuple is the last one while every group is: what
        follows the reading (its index, the queue usage, the cycle's lines) is kept by the tuple's identity."""
        if not self.workload_kinds:
            return groups, {}
        kept = {} if self._owners_changed() else self._owners_memo
        if kept and groups is self._owned_input:
            return self._owned_last, self._owned_chains
        owners = _CacheOwners(self.cache)
        walked: dict[tuple[Any, ...], Membership] = {}
        found: dict[str, dict[str, Membership]] = {}
        memo: dict[str, tuple[GroupView, dict[str, Membership], GroupView]] = {}
        updated = []
        for group in groups:
            last = kept.get(group.key)
            if last is not None and last[0] is group:
                members, view = last[1], last[2]
            else:
                members = self._chains(group, manifests, owners, walked)
                view = with_owners(group, members)
            if members:
                found[group.key] = members
            memo[group.key] = (group, members, view)
            updated.append(view)
        self._owners_memo, self._owned_input, self._owned_chains = memo, groups, found
        return _same_or_new(self._owned_last, updated), found

    def _chains(self, group: GroupView, manifests: Mapping[ObjectRef, Mapping[str, Any]], owners: _CacheOwners,
                walked: dict[tuple[Any, ...], Membership]) -> dict[str, Membership]:
        """The owner chains of the group's members, by pod name (only pods with a controller or a workload)."""
        members: dict[str, Membership] = {}
        for pod in group.pods:
            if pod.meta.controller is None and not pod.workload:
                continue  # no owner chain to walk (the common case: checked before any lookup)
            manifest = manifests.get(ObjectRef("Pod", pod.namespace, pod.name))
            if manifest is None or not (controller_of(manifest) or pod.workload):
                continue
            key = walk_key(manifest)
            if key not in walked:
                walked[key] = membership(manifest, owners, self.workload_kinds)
            members[pod.name] = walked[key]
        return members

    def _owners_changed(self) -> bool:
        """Whether an object of a kind the reader does not parse (the owners: workloads, their controllers) changed
        since the last reading, or is overlaid by a write of the operator."""
        changed = False
        for kind, reflector in self.cache.reflectors.items():
            if kind in self._parsed:
                continue
            relisted, dirty = reflector.take_changes()
            changed |= relisted or bool(dirty) or bool(self.cache.assumed(kind))
        return changed

    def _with_pod_group_claims(self, groups: tuple[GroupView, ...]) -> tuple[GroupView, ...]:
        """Members' claim entries that are PodGroup-level claims of the scheduling PodGroup they name, marked
        (where the cache watches those PodGroups: the cluster serves v1alpha2 or v1beta1)."""
        if kinds.SCHEDULING_POD_GROUP not in self.cache.reflectors:
            return groups
        claims = {f"{_meta(m).get('namespace')}/{_meta(m).get('name')}": found
                  for m in self.cache.objects(kinds.SCHEDULING_POD_GROUP) if (found := parse_pod_group_claims(m))}
        if not claims:
            return groups
        marked = [with_pod_group_claims(g, claims) for g in groups]
        return groups if all(a is b for a, b in zip(marked, groups, strict=True)) else tuple(marked)

    def _topologies(self) -> dict[str, Topology]:
        """The cached Topologies that parse, by name (none where the cache does not watch them)."""
        if "Topology" not in self.cache.reflectors:
            return {}
        return {t.name: t for t in self._models("Topology", parse_topology)}

    def _manifests(self, pods: _Parsed, groups: _Parsed) -> Mapping[ObjectRef, Mapping[str, Any]]:
        """The managed pods' and the PodGroups' manifests by identity: the same mapping as last time while
        neither changed."""
        pod_manifests = self._pod_manifests.of(pods.current_kept, pods)
        group_manifests = self._group_manifests.of(groups.current, groups)
        parts, merged = self._merged
        if parts[0] is not pod_manifests or parts[1] is not group_manifests:
            merged = {**pod_manifests, **group_manifests}
            self._merged = ((pod_manifests, group_manifests), merged)
        return merged

    def _parse_pod_group(self, manifest: Mapping[str, Any]) -> PodGroup:
        """A PodGroup whose record draq can trace to its own writes (`admission.core.quota.seal`); without a
        key (before the operator has loaded it) records are read as they stand."""
        if self.seal_key is None:
            return parse_pod_group(manifest)
        uid = str(_meta(manifest).get("uid") or "")
        return parse_sealed_pod_group(manifest, self.seal_key, self.adopting, self._last_sealed.get(uid))

    def _remember_sealed(self) -> dict[str, PodGroup | None]:
        """Remember each PodGroup's record that traced to draq (by uid); return the groups whose record did
        not, each with the record draq last sealed for it (None when this process never saw one). Only the
        PodGroups whose entries changed since the last call are looked at, when that is known."""
        memo = self._parsed["PodGroup"]
        touched = memo.entries_changed_since(self._sealed_generation)
        self._sealed_generation = memo.generation
        at = self._sealed_at
        if touched is None or any(not uid for key in touched for uid in (
                memo.current[key].token[0] if key in memo.current else "-", at[key][0] if key in at else "-")):
            return self._remember_all()
        unsealed = dict(self._unsealed) if touched else self._unsealed
        for key in touched:
            old = at.pop(key, None)
            previous = None
            if old is not None:
                previous = self._last_sealed.pop(old[0], None)
                self.untraceable.discard(old[0])
                if old[1] is not None:
                    unsealed.pop(old[1], None)
            entry = memo.current.get(key)
            if entry is not None:
                uid = entry.token[0]
                self._remember(key, entry, previous if old is not None and old[0] == uid
                               else self._last_sealed.get(uid), unsealed)
        self._unsealed = unsealed
        return unsealed

    def _remember_all(self) -> dict[str, PodGroup | None]:
        """`_remember_sealed` from every PodGroup (PodGroups that are gone are forgotten)."""
        last = self._last_sealed
        unsealed: dict[str, PodGroup | None] = {}
        self._last_sealed, self._sealed_at = {}, {}
        self.untraceable.clear()
        for key, entry in self._parsed["PodGroup"].current.items():
            self._remember(key, entry, last.get(entry.token[0]), unsealed)
        self._unsealed = unsealed
        return unsealed

    def _remember(self, key: Key, entry: _Entry, last: PodGroup | None, unsealed: dict[str, PodGroup | None]) -> None:
        """One PodGroup's part: its record when it traces to draq, else (untraceable) the one `last` sealed."""
        uid = entry.token[0]
        if entry.model is not None:
            self._last_sealed[uid] = entry.model
            self._sealed_at[key] = (uid, None)
        elif entry.bad is not None and entry.bad.unsealed:
            self.untraceable.add(uid)
            unsealed[entry.bad.key] = last
            if last is not None:
                self._last_sealed[uid] = last
            self._sealed_at[key] = (uid, entry.bad.key)

    def _resource_quotas(self) -> tuple[ResourceQuota, ...]:
        """The cached ResourceQuotas that parse (none where the cache has no ResourceQuota reflector)."""
        if "ResourceQuota" not in self.cache.reflectors:
            return ()
        models = self._models("ResourceQuota", parse_object)
        memo = self._parsed["ResourceQuota"]
        if memo.quotas is None or memo.quotas[0] is not models:
            memo.quotas = (models, tuple(m for m in models if isinstance(m, ResourceQuota)))
        return memo.quotas[1]

    def _snapshot_of(self, inputs: dict[str, list[Any]]) -> Snapshot:
        """This reading's snapshot: the previous one updated with the kinds whose objects changed."""
        previous, before = self._snapshot, self._snapshot_inputs
        changed = {kind for kind, models in inputs.items() if before.get(kind) is not models}
        if previous is None:
            snapshot = Snapshot.from_models([m for models in inputs.values() for m in models])
        elif changed:
            slices = None
            if changed & {"ResourceSlice", "DeviceTaintRule"}:
                slices = apply_taint_rules(inputs["ResourceSlice"], inputs["DeviceTaintRule"])
            snapshot = previous.updated(
                nodes=inputs["Node"] if "Node" in changed else None,
                classes=inputs["DeviceClass"] if "DeviceClass" in changed else None,
                slices=slices,
                claims=inputs["ResourceClaim"] if "ResourceClaim" in changed else None,
                templates=inputs["ResourceClaimTemplate"] if "ResourceClaimTemplate" in changed else None,
                pods=self._pods_by_key[0] if "Pod" in changed else None,
                changed_pods=self._pods_by_key[1])
        else:
            snapshot = previous
        if snapshot is not previous and self._room_freed(changed):
            self.capacity_epoch += 1
        self._snapshot, self._snapshot_inputs = snapshot, inputs
        self._room_inputs = {kind: self._parsed[kind].by_key for kind in ROOM_FREED}
        return snapshot

    def _room_freed(self, kinds: set[str]) -> bool:
        """Whether the changed kinds could give a waiting group room. Templates never do (a group sees its
        own); slices, classes and taint rules always may; nodes, claims and pods are compared one by one."""
        if kinds & ROOM_ALWAYS:
            return True
        return any(self._freed_by(kind, frees) for kind, frees in ROOM_FREED.items() if kind in kinds)

    def _freed_by(self, kind: str, frees: Callable[[Any, Any], bool]) -> bool:
        memo, before = self._parsed[kind], self._room_inputs.get(kind)
        if before is None:
            return True
        now, keys = memo.by_key, memo.changed_keys
        if keys is None:  # relisted or overlaid: compare all, skipping the objects that are the same
            keys = {key for key in before.keys() | now.keys() if before.get(key) is not now.get(key)}
        return any(frees(before.get(key), now.get(key)) for key in keys)

    def _unit_failures(self, units: list[CompiledUnit], snapshot: Snapshot) -> dict[str, str]:
        """The units that fail on the cluster's devices (name -> why), computed again only when the units or
        the charging inventory changed; each is logged once."""
        known = self._problems
        marker = charging_inventory(snapshot, self.gates)  # the same object while the devices are the same
        if known is not None and known[1] is marker and len(known[0]) == len(units) \
                and all(a is b for a, b in zip(known[0], units, strict=True)):
            failing = known[2]
        else:
            failing = unit_failures_of(snapshot, self.gates, tuple(units))
            self._problems = (tuple(units), marker, failing)
        for name, problem in sorted(failing.items()):
            self._warn_once(f"QuotaUnit {name}", problem, "QuotaUnit %s cannot be used: %s", name, problem)
        return failing

    def _state(self, queues: tuple[ClusterQueue, ...], groups: tuple[GroupView, ...],
               bad: list[Unreadable]) -> tuple[QueueState, bool]:
        """The usage recorded in PodGroup status (unknown where an unreadable object may hold quota); when it
        cannot be rebuilt at all, the last good usage, never an empty one. Rebuilt only when the queues or
        groups are other objects, or the unreadable objects others, than at the last good rebuild."""
        before = self._state_inputs
        if before is not None and self._last_good is not None and before[1] is groups \
                and _same_objects(before[0], queues) and before[2] == bad:
            return self._last_good, True
        try:
            self._last_good = rebuild_state(queues, groups, bad)
            self._state_inputs = (queues, groups, list(bad))
            return self._last_good, True
        except DraqError as err:
            kept = "keeping the last good usage" if self._last_good is not None else "no usage known yet"
            log.error("rebuilding queue usage from PodGroup status: %s; %s and admitting nothing until "
                      "it can be rebuilt", err, kept)
            return self._last_good or QueueState.empty(queues), False

    def _bad(self, kind: str) -> list[Unreadable]:
        """The kind's objects that did not parse at its last `_models`."""
        return self._parsed[kind].bad

    def _models(self, kind: str, parse: Callable[[Mapping[str, Any]], T],
                keep: Callable[[Mapping[str, Any]], bool] | None = None, keyed: bool = False) -> list[T]:
        """The kind's objects that parse, in the cache's order (the operator's assumed writes in place of
        the stored objects), parsed only where the watch changed them; the same list as last time when
        nothing changed (those that do not parse: `_bad`). With `keep`, the entries it selects are also kept
        apart (`_Parsed.kept`); with `keyed`, the models are also kept by their own key (`_Parsed.by_key`)."""
        memo = self._parsed.get(kind)
        reflector = self.cache.reflectors[kind]
        relisted, dirty = reflector.take_changes()
        if memo is None:  # a new reader reads the whole store
            memo = self._parsed[kind] = _Parsed()
            relisted, dirty = True, {}
        store = reflector.store
        changed = relisted or bool(dirty)
        was_overlaid = memo.overlaid
        changed_keys: set[str] | None = None if relisted or was_overlaid else set()
        by_key = memo.by_key if not keyed or not dirty or changed_keys is None else dict(memo.by_key)
        if relisted:
            known, memo.entries, memo.kept = memo.entries, {}, {}
            for key, stored in store.items():
                self._enter(memo, key, self._entry(kind, stored, known.get(key), parse), keep)
            if len(store) >= FREEZE_AFTER:
                # The first reading of a large cluster makes millions of objects; the cycle collector would walk
                # them again and again as more kinds are parsed (a fifth of that reading's CPU): they are moved
                # out of its view now, as after every pass (`admission.operator.heap`).
                gc.freeze()
        previous: dict[Key, _Entry | None] = {}
        if not relisted:
            for key, moved in dirty.items():
                manifest = store.get(key)
                old = memo.entries.pop(key, None) if moved else memo.entries.get(key)
                previous[key] = old
                if manifest is None:
                    memo.entries.pop(key, None)
                    memo.kept.pop(key, None)
                    entry = None
                else:
                    entry = self._entry(kind, manifest, old, parse)
                    self._enter(memo, key, entry, keep)
                if keyed and changed_keys is not None:
                    self._rekey(by_key, changed_keys, old, entry, moved)
        assumed = self.cache.assumed(kind)
        if assumed or changed or memo.overlaid:  # `models` is a new list below
            memo.generation += 1
            # Entries differ from the last output's where the watch changed them and where a write of the
            # operator's is overlaid now or was then.
            memo.changed_entries = None if relisted else {*dirty, *assumed, *memo.overlay_keys}
        memo.overlay_keys = set(assumed)
        if assumed:
            entries = dict(memo.entries)
            for key, manifest in assumed.items():
                entries[key] = self._entry(kind, manifest, memo.entries.get(key), parse)
            memo.current = entries
            memo.current_kept = ({key: e for key, e in entries.items() if keep(e.manifest)} if keep is not None
                                 else {})
            memo.models = [e.model for e in entries.values() if e.model is not None]
            memo.bad = [e.bad for e in entries.values() if e.bad is not None]
            memo.positions = None
            memo.overlaid = True
            changed_keys = None
            if keyed:
                by_key = {m.key: m for m in memo.models}
        elif changed or memo.overlaid:
            memo.current, memo.current_kept = memo.entries, memo.kept
            in_place = None if relisted or memo.overlaid else _patched(memo, dirty, previous)
            if in_place is not None:
                memo.models = in_place
            else:
                memo.models = [e.model for e in memo.entries.values() if e.model is not None]
                memo.bad = [e.bad for e in memo.entries.values() if e.bad is not None]
                # Numbered now unless relisted (then at the first change), so that the next add or delete is
                # made to a copy of the list, not by a pass over every entry.
                memo.positions = None if relisted else _Positions(
                    key for key, e in memo.entries.items() if e.model is not None)
            memo.overlaid = False
            if keyed and changed_keys is None:
                by_key = {m.key: m for m in memo.models}
        memo.by_key, memo.changed_keys = by_key, changed_keys
        return memo.models

    @staticmethod
    def _rekey(by_key: dict[str, Any], changed: set[str], old: _Entry | None, new: _Entry | None,
               moved: bool) -> None:
        """Keep `by_key` in the order `models` has: an object changed in place keeps its place, one that
        went to the end of the store goes to the end."""
        old_key = old.model.key if old is not None and old.model is not None else None
        new_key = new.model.key if new is not None and new.model is not None else None
        if old_key is not None and (moved or old_key != new_key):
            by_key.pop(old_key, None)
            changed.add(old_key)
        if new is not None and new_key is not None:
            by_key[new_key] = new.model
            changed.add(new_key)

    @staticmethod
    def _enter(memo: _Parsed, key: Key, entry: _Entry, keep: Callable[[Mapping[str, Any]], bool] | None) -> None:
        memo.entries[key] = entry
        if keep is not None and keep(entry.manifest):
            memo.kept[key] = entry
        else:
            memo.kept.pop(key, None)

    def _entry(self, kind: str, manifest: Mapping[str, Any], old: _Entry | None,
               parse: Callable[[Mapping[str, Any]], Any]) -> _Entry:
        meta = _meta(manifest)
        version = str(meta.get("resourceVersion") or "")
        token = (str(meta.get("uid") or ""), version)
        if old is not None and version and old.token == token and old.manifest is manifest:
            return old
        if old is not None and version and old.token == token:
            return _Entry(token, manifest, old.model, old.bad)
        try:
            return _Entry(token, manifest, parse(manifest), None)
        except DraqError as err:
            label = f"{kind} {_key(manifest)}"
            self._warn_once(label, str(meta.get("resourceVersion")), "ignoring %s: %s", label, err)
            return _Entry(token, manifest, None, unreadable(kind, manifest, err))

    def _warn_once(self, what: str, version: str, message: str, *args: object) -> None:
        if (what, version) not in self._warned:
            self._warned.add((what, version))
            log.warning(message, *args)


def _own_queue(bad: Unreadable, entries: Mapping[Key, _Entry],
               local_queues: Mapping[str, LocalQueue]) -> Unreadable:
    """An untraceable record whose last sealed one this process never saw may hold quota only where its own
    LocalQueue admits, whatever ClusterQueue it names: a forged record must not stop another tenant's queue
    (or every queue, when it names none)."""
    manifest = next((e.manifest for e in entries.values()
                     if f"{_meta(e.manifest).get('namespace')}/{_meta(e.manifest).get('name')}" == bad.key), {})
    spec = manifest.get("spec")
    queue = spec.get("queue") if isinstance(spec, Mapping) else None
    local = local_queues.get(f"{_meta(manifest).get('namespace')}/{queue}") if isinstance(queue, str) else None
    return replace(bad, holds_quota_in=local.cluster_queue if local is not None else "")


def _same_or_new(last: tuple[T, ...], now: list[T]) -> tuple[T, ...]:
    """`last` when `now` holds the same objects in the same order, else `now` as a tuple."""
    if len(last) == len(now) and all(a is b for a, b in zip(last, now, strict=True)):
        return last
    return tuple(now)
def _patched(memo: _Parsed, dirty: Mapping[Key, bool], previous: Mapping[Key, _Entry | None]) -> list[Any] | None:
    """`memo.models` with the changes made to a copy of it: a model changed in place replaced where it is,
    an added one (at the end of the store) appended, a deleted one taken out. None (the lists are made
    afresh) when an unreadable object is among the changes, an object gains or loses its model in place,
    or the changes are many."""
    if len(dirty) > max(64, len(memo.models) // 64):
        return None
    for key, moved in dirty.items():
        old, new = previous.get(key), memo.entries.get(key)
        if (old is not None and old.bad) or (new is not None and new.bad):
            return None
        if not moved and (old is None or new is None or (old.model is None) != (new.model is None)):
            return None
    if memo.positions is None:
        if any(dirty.values()):
            return None  # where the deleted and moved models were is not known without a pass over all
        memo.positions = _Positions(key for key, entry in memo.entries.items() if entry.model is not None)
    positions, models = memo.positions, list(memo.models)
    for key, moved in dirty.items():
        old, new = previous.get(key), memo.entries.get(key)
        if not moved:
            if new is not None and new.model is not None:
                models[positions.index(key)] = new.model
            continue
        if old is not None and old.model is not None:
            del models[positions.remove(key)]
        if new is not None and new.model is not None:
            positions.add(key)
            models.append(new.model)
    if positions.worn:
        memo.positions = None
    return models


class _Positions:
    """Each entry's index in a kind's `models`, kept through adds and deletes without renumbering: an entry
    is given the next number when it enters, and its index is its number less the numbers deleted before it."""

    __slots__ = ("_deleted", "_next", "_number")

    def __init__(self, keys: Iterable[Key]) -> None:
        self._number = {key: number for number, key in enumerate(keys)}
        self._next = len(self._number)
        self._deleted: list[int] = []  # sorted

    @property
    def worn(self) -> bool:
        """Whether so many numbers were deleted that finding an index costs more than numbering afresh."""
        return len(self._deleted) > WORN_AFTER

    def index(self, key: Key) -> int:
        number = self._number[key]
        return number - bisect.bisect_left(self._deleted, number)

    def add(self, key: Key) -> None:
        self._number[key] = self._next
        self._next += 1

    def remove(self, key: Key) -> int:
        """The entry's index before it is taken out."""
        index = self.index(key)
        bisect.insort(self._deleted, self._number.pop(key))
        return index


def _same_objects(before: tuple[object, ...], now: tuple[object, ...]) -> bool:
    return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))


def _pod_or_none(manifest: Mapping[str, Any]) -> Pod | None:
    model = parse_object(manifest)
    return model if isinstance(model, Pod) else None


def _has_queue_label(manifest: Mapping[str, Any]) -> bool:
    return QUEUE_LABEL in (_meta(manifest).get("labels") or {})


def _meta(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = manifest.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _created(manifest: Mapping[str, Any]) -> str:
    meta = manifest.get("metadata")
    return str(meta.get("creationTimestamp", "")) if isinstance(meta, Mapping) else ""


def _key(manifest: Mapping[str, Any]) -> str:
    meta = _meta(manifest)
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))



class _CacheOwners:
    """Owner objects from the cache (the operator's assumed writes first); None for a kind not watched."""

    def __init__(self, cache: OperatorCache) -> None:
        self.cache = cache

    def owner(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        reflector = self.cache.reflectors.get(kind)
        if reflector is None:
            return None
        key = (namespace, name)
        return self.cache.assumed(kind).get(key) or reflector.store.get(key)
