"""The device inventory of one cluster snapshot, and which pools each node sees (spec section 5.1).

Built once per snapshot; per-node views are computed on first use and cached, so trying many nodes
(or many pods on the same nodes) does the slice bookkeeping only once. `updated` makes the index of
the next snapshot copy-on-write: it keeps the views, pool device maps and selector results whose inputs
(the node, the slices of its pools) did not change.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from admission.core.features import FeatureGates
from admission.core.models import Device, DeviceClass, Node, ResourceSlice
from admission.core.quantity import Quantity

PoolId = tuple[str, str]  # (driver, pool name)


@dataclass(frozen=True, slots=True)
class PoolView:
    """A pool as seen from one node: its usable devices there, or why it has none."""

    driver: str
    name: str
    generation: int
    devices: tuple[Device, ...] = ()
    incomplete: bool = False
    invalid: str | None = None
    # 1.35+ skips incomplete and invalid pools; 1.34 still allocated from incomplete ones.
    usable: bool = True
    # Counter sets of the whole pool (all slices of the current generation, visible or not).
    counter_sets: Mapping[str, Mapping[str, Quantity]] = field(default_factory=dict)
    has_binding_conditions: bool = False

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


@dataclass(frozen=True, slots=True)
class NodeView:
    """Everything the allocator needs about one node: pools in search order, devices in search order."""

    node: Node
    pools: tuple[PoolView, ...]
    devices: tuple[Device, ...]
    pool_of: Mapping[str, PoolView]  # device id -> pool
    pools_valid: bool = True  # no pool of the node is invalid

    @property
    def incomplete_pools(self) -> tuple[PoolView, ...]:
        return tuple(p for p in self.pools if p.incomplete)

    @property
    def invalid_pools(self) -> tuple[PoolView, ...]:
        return tuple(p for p in self.pools if p.invalid is not None)


class SnapshotInventory:
    """Nodes, classes and slices of one snapshot, indexed for allocation."""

    def __init__(self, nodes: Iterable[Node], classes: Iterable[DeviceClass],
                 slices: Iterable[ResourceSlice]) -> None:
        self.nodes: dict[str, Node] = {n.name: n for n in nodes}
        self.classes: dict[str, DeviceClass] = {c.name: c for c in classes}
        self._index_slices(slices)
        self._views: dict[tuple[str, bool, int, bool, bool], NodeView] = {}
        self._devices: dict[tuple[str, int], dict[str, Device]] = {}
        # Per slice (by id, with the slice to check it is the same object): whether it is plain.
        self._plain: dict[int, tuple[ResourceSlice, bool]] = {}
        # What callers derive from this index alone (e.g. selector results per gate set), by key.
        self._derived: dict[object, Any] = {}
        # The nodes whose view may differ from the index this one was `updated` from (None: any).
        self.changed_nodes: set[str] | None = None

    def _index_slices(self, slices: Iterable[ResourceSlice]) -> None:
        self.slices: tuple[ResourceSlice, ...] = tuple(slices)
        self.slices_by_pool: dict[PoolId, list[ResourceSlice]] = defaultdict(list)
        self._local: dict[str, list[ResourceSlice]] = defaultdict(list)
        self._shared: list[ResourceSlice] = []
        self.slice_of: dict[tuple[str, str, str], ResourceSlice] = {}
        for item in self.slices:
            self.slice_of[(item.driver, item.pool_name, item.name)] = item
            self.slices_by_pool[(item.driver, item.pool_name)].append(item)
            if item.node_name is not None:
                self._local[item.node_name].append(item)
            else:
                self._shared.append(item)

    def updated(self, nodes: Iterable[Node] | None = None, classes: Iterable[DeviceClass] | None = None,
                slices: Iterable[ResourceSlice] | None = None) -> SnapshotInventory:
        """The index of the next snapshot (None: unchanged), sharing what still holds.

        Node views are rebuilt on use when their node object changed (`node_view` checks it). When
        slices changed, the views of nodes that see none of the changed slices' pools are kept, as are
        the pool device maps of unchanged pools; any change to a slice not local to one node drops them
        all. Selector results (`derived`) are kept for the devices of unchanged slices. `changed_nodes`
        names the nodes whose view may differ from the previous index's (None: any).
        """
        index = SnapshotInventory.__new__(SnapshotInventory)
        index.nodes = {n.name: n for n in nodes} if nodes is not None else self.nodes
        index.classes = {c.name: c for c in classes} if classes is not None else self.classes
        index._views = dict(self._views)
        index._devices = dict(self._devices)
        index._plain = {}  # a slice's plainness depends on the other slices of its pool
        index._derived = {}
        changed: set[str] | None = set()
        if nodes is not None:
            before = self.nodes
            changed = {name for name, node in index.nodes.items() if before.get(name) is not node}
            changed.update(name for name in before if name not in index.nodes)
        changed_devices: set[str] | None = set()
        if slices is None:
            index.slices, index.slices_by_pool, index._local = self.slices, self.slices_by_pool, self._local
            index._shared, index.slice_of = self._shared, self.slice_of
        else:
            changed_devices = index._take_slices(self, tuple(slices), changed)
            if changed_devices is None:
                changed = None
        index.changed_nodes = changed
        if classes is not None or changed_devices is None:
            return index  # selector results are tied to the classes' selectors; keep none
        for key, value in self._derived.items():
            carry = getattr(value, "carried", None)
            if carry is not None:
                index._derived[key] = carry(index, changed_devices)
        return index

    def _take_slices(self, previous: SnapshotInventory, slices: tuple[ResourceSlice, ...],
                     changed_nodes: set[str] | None) -> set[str] | None:
        """Index `slices`, reusing `previous`'s bookkeeping for the pools and nodes no changed slice
        touches, and drop the views they may affect; the ids of the devices in changed slices (added
        `changed_nodes`), or None when a change reaches every node (all views dropped)."""
        now = {id(s) for s in slices}
        before = {id(s) for s in previous.slices}
        changed = [s for s in slices if id(s) not in before] + [s for s in previous.slices if id(s) not in now]
        if not changed:
            self.slices, self.slices_by_pool, self._local = slices, previous.slices_by_pool, previous._local
            self._shared, self.slice_of = previous._shared, previous.slice_of
            return set()
        if any(s.node_name is None for s in changed):
            self._index_slices(slices)
            self._views.clear()
            self._devices.clear()
            return None
        pools = {(s.driver, s.pool_name) for s in changed}
        # Every node with a slice in a changed pool, before or now (a pool may span nodes).
        nodes = {s.node_name for pool in pools for s in previous.slices_by_pool.get(pool, ()) if s.node_name}
        nodes.update(s.node_name for s in changed if s.node_name)
        self.slices = slices
        self._shared = previous._shared
        self.slice_of = dict(previous.slice_of)
        for item in changed:
            self.slice_of.pop((item.driver, item.pool_name, item.name), None)
        self.slices_by_pool = defaultdict(list, previous.slices_by_pool)
        self._local = defaultdict(list, previous._local)
        for pool in pools:
            self.slices_by_pool.pop(pool, None)
        for node in nodes:
            self._local.pop(node, None)
        for item in slices:
            pool = (item.driver, item.pool_name)
            if pool in pools:
                self.slice_of[(item.driver, item.pool_name, item.name)] = item
                self.slices_by_pool[pool].append(item)
            if item.node_name in nodes:
                self._local[item.node_name].append(item)
        # A node's view shows its own slices' pools and shared ones (unchanged here): only the views of
        # `nodes` can show a changed pool.
        for view_key in [k for k in self._views if k[0] in nodes]:
            del self._views[view_key]
        pool_ids = {f"{driver}/{pool}" for driver, pool in pools}
        for pool_key in [k for k in self._devices if k[0] in pool_ids]:
            del self._devices[pool_key]
        if changed_nodes is not None:
            changed_nodes.update(n for n in nodes if n is not None)
        return {f"{s.driver}/{s.pool_name}/{d.name}" for s in changed for d in s.devices}

    def derived(self, key: object, build: Callable[[], Any]) -> Any:
        """What a caller derives from this index alone, built once per index. A value with a
        `carried(new_index, changed_device_ids)` method is handed on by `updated` (classes unchanged)."""
        found = self._derived.get(key)
        if found is None:
            found = self._derived[key] = build()
        return found

    def node_view(self, node: Node, gates: FeatureGates) -> NodeView:
        key = (node.name, gates.partitionable_devices, gates.minor, _binding_slices_last(gates),
               gates.compatibility_groups)
        view = self._views.get(key)
        if view is None or view.node is not node:
            view = self._build_view(node, gates)
            self._views[key] = view
        return view

    def pool_devices(self, pool: PoolId, generation: int) -> Mapping[str, Device]:
        """All devices of a pool generation, cluster-wide (for counters of allocated devices)."""
        key = (f"{pool[0]}/{pool[1]}", generation)
        found = self._devices.get(key)
        if found is None:
            found = {d.name: d for s in self.slices_by_pool.get(pool, ())
                     if s.pool_generation == generation for d in s.devices}
            self._devices[key] = found
        return found

    def current_generation(self, pool: PoolId) -> int:
        return max((s.pool_generation for s in self.slices_by_pool.get(pool, ())), default=0)

    def plain_devices(self, node_name: str) -> tuple[Device, ...] | None:
        """The devices of a node that only its own plain slices can reach, without building its view; None
        when the view is needed to know.

        Plain: no slice in the snapshot is for more than one node, and each slice of the node is alone in
        its pool (one slice, announcing one), declares no counter sets, selects no devices per node and
        has no device that consumes counters or may be shared (allowMultipleAllocations). Every pool of
        such a node is then valid and complete, the devices of its view are these, under every release
        and gate set, and each is taken by one request at most.
        """
        local = self._plain_slices(node_name)
        if local is None:
            return None
        if len(local) == 1:
            return local[0].devices
        return tuple(d for item in local for d in item.devices)

    def _plain_slices(self, node_name: str) -> list[ResourceSlice] | None:
        if self._shared:
            return None
        local = self._local.get(node_name)
        if local is None:
            return []
        for item in local:
            if not self._is_plain(item):
                return None
        return local

    def _is_plain(self, item: ResourceSlice) -> bool:
        known = self._plain.get(id(item))
        if known is not None and known[0] is item:
            return known[1]
        # One slice cannot name a device twice (the parser refuses it): its pool is valid unless a device
        # consumes counters the slice does not declare. Shared devices are left to the view's search.
        plain = not (item.shared_counters or item.per_device_node_selection or item.resource_slice_count != 1
                     or len(self.slices_by_pool.get((item.driver, item.pool_name), ())) != 1
                     or any(d.consumes_counters or d.allow_multiple_allocations for d in item.devices))
        self._plain[id(item)] = (item, plain)
        return plain

    def _build_view(self, node: Node, gates: FeatureGates) -> NodeView:
        plain = self._plain_slices(node.name)
        if plain is not None:
            return _plain_view(node, plain)
        return self._checked_view(node, gates)

    def _checked_view(self, node: Node, gates: FeatureGates) -> NodeView:
        """The view from every slice that may be relevant, each pool checked."""
        relevant: dict[PoolId, list[ResourceSlice]] = defaultdict(list)
        for item in (*self._local.get(node.name, ()), *self._shared):
            if _is_relevant(item, node, gates):
                relevant[(item.driver, item.pool_name)].append(item)
        pools = [view for pool_id, found in relevant.items()
                 if (view := self._pool_view(pool_id, found, node, gates)) is not None]
        # The deterministic 1.36 order: by driver and pool name, pools with binding conditions last.
        pools.sort(key=lambda p: (p.has_binding_conditions, p.driver, p.name))
        devices = tuple(d for p in pools if p.usable for d in p.devices)
        pool_of = {d.id: p for p in pools for d in p.devices}
        return NodeView(node, tuple(pools), devices, pool_of, all(p.invalid is None for p in pools))

    def _pool_view(self, pool_id: PoolId, relevant: list[ResourceSlice], node: Node,
                   gates: FeatureGates) -> PoolView | None:
        generation = max(s.pool_generation for s in relevant)
        kept = sorted((s for s in relevant if s.pool_generation == generation), key=lambda s: s.name)
        if _binding_slices_last(gates):
            kept.sort(key=lambda s: any(d.binding_conditions for d in s.devices))
        devices = tuple(d for s in kept for d in s.devices if _device_selects(d, s, node))
        has_binding = any(d.binding_conditions for d in devices)
        driver, name = pool_id
        if gates.minor <= 34:
            # 1.34 looked only at the slices relevant for the node: a pool is incomplete when fewer of
            # them than announced are there (its devices are still used), and invalid when a device
            # name repeats among them. Counter sets belong to single slices then, not to the pool.
            incomplete = len(kept) != kept[0].resource_slice_count
            invalid = _duplicate_device(kept)
            return PoolView(driver, name, generation, devices, incomplete=incomplete, invalid=invalid,
                            usable=invalid is None, has_binding_conditions=has_binding)
        everywhere = self.slices_by_pool[pool_id]
        same_generation = [s for s in everywhere if s.pool_generation == generation
                           and not _ignored_for_groups(s, gates)]
        checked = kept
        if len(kept) != kept[0].resource_slice_count:
            if any(s.pool_generation > generation for s in everywhere):
                return None  # being replaced by a newer generation: dropped silently
            if len(same_generation) != kept[0].resource_slice_count:
                return PoolView(driver, name, generation, devices, incomplete=True, usable=False,
                                has_binding_conditions=has_binding)
            checked = same_generation  # complete only with slices for other nodes: those are checked too
        # A pool complete only with slices for other nodes takes its counter sets from those too (a
        # counters-only slice bound to another node is one of them).
        counter_sets = {cs.name: cs.counters for s in checked for cs in s.shared_counters}
        invalid = _duplicate_device(kept) or _counter_problem(checked, gates)
        return PoolView(driver, name, generation, devices, invalid=invalid, usable=invalid is None,
                        counter_sets=counter_sets, has_binding_conditions=has_binding)


def _plain_view(node: Node, local: list[ResourceSlice]) -> NodeView:
    """The view `_build_view` makes of a node whose slices are plain, without its checks: each slice is
    a valid, complete pool of its own, and all of its devices are the node's."""
    pools = [PoolView(s.driver, s.pool_name, s.pool_generation, s.devices,
                      has_binding_conditions=any(d.binding_conditions for d in s.devices)) for s in local]
    if len(pools) == 1:
        devices = pools[0].devices
    else:
        pools.sort(key=lambda p: (p.has_binding_conditions, p.driver, p.name))
        devices = tuple(d for p in pools for d in p.devices)
    pool_of = {d.id: p for p in pools for d in p.devices}
    return NodeView(node, tuple(pools), devices, pool_of, True)


