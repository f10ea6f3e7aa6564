"""The per-node search: pre-checks (spec section 4), then first fit with backtracking (sections 5-7).

One `NodeSearch` answers "can these claims be allocated together on this node?". It reads the
inventory and the cluster's in-use state and never changes them; everything it picks lives in its
own bookkeeping and is undone on backtracking.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from admission.core.allocator.capacity import Consumption, consumption, fits
from admission.core.allocator.compatibility import Groups, GroupsUndo, groups_add, groups_admit
from admission.core.allocator.constraints import ConstraintTracker
from admission.core.allocator.errors import AllocationError, MissingDeviceClass
from admission.core.allocator.inventory import NodeView, SnapshotInventory
from admission.core.allocator.selectors import SelectorEvaluator
from admission.core.allocator.usage import Usage
from admission.core.features import FeatureGates
from admission.core.models import (
    ALL,
    EXACT_COUNT,
    Device,
    DeviceClass,
    DeviceSelection,
    DeviceToleration,
    ResourceClaim,
)

MAX_RESULTS_PER_CLAIM = 32
CounterKey = tuple[str, str]  # (counter set, counter)

# Why a selectable device cannot be taken (used by the search and by explanations).
IN_USE = "in use"
COUNTERS = "not enough counters left"
INCOMPATIBLE = "shares no compatibility group with the devices on its counter set"
SKIPS_OPERATIONS = "skips node operations, which the node does not declare (or DRAOptionalNodeOperations is off)"
OPTIONAL_NODE_OPERATIONS = "DRAOptionalNodeOperations"  # the node feature a node declares
TAINTED = "has a taint that is not tolerated"
CAPACITY = "not enough capacity left"
PARTITIONS_OFF = "consumes counters, but DRAPartitionableDevices is off"


class SearchBudgetExceeded(Exception):
    """The search tried more devices than allowed (as the scheduler's filter timeout would)."""


# Device checks the scheduler's permuting search makes within its 10 s filter timeout (measured on a
# 2-core machine: about 4 million a second). Beyond this estimate the scheduler gives up; close to it,
# whether it does depends on its machine.
UPSTREAM_CHECKS_LIMIT = 40_000_000
# What one counter a device takes counts for in draq's own budget, in device checks.
COUNTER_WEIGHT = 10


# What one step of the search comes back with. EXCEEDED is upstream's "allocation result limit
# reached": it unwinds the claim's earlier device choices at once (they cannot change the count),
# up to the nearest `firstAvailable` request, which then tries its next subrequest.
FAILED, FOUND, EXCEEDED = 0, 1, 2


@dataclass(slots=True)
class Alternative:
    """One way to satisfy a request: its `exactly` part or one `firstAvailable` subrequest."""

    request: str
    result_name: str
    selection: DeviceSelection
    device_class: DeviceClass
    admin: bool
    class_owner: str = ""
    signature: int = 0
    all_devices: list[Device] | None = None
    # The indices, in the claim plan's `constraints`, of the constraints that apply to this alternative.
    constraints: tuple[int, ...] = ()
    # Derived attributes in force (1.37 with DRADerivedAttributes): name -> expression; None without any.
    derived: dict[str, str] | None = None

    @property
    def count(self) -> int:
        return len(self.all_devices) if self.all_devices is not None else self.selection.count


@dataclass(slots=True)
class Pick:
    alternative: Alternative
    device: Device
    shared: bool = False
    consumed: Consumption | None = None
    counters: dict[CounterKey, Fraction] | None = None
    groups: GroupsUndo | None = None


@dataclass(slots=True)
class ClaimSearch:
    claim: ResourceClaim
    owner: str
    requests: list[list[Alternative]]
    constraints: list[ConstraintTracker]
    picks: list[Pick] = field(default_factory=list)
    devices: dict[str, int] = field(default_factory=dict)  # device id -> times picked in this claim
    # Devices asked for along one path of the search, at most (-1: unknown, a request asks for All),
    # and the number of ways to choose among the requests' alternatives.
    depth: int = -1
    choices: int = 1


# Per claim (by id, with the claim to check it is the same object): its owner label, and per request
# its alternatives (which hold no search state, so that every search of the claim shares them).
ClaimMemo = dict[int, tuple[ResourceClaim, str, list[list["Alternative"]], int, int]]


def missing_class(claims: Sequence[ResourceClaim], classes: Mapping[str, DeviceClass]) -> tuple[str, str] | None:
    """The first (request, class) naming a DeviceClass that does not exist, over every request and
    `firstAvailable` subrequest of the claims; the scheduler checks this before anything else."""
    for claim in claims:
        for request in claim.spec.requests:
            for selection in request.alternatives:
                name = selection.device_class_name
                if name and name not in classes:
                    where = request.name if request.exactly is not None else f"{request.name}/{selection.name}"
                    return f"claim {claim.key}, request {where}", name
    return None


def experimental_variant(gates: FeatureGates) -> bool:
    """Whether 1.37's scheduler uses its allocator variant for the alpha features (one of them is on)."""
    return gates.minor >= 37 and (gates.compatibility_groups or gates.optional_node_operations
                                  or gates.list_type_attributes or "DRADerivedAttributes" in gates.enabled)


def permuting_release(gates: FeatureGates) -> bool:
    """Whether the scheduler's allocator tries permutations of devices rather than combinations: every
    variant of 1.34 and 1.35, and the "stable" one of 1.36 and 1.37 (picked when no newer feature is on)."""
    if gates.minor <= 35:
        return True
    return not (gates.consumable_capacity or gates.binding_conditions or gates.list_type_attributes
                or gates.fractional_capacity_range or experimental_variant(gates))


class NodeSearch:
    def __init__(self, inventory: SnapshotInventory, view: NodeView, usage: Usage, gates: FeatureGates,
                 selectors: SelectorEvaluator, budget: int | None = None,
                 claim_memo: ClaimMemo | None = None) -> None:
        self.inventory = inventory
        self.claim_memo = claim_memo
        self.view = view
        self.usage = usage
        self.gates = gates
        self.selectors = selectors
        self.budget = budget
        self.steps = 0
        # Where draq searches combinations for a release that permutes (the order not mattering), the
        # scheduler visits every ordering of the devices of a request that fails: `weight` is how many
        # orderings the current node stands for, counted from the entry of the current request; each
        # frame holds [work if this request fails, work if it succeeds] in the scheduler's device checks.
        self.weight = 1
        self.frames: list[list[int]] = [[0, 0]]
        # Devices picked in this search (not shared ones) -> how many claims hold them; an
        # admin-access pick counts too: the scheduler does not give it to a normal request.
        self.picked: dict[str, int] = {}
        # Capacity taken from shared devices in this search, kept as upstream keeps it: an entry
        # exists once a share was taken and goes away when every amount is back to zero.
        self.capacity_in_search: dict[str, Consumption] = {}
        self.counters_in_search: dict[str, dict[CounterKey, Fraction]] = defaultdict(dict)
        self._declared_counters: dict[str, dict[CounterKey, Fraction]] = {}
        self._cluster_counters: dict[str, dict[CounterKey, Fraction]] = {}
        self._overconsumed: dict[str, bool] = {}
        self.plans: list[ClaimSearch] = []
        # Gate answers looked up once: they are read for every device tried.
        self.consumable_gate = gates.consumable_capacity
        self.fractional_gate = gates.fractional_capacity_range
        self.groups_gate = gates.compatibility_groups
        # 1.37's variant for the alpha features refuses devices of slices that skip node operations unless
        # DRAOptionalNodeOperations is on and the node declares the feature (the others do not look).
        self.skips_refused = experimental_variant(gates) and not (
            gates.optional_node_operations and OPTIONAL_NODE_OPERATIONS in view.node.declared_features)
        # Compatibility groups per (pool, counter set): what the devices drawing on it share so far.
        self.groups_in_search: dict[tuple[str, str], Groups] = {}
        self._groups_allocated: dict[str, dict[str, Groups]] = {}
        self.binding_gate = gates.binding_conditions
        self.taints_gate = gates.device_taints
        self.partitions_gate = gates.partitionable_devices
        # 1.34 kept counter sets per ResourceSlice (beside the devices that use them); later per pool.
        self.counters_per_slice = gates.minor <= 34
        # 1.34 knew no taint effect that does not block.
        self.every_taint_blocks = gates.minor <= 34
        self.permute = False
        self.estimate_upstream = False
        # 1.34 charged a shared device's counters for every share; later releases only for the first.
        self.shared_counters_once = gates.minor >= 35
        # 1.37 counts a device shared without taking capacity as in use too (before, only capacity did).
        self.any_share_in_use = gates.minor >= 37
        # v1.36.3 and 1.37 roll back what a device took (counters, constraints, its in-use mark) when a
        # later check refuses it; v1.36.2 and earlier kept it taken for the rest of the search.
        self.refusal_rolls_back = gates.minor >= 36
        self.capacity_slot_quirk = gates.minor <= 34
        # Permuting releases may pick a shared device again for the next slot of the same request;
        # 1.36's combinations go on after it. (Combinations that repeat a shared device find what
        # the permutations find first, where the order does not matter.)
        self.permuting = permuting_release(gates)
        self.shares_repeat = self.permuting
        # 1.34 failed the whole attempt when its device loop reached an invalid pool (later releases
        # skip such pools): the position in the device order where that happens, if any.
        self.invalid_barrier: int | None = None
        self.invalid_pool = ""
        if gates.minor <= 34:
            before = 0
            for pool in view.pools:
                if pool.invalid is not None:
                    self.invalid_barrier = before
                    self.invalid_pool = f"pool {pool.name} is invalid: {pool.invalid}"
                    break
                if pool.usable:
                    before += len(pool.devices)

    # ----- pre-checks -------------------------------------------------------------------------

    def prepare(self, claims: Sequence[ResourceClaim]) -> None:
        """Section 4, in claim and request order; raises AllocationError for unusable requests."""
        self.plans = [self.plan_claim(claim) for claim in claims]
        permuting = self.permuting
        self.permute = permuting and self._order_matters()
        self.estimate_upstream = self.budget is not None and permuting and not self.permute \
            and not self._within_upstream_limit()

    def _within_upstream_limit(self) -> bool:
        """Whether the scheduler's permuting search is sure to stay within its time limit here, so that
        its work need not be estimated: it makes at most n checks (n devices) at each point of its
        search tree, which has at most n**d points at slot depth d < K (K the devices asked for along
        one path), for each choice among `firstAvailable` alternatives: at most choices * K * n**K."""
        depth, choices = 0, 1
        for plan in self.plans:
            if plan.depth < 0:
                return False
            depth += plan.depth
            choices *= plan.choices
        if depth > MAX_RESULTS_PER_CLAIM:
            return False
        work: int = choices * depth * len(self.view.devices) ** depth
        return work <= UPSTREAM_CHECKS_LIMIT

    def _order_matters(self) -> bool:
        """Whether the order in which devices are tried can change the answer, not only which devices
        are picked: a distinctAttribute constraint remembers the last value per request, counters
        taken by a device that is then refused stay taken for the rest of the search, 1.34 fails on an
        invalid pool when its loop gets there and checks capacity by slot position. Elsewhere the
        first combination found is the first permutation's set."""
        for plan in self.plans:
            for tracker in plan.constraints:
                if not tracker.is_match:
                    return True
        if self.invalid_barrier is not None or (self.capacity_slot_quirk and self.consumable_gate):
            return True
        return self.partitions_gate and any(d.consumes_counters for d in self.view.devices)

    def plan_claim(self, claim: ResourceClaim) -> ClaimSearch:
        """The claim's requests checked (raising AllocationError where the scheduler fails them) and
        turned into alternatives. What does not depend on the node is kept in `claim_memo`, when given,
        so that the checks run once per claim and allocator, not once per node."""
        memo = self.claim_memo
        known = memo.get(id(claim)) if memo is not None else None
        if known is not None and known[0] is claim:
            constraints = claim.spec.constraints
            return ClaimSearch(claim, known[1], known[2],
                             [ConstraintTracker(c, self.gates) for c in constraints] if constraints else [],
                             depth=known[3], choices=known[4])
        plan = self._plan_claim(claim)
        if memo is not None and plan.depth >= 0:
            memo[id(claim)] = (claim, plan.owner, plan.requests, plan.depth, plan.choices)
        return plan

    def _plan_claim(self, claim: ResourceClaim) -> ClaimSearch:
        owner = f"claim {claim.key}"
        trackers = [ConstraintTracker(c, self.gates) for c in claim.spec.constraints]
        requests: list[list[Alternative]] = []
        minimum = 0
        for request in claim.spec.requests:
            where = f"{owner}, request {request.name}"
            if request.first_available and not self.gates.prioritized_list:
                raise AllocationError(f"{where}: has subrequests, but the DRAPrioritizedList feature "
                                      "is disabled")
            alternatives = []
            for selection in request.alternatives:
                is_sub = request.exactly is None
                result_name = f"{request.name}/{selection.name}" if is_sub else request.name
                alternatives.append(self._alternative(owner, f"{owner}, request {result_name}", request.name,
                                                      result_name, selection, trackers))
            requests.append(alternatives)
            minimum += min((a.count for a in alternatives), default=0)
        if minimum > MAX_RESULTS_PER_CLAIM:
            raise AllocationError(f"{owner}: number of requested devices {minimum} exceeds the claim limit "
                                  f"of {MAX_RESULTS_PER_CLAIM}")
        depth, choices = 0, 1
        for alternatives in requests:
            if any(a.all_devices is not None for a in alternatives):
                depth = -1
                break
            choices *= len(alternatives)
            depth += max((a.selection.count for a in alternatives), default=0)
        for index, constraint in enumerate(claim.spec.constraints):
            # distinctAttribute exists only in the allocator variants newer than the stable one (up to 1.35,
            # those used with consumable capacity); the stable one (and the API server, which drops the field
            # without DRAConsumableCapacity) sees an empty constraint.
            newer = self.gates.consumable_capacity if self.gates.minor <= 35 else not self.permuting
            distinct = constraint.distinct_attribute is not None and newer
            if constraint.match_attribute is None and not distinct:
                raise AllocationError(f"{owner}, constraint #{index}: empty constraint (unsupported "
                                      "constraint type?)")
        return ClaimSearch(claim, owner, requests, trackers, depth=depth, choices=choices)

    def _alternative(self, owner: str, where: str, request: str, result_name: str,
                     selection: DeviceSelection, trackers: list[ConstraintTracker]) -> Alternative:
        gates = self.gates
        derived = self._derived(where, selection)
        if selection.capacity_requests and not gates.consumable_capacity:
            raise AllocationError(f"{where}: has capacity requests, but the DRAConsumableCapacity feature "
                                  "is disabled")
        for index, expression in enumerate(selection.selectors):
            if expression is None:
                raise AllocationError(f"{owner}: selector #{index}: CEL expression empty "
                                      "(unsupported selector type?)")
        if selection.admin_access is not None and not gates.admin_access:
            raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
        if not selection.device_class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        device_class = self.inventory.classes.get(selection.device_class_name)
        if device_class is None:
            name = selection.device_class_name
            raise MissingDeviceClass(f"{where}: could not retrieve device class {name}: device class {name} "
                                     "does not exist", name)
        alternative = Alternative(
            request=request, result_name=result_name, selection=selection, device_class=device_class,
            admin=bool(selection.admin_access), class_owner=f"class {device_class.name}",
            signature=self.selectors.signature(device_class.name, device_class.selectors, owner,
                                               selection.selectors),
            constraints=tuple(i for i, t in enumerate(trackers) if t.applies(request, result_name)),
            derived=derived,
        )
        if selection.allocation_mode == ALL:
            alternative.all_devices = self._all_devices(owner, where, alternative)
        elif selection.allocation_mode != EXACT_COUNT:
            raise AllocationError(f"{where}: unsupported count mode {selection.allocation_mode}")
        return alternative

    def _derived(self, where: str, selection: DeviceSelection) -> dict[str, str] | None:
        """The request's derived attributes the scheduler evaluates. Before 1.37 the field does not exist (the
        constraints read the devices' own attributes); on 1.37 every allocator variant refuses a request with
        them while DRADerivedAttributes is off (checked before anything else of the request)."""
        if not selection.derived_attributes or self.gates.minor < 37:
            return None
        if "DRADerivedAttributes" not in self.gates.enabled:
            raise AllocationError(f"{where}: cannot handle request with derived attributes, the feature is "
                                  "disabled")
        return {d.name: d.expression for d in selection.derived_attributes}

    def _all_devices(self, owner: str, where: str, alternative: Alternative) -> list[Device]:
        for pool in self.view.pools:
            if pool.incomplete:
                raise AllocationError(f"{where}: asks for all devices, but resource pool {pool.id} "
                                      "is currently being updated")
            if pool.invalid is not None:
                raise AllocationError(f"{where}: asks for all devices, but resource pool {pool.id} "
                                      "is currently invalid")
        # Devices whose remaining capacity cannot serve the request are left out.
        return [device for device in self.view.devices
                if self.selectable(owner, alternative, device) and self._capacity_admits(alternative, device)]

    # ----- selection and availability ---------------------------------------------------------

    def selectable(self, owner: str, alternative: Alternative, device: Device) -> bool:
        """Section 5.2: binding conditions, class selectors, then request selectors."""
        if device.binding_conditions and not self.binding_gate:
            return False
        return self.selectors.selects(alternative.signature, alternative.class_owner,
                                      alternative.device_class.selectors, owner, alternative.selection.selectors,
                                      device)

    def _capacity_admits(self, alternative: Alternative, device: Device, uniform: bool = False) -> bool:
        if not self.consumable_gate:
            return True
        multi = device.allow_multiple_allocations or uniform
        requests = alternative.selection.capacity_requests
        if not requests and not multi:
            return True
        amount = consumption(device, requests, self.fractional_gate)
        if amount is None:
            return False
        if not multi:
            return fits(device, amount)
        key = device.id
        return fits(device, amount, self.usage.consumed.get(key), self.capacity_in_search.get(key))

    def in_use(self, plan: ClaimSearch, alternative: Alternative, device: Device) -> bool:
        """Checked first, as it is cheap: taken in the cluster or by this search. An admin-access
        request only avoids devices its own claim already has (shared devices never count)."""
        device_id = device.id
        if alternative.admin:
            return device_id in plan.devices and not (self.consumable_gate and device.allow_multiple_allocations)
        if self.consumable_gate and device.allow_multiple_allocations:
            return device_id in self.usage.exclusive
        return device_id in self.picked or self.usage.is_allocated(device_id)

    def blocker(self, plan: ClaimSearch, alternative: Alternative, device: Device) -> str | None:
        """Section 5.3 without constraints: why a selectable device cannot be taken now, or None."""
        if self.in_use(plan, alternative, device):
            return IN_USE
        if device.skip_node_operations and self.skips_refused:
            return SKIPS_OPERATIONS
        if device.consumes_counters:
            if not self.partitions_gate:
                return PARTITIONS_OFF
            multi = self.consumable_gate and device.allow_multiple_allocations
            if not (multi and self.shared_counters_once and self._capacity_in_use(device.id)):
                if self.groups_gate and not self._groups_admit(device):
                    return INCOMPATIBLE
                if not self._counters_fit(device):
                    return COUNTERS
        if self.taints_gate and device.taints and not _tolerated(device, alternative.selection,
                                                                  self.every_taint_blocks):
            return TAINTED
        if self.consumable_gate and not self._capacity_admits(alternative, device):
            return CAPACITY
        return None

    def _capacity_in_use(self, device_id: str) -> bool:
        """A shared device some capacity of which is taken (cluster or search; on 1.37 any share in the
        cluster): its counters were charged when the first share was taken, and are not checked or charged
        again."""
        return (device_id in self.usage.consumed or device_id in self.capacity_in_search
                or (self.any_share_in_use and device_id in self.usage.shared))

    # ----- counters (partitionable devices) ---------------------------------------------------

    def _counter_scope(self, device: Device) -> str:
        if self.counters_per_slice:
            return f"{device.driver}/{device.pool}/{device.slice_name}"
        return self.view.pool_of[device.id].id

    def _counters_fit(self, device: Device, scope: str | None = None) -> bool:
        scope = scope or self._counter_scope(device)
        declared = self._declared(scope, device)
        cluster = self._cluster_usage(scope, device)
        if self._scope_overconsumed(scope, declared, cluster):
            return False
        search = self.counters_in_search.get(scope, {})
        zero = Fraction(0)
        for use in device.consumes_counters:
            for counter, amount in use.counters.items():
                key = (use.counter_set, counter)
                limit = declared.get(key)
                if limit is None:
                    if self.counters_per_slice:
                        continue  # 1.34 checked only the counters its slice declares
                    return False
                if cluster.get(key, zero) + search.get(key, zero) + amount.value > limit:
                    return False
        return True

    def _reserve_counters(self, device: Device) -> dict[CounterKey, Fraction] | None:
        """Take the device's counters for this search if they fit; None if they do not."""
        if self.budget is not None:
            # Comparing and charging a counter costs about ten device checks (measured in draq's search).
            self._count(COUNTER_WEIGHT * sum(len(use.counters) for use in device.consumes_counters))
        scope = self._counter_scope(device)
        if not self._counters_fit(device, scope):
            return None
        charged: dict[CounterKey, Fraction] = {}
        totals = self.counters_in_search[scope]
        for use in device.consumes_counters:
            for counter, amount in use.counters.items():
                key = (use.counter_set, counter)
                charged[key] = charged.get(key, Fraction(0)) + amount.value
                totals[key] = totals.get(key, Fraction(0)) + amount.value
        return charged

    def _release_counters(self, device: Device, charged: dict[CounterKey, Fraction]) -> None:
        totals = self.counters_in_search[self._counter_scope(device)]
        for key, value in charged.items():
            totals[key] -= value

    def _declared(self, scope: str, device: Device) -> dict[CounterKey, Fraction]:
        found = self._declared_counters.get(scope)
        if found is None:
            if self.counters_per_slice:
                item = self.inventory.slice_of[(device.driver, device.pool, device.slice_name)]
                sets = {cs.name: cs.counters for cs in item.shared_counters}
            else:
                sets = dict(self.view.pool_of[device.id].counter_sets)
            found = {(name, counter): limit.value for name, counters in sets.items()
                     for counter, limit in counters.items()}
            self._declared_counters[scope] = found
        return found

    def _scope_overconsumed(self, scope: str, declared: dict[CounterKey, Fraction],
                            cluster: dict[CounterKey, Fraction]) -> bool:
        """Whether allocations in the cluster already exceed some counter of the pool.

        The scheduler checks every counter set of the pool, not only the ones the device consumes, so
        one over-consumed set (possible when allocations were made outside the allocator) leaves no
        counter-consuming device of the pool usable. Counters taken during this search never exceed
        their limit, so only the cluster's allocations can cause it.
        """
        cached = self._overconsumed.get(scope)
        if cached is None:
            cached = any(cluster.get(key, Fraction(0)) > limit for key, limit in declared.items())
            self._overconsumed[scope] = cached
        return cached

    def _cluster_usage(self, scope: str, device: Device) -> dict[CounterKey, Fraction]:
        cached = self._cluster_counters.get(scope)
        if cached is not None:
            return cached
        totals: dict[CounterKey, Fraction] = {}
        names = list(self.usage.by_pool.get(f"{device.driver}/{device.pool}", ()))
        if names:
            if self.counters_per_slice:
                item = self.inventory.slice_of[(device.driver, device.pool, device.slice_name)]
                devices: Mapping[str, Device] = {d.name: d for d in item.devices}
            else:
                pool = self.view.pool_of[device.id]
                devices = self.inventory.pool_devices((pool.driver, pool.name), pool.generation)
            if self.gates.minor <= 35:
                # Before 1.36 only devices allocated exclusively (not shares) counted against the counters.
                exclusive = self.usage.exclusive
                names = [n for n in names if f"{device.driver}/{device.pool}/{n}" in exclusive]
            for name in names:
                allocated = devices.get(name)
                if allocated is None:
                    continue
                for use in allocated.consumes_counters:
                    for counter, amount in use.counters.items():
                        key = (use.counter_set, counter)
                        totals[key] = totals.get(key, Fraction(0)) + amount.value
        self._cluster_counters[scope] = totals
        return totals

    # ----- compatibility groups (DRADeviceCompatibilityGroups, 1.37) ---------------------------

    def _groups_admit(self, device: Device) -> bool:
        scope = self.view.pool_of[device.id].id
        return all(groups_admit(self._groups_now(scope, use.counter_set, device), use.compatibility_groups)
                   for use in device.consumes_counters)

    def _join_groups(self, device: Device) -> GroupsUndo | None:
        """Add the device to the groups of each counter set it draws on; None (nothing changed) if one of
        them has no group in common with it. The undo list restores the previous state."""
        scope = self.view.pool_of[device.id].id
        undo: GroupsUndo = []
        for use in device.consumes_counters:
            key = (scope, use.counter_set)
            now = self._groups_now(scope, use.counter_set, device)
            if not groups_admit(now, use.compatibility_groups):
                self._leave_groups(undo)
                return None
            undo.append((key, key in self.groups_in_search, self.groups_in_search.get(key)))
            self.groups_in_search[key] = groups_add(now, use.compatibility_groups)
        return undo

    def _leave_groups(self, undo: GroupsUndo | None) -> None:
        for key, existed, before in reversed(undo or ()):
            if existed:
                self.groups_in_search[key] = before
            else:
                del self.groups_in_search[key]

    def _groups_now(self, scope: str, counter_set: str, device: Device) -> Groups:
        key = (scope, counter_set)
        if key in self.groups_in_search:
            return self.groups_in_search[key]
        return self._allocated_groups(scope, device).get(counter_set)

    def _allocated_groups(self, scope: str, device: Device) -> dict[str, Groups]:
        """The groups of the devices of the pool allocated in the cluster (exclusively or shared), per
        counter set, read from the slices as they are now."""
        cached = self._groups_allocated.get(scope)
        if cached is None:
            cached = {}
            pool = self.view.pool_of[device.id]
            devices = self.inventory.pool_devices((pool.driver, pool.name), pool.generation)
            for name in self.usage.by_pool.get(scope, ()):
                allocated = devices.get(name)
                for use in allocated.consumes_counters if allocated is not None else ():
                    cached[use.counter_set] = groups_add(cached.get(use.counter_set), use.compatibility_groups)
            self._groups_allocated[scope] = cached
        return cached

    # ----- taking and releasing devices -------------------------------------------------------

    def take(self, plan: ClaimSearch, alternative: Alternative, device: Device, *, slot: int = 0,
             strict: bool = False, free: bool = False) -> Pick | None:
        """Record the device for the alternative if it can be taken; None if not.

        The checks run in the scheduler's order. Counters are taken before the taint and constraint
        checks and, as upstream does, stay taken when one of those refuses the device. With
        `strict` (allocation mode All) a constraint violation is an error, not a failure. `slot` is
        the device's position within its request (1.34 looked at it, see `_capacity_refuses`). With `free`
        the caller has just found the device not in use.
        """
        if not free and self.in_use(plan, alternative, device):
            return None
        if device.skip_node_operations and self.skips_refused:
            return None
        multi = self.consumable_gate and device.allow_multiple_allocations
        charged = None
        groups = None
        if device.consumes_counters:
            if not self.partitions_gate:
                return None
            if not (multi and self.shared_counters_once and self._capacity_in_use(device.id)):
                if self.groups_gate:
                    groups = self._join_groups(device)
                    if groups is None:
                        return None
                charged = self._reserve_counters(device)
                if charged is None:
                    self._leave_groups(groups)
                    return None
        if self.taints_gate and device.taints and not _tolerated(device, alternative.selection,
                                                                  self.every_taint_blocks):
            self._refused(device, charged, groups)
            return None
        trackers = plan.constraints
        derived = alternative.derived
        for added, index in enumerate(alternative.constraints):
            tracker = trackers[index]
            if derived is not None and tracker.attribute in derived:
                value = self.selectors.derived(tracker.attribute, derived[tracker.attribute], device)
                fits_constraint = tracker.add_value(alternative.request, value)
            else:
                fits_constraint = tracker.add(alternative.request, device)
            if not fits_constraint:
                for undo in alternative.constraints[:added]:
                    trackers[undo].remove(alternative.request)
                self._refused(device, charged, groups)
                if strict:
                    raise AllocationError(f"{plan.owner}, request {alternative.result_name}: cannot add "
                                          f"device {device.id} because a claim constraint would not be "
                                          "satisfied")
                return None
        if self.consumable_gate and self._capacity_refuses(alternative, device, slot, strict):
            if self.refusal_rolls_back:
                for index in reversed(alternative.constraints):
                    trackers[index].remove(alternative.request)
                self._refused(device, charged, groups)
                return None
            # Upstream before 1.37 has marked the device as being allocated by now and does not undo that,
            # nor the constraints or counters: they stay so for the rest of the search.
            if not multi:
                self.picked[device.id] = self.picked.get(device.id, 0) + 1
                plan.devices[device.id] = plan.devices.get(device.id, 0) + 1
            return None
        pick = self._record(plan, alternative, device, multi, charged)
        pick.groups = groups
        return pick

    def _refused(self, device: Device, charged: dict[CounterKey, Fraction] | None,
                 groups: GroupsUndo | None = None) -> None:
        """A device a later check refused: from v1.36.3 on its counters are given back (and on 1.37 what it
        added to the compatibility groups)."""
        if self.refusal_rolls_back and charged is not None:
            self._release_counters(device, charged)
        self._leave_groups(groups)

    def _capacity_refuses(self, alternative: Alternative, device: Device, slot: int, strict: bool) -> bool:
        """The capacity check made after the constraints. The device loop checks capacity before taking
        a device, so from 1.35 on this can only refuse in mode All. 1.34 checked here the device at the
        slot's position in the device's slice instead of the device itself."""
        if not self.capacity_slot_quirk:
            return strict and not self._capacity_admits(alternative, device)
        devices = self.inventory.slice_of[(device.driver, device.pool, device.slice_name)].devices
        if slot >= len(devices):
            raise AllocationError(f"{alternative.result_name}: the scheduler's allocator fails on device "
                                  f"{device.id} (index {slot} out of range of its slice)")
        return not self._capacity_admits(alternative, devices[slot], uniform=True)

    def _record(self, plan: ClaimSearch, alternative: Alternative, device: Device, multi: bool,
                charged: dict[CounterKey, Fraction] | None) -> Pick:
        device_id = device.id
        pick = Pick(alternative, device, shared=multi, counters=charged)
        if multi:
            taken = consumption(device, alternative.selection.capacity_requests, self.fractional_gate) or {}
            pick.consumed = taken
            mine = self.capacity_in_search.get(device_id)
            if mine is None:
                self.capacity_in_search[device_id] = dict(taken)
            else:
                for name, value in taken.items():
                    mine[name] = mine.get(name, Fraction(0)) + value
        else:
            self.picked[device_id] = self.picked.get(device_id, 0) + 1
        plan.devices[device_id] = plan.devices.get(device_id, 0) + 1
        plan.picks.append(pick)
        return pick

    def release(self, plan: ClaimSearch, pick: Pick) -> None:
        device_id = pick.device.id
        alternative = pick.alternative
        plan.picks.pop()
        left = plan.devices[device_id] - 1
        if left:
            plan.devices[device_id] = left
        else:
            del plan.devices[device_id]
        trackers = plan.constraints
        for index in reversed(alternative.constraints):
            trackers[index].remove(alternative.request)
        self._leave_groups(pick.groups)
        if pick.shared:
            # Upstream gives back a share's capacity only when it consumed some, and never the
            # counters a shared device took when its first share was picked.
            mine = self.capacity_in_search.get(device_id)
            if pick.consumed and mine is not None:
                for name, value in pick.consumed.items():
                    if name in mine:
                        mine[name] -= value
                if not any(mine.values()):
                    del self.capacity_in_search[device_id]
            return
        held = self.picked[device_id] - 1
        if held:
            self.picked[device_id] = held
        else:
            del self.picked[device_id]
        if pick.counters:
            self._release_counters(pick.device, pick.counters)

    # ----- the search -------------------------------------------------------------------------

    def run(self) -> bool:
        """Depth-first first fit over claims, requests and device slots (section 6)."""
        self.weight, self.frames = 1, [[0, 0]]
        found = self._claim(0)
        if self.estimate_upstream:
            work = self.frames[0][1 if found == FOUND else 0]
            if work > UPSTREAM_CHECKS_LIMIT:
                raise SearchBudgetExceeded(f"the scheduler's search would take longer than its filter timeout "
                                           f"(about {work:,} device checks)")
        if found == EXCEEDED:
            # Only the first claim can get here (later ones stop at their claim's boundary), and the
            # pre-checks make it unreachable in practice; upstream reports it as an error.
            raise AllocationError("allocation max size exceeded")
        return found == FOUND

    def _close_frame(self, entry_weight: int, found: int) -> None:
        """A request alternative was tried: its work goes to the enclosing frame. Failed, it was tried in
        every ordering of the devices before it (as many times as the weight at its entry); stopped by
        the claim's result limit, it was left at once, on its first path."""
        failed, succeeded = self.frames.pop()
        self.weight = entry_weight
        outer = self.frames[-1]
        if found == FOUND:
            outer[1] += succeeded
            return
        if found == EXCEEDED:
            outer[0] += entry_weight * succeeded
            outer[1] += succeeded
            return
        outer[0] += entry_weight * failed
        outer[1] += failed
        # What the scheduler does at least, whatever comes next: stop once it is beyond its time limit.
        if sum(frame[1] for frame in self.frames) > UPSTREAM_CHECKS_LIMIT:
            raise SearchBudgetExceeded("the scheduler's search would take longer than its filter timeout")

    def _claim(self, index: int) -> int:
        if index == len(self.plans):
            return FOUND
        found = self._request(index, 0)
        # A limit reached in this claim says nothing about the previous claim's choices.
        return FAILED if found == EXCEEDED and index > 0 else found

    def _request(self, claim_index: int, request_index: int) -> int:
        plan = self.plans[claim_index]
        if request_index == len(plan.requests):
            return self._claim(claim_index + 1)
        alternatives = plan.requests[request_index]
        all_exceeded = True
        estimate = self.estimate_upstream
        for position, alternative in enumerate(alternatives):
            if estimate:
                entry_weight, self.weight = self.weight, 1
                self.frames.append([0, 0])
            if alternative.all_devices is not None and position > 0 and self.gates.minor <= 35:
                found = self._take_all_then_first_alternative(claim_index, request_index, alternative,
                                                              alternatives[0])
            elif alternative.all_devices is not None:
                found = self._take_all(claim_index, request_index, alternative)
            else:
                found = self._slot(claim_index, request_index, alternative, 0, 0)
            if estimate:
                self._close_frame(entry_weight, found)
            if found == FOUND:
                return FOUND
            if found == FAILED:
                all_exceeded = False
        return EXCEEDED if all_exceeded else FAILED

    def _take_all_then_first_alternative(self, claim_index: int, request_index: int, alternative: Alternative,
                                         first: Alternative) -> int:
        """Kubernetes 1.34 and 1.35: an `All` subrequest other than the first takes its first device, then
        the upstream search goes on with the *first* subrequest's data from device slot 1 (its recursion
        drops the subrequest index; fixed in 1.36). Reproduced because those schedulers answer that way."""
        plan = self.plans[claim_index]
        devices = alternative.all_devices or []
        if not devices:
            return FAILED
        if len(plan.picks) + len(devices) > MAX_RESULTS_PER_CLAIM:
            return EXCEEDED
        pick = self.take(plan, alternative, devices[0], strict=True)
        if pick is None:
            return FAILED
        if first.all_devices is not None:
            found = self._take_all(claim_index, request_index, first, start=1)
        else:
            found = self._slot(claim_index, request_index, first, 1, 0)
        if found != FOUND:
            self.release(plan, pick)
        return found

    def _take_all(self, claim_index: int, request_index: int, alternative: Alternative, start: int = 0) -> int:
        plan = self.plans[claim_index]
        devices = alternative.all_devices or []
        if not devices:
            return FAILED  # at least one device is needed
        if start >= len(devices):
            return self._request(claim_index, request_index + 1)
        if len(plan.picks) + len(devices) - start > MAX_RESULTS_PER_CLAIM:
            return EXCEEDED
        if self.budget is not None:
            self._count(len(devices) - start)
        taken: list[Pick] = []
        found = FAILED
        for index in range(start, len(devices)):
            pick = self.take(plan, alternative, devices[index], slot=index, strict=True)
            if pick is None:
                break
            taken.append(pick)
        else:
            found = self._request(claim_index, request_index + 1)
            if found == FOUND:
                return FOUND
        for pick in reversed(taken):
            self.release(plan, pick)
        return found

    def _count(self, checks: int) -> None:
        """Count the work the search is about to do: the devices a loop checks (as the scheduler's loop checks
        them) and the counters a device takes. Past the budget the search gives up."""
        self.steps += checks
        if self.budget is not None and self.steps > self.budget:
            raise SearchBudgetExceeded(
                f"search gave up after {self.budget:,} device checks: too many combinations of devices to try "
                f"(the scheduler's allocator stops at its 10 s filter timeout, about {UPSTREAM_CHECKS_LIMIT:,} "
                "checks, and may give up here too)")

    def _slot(self, claim_index: int, request_index: int, alternative: Alternative, slot: int,
              start: int) -> int:
        count = alternative.count
        if slot >= count:
            return self._request(claim_index, request_index + 1)
        plan = self.plans[claim_index]
        if len(plan.picks) + count - slot > MAX_RESULTS_PER_CLAIM:
            return EXCEEDED
        devices = self.view.devices
        weight = self.weight
        if self.estimate_upstream:
            frame = self.frames[-1]
            frame[0] += weight * len(devices)
            frame[1] += len(devices)
        owner = plan.owner
        capacity = self.consumable_gate
        # Combinations (1.36): the next slot starts after this device. Permutations (older
        # releases): every slot starts at the beginning; only used where the order can change the
        # answer (see _order_matters), else combinations that may repeat a shared device stand in.
        barrier = self.invalid_barrier
        begin, end = (0 if self.permute else start), (len(devices) if barrier is None else barrier)
        if self.budget is not None:
            self._count(end - begin)
        for position in range(begin, end):
            device = devices[position]
            if self.in_use(plan, alternative, device):
                continue
            if not self.selectable(owner, alternative, device):
                continue
            if capacity and not self._capacity_admits(alternative, device):
                continue
            pick = self.take(plan, alternative, device, slot=slot, free=True)
            if pick is None:
                continue
            self.weight = weight * (slot + 1)
            found = self._slot(claim_index, request_index, alternative, slot + 1,
                               position if pick.shared and self.shares_repeat else position + 1)
            self.weight = weight
            if found == FOUND:
                return FOUND
            self.release(plan, pick)
            if found == EXCEEDED:
                return EXCEEDED
        if barrier is not None:
            raise AllocationError(self.invalid_pool)
        return FAILED


def _tolerated(device: Device, selection: DeviceSelection, every_effect: bool = False) -> bool:
    for taint in device.taints:
        if not every_effect and taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint.key, taint.value, taint.effect) for t in selection.tolerations):
            return False
    return True


def _tolerates(toleration: DeviceToleration, key: str, value: str, effect: str) -> bool:
    if toleration.effect and toleration.effect != effect:
        return False
    if toleration.key and toleration.key != key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == value