def _binding_slices_last(gates: FeatureGates) -> bool:
    """Before 1.36 the allocator variant that knows binding conditions (picked when they, consumable
    capacity or, in 1.34, either of the two gates behind binding is on) put slices with such devices
    after the other slices of their pool."""
    if gates.minor >= 36:
        return False
    if gates.consumable_capacity:
        return True
    if gates.minor <= 34:
        return bool({"DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"} & gates.enabled)
    return gates.binding_conditions


def _ignored_for_groups(item: ResourceSlice, gates: FeatureGates) -> bool:
    """1.37 with DRADeviceCompatibilityGroups off ignores a slice whose devices declare compatibility groups:
    it neither serves devices nor counts towards its pool's slices (the pool is then incomplete)."""
    return (gates.minor >= 37 and not gates.compatibility_groups
            and any(use.compatibility_groups for d in item.devices for use in d.consumes_counters))


def _is_relevant(item: ResourceSlice, node: Node, gates: FeatureGates) -> bool:
    if _ignored_for_groups(item, gates):
        return False
    # Before 1.35 counter sets sat in device slices and were no reason to drop a slice.
    counters_alone = bool(item.shared_counters) and gates.minor >= 35
    if item.per_device_node_selection or counters_alone:
        if not gates.partitionable_devices:
            return False
        if counters_alone:
            return True
        if item.per_device_node_selection:
            return any(_device_selects(d, item, node) for d in item.devices)
    if item.node_name is not None:
        return item.node_name == node.name
    if item.all_nodes:
        return True
    if item.node_selector is not None:
        return item.node_selector.matches(node.labels, node.name)
    return False


def _device_selects(device: Device, item: ResourceSlice, node: Node) -> bool:
    if not item.per_device_node_selection:
        return True
    if device.node_name is not None:
        return device.node_name == node.name
    if device.all_nodes:
        return True
    return device.node_selector is not None and device.node_selector.matches(node.labels, node.name)


def _duplicate_device(kept: list[ResourceSlice]) -> str | None:
    """A device name that repeats among the slices the node sees (others are not checked upstream)."""
    seen: set[str] = set()
    for item in kept:
        for device in item.devices:
            if device.name in seen:
                return f"duplicate device name {device.name}"
            seen.add(device.name)
    return None


def _counter_problem(checked: list[ResourceSlice], gates: FeatureGates) -> str | None:
    """Counter sets named twice, or devices (of `checked` slices) consuming counters nobody declares."""
    if not gates.partitionable_devices:
        return None
    sets: dict[str, Mapping[str, Quantity]] = {}
    for item in checked:  # counters-only slices bound to other nodes declare for the pool too
        for counter_set in item.shared_counters:
            if counter_set.name in sets:
                return f"duplicate counter set name {counter_set.name}"
            sets[counter_set.name] = counter_set.counters
    for item in checked:
        for device in item.devices:
            for use in device.consumes_counters:
                declared = sets.get(use.counter_set)
                if declared is None:
                    return f"device {device.name} consumes counters of unknown counter set {use.counter_set}"
                for counter in use.counters:
                    if counter not in declared:
                        return (f"device {device.name} consumes unknown counter {counter} "
                                f"of counter set {use.counter_set}")
    return None
