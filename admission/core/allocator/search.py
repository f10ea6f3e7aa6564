"""The per-node search: pre-checks (spec section 4), then first fit with backtracking (sections 5-7).

One `NodeSearch` answers "can these claims be allocated together on this node?". It reads the
inventory and the cluster's in-use state and never changes them; everything it picks lives in its
own bookkeeping and is undone on backtracking.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from admission.core.allocator.capacity import Consumption, consumption, fits
from admission.core.allocator.constraints import ConstraintTracker
from admission.core.allocator.errors import AllocationError, MissingDeviceClass
from admission.core.allocator.inventory import NodeView, PoolView, SnapshotIndex
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
TAINTED = "has a taint that is not tolerated"
CAPACITY = "not enough capacity left"
PARTITIONS_OFF = "consumes counters, but DRAPartitionableDevices is off"


class SearchBudgetExceeded(Exception):
    """The search tried more devices than allowed (as the scheduler's filter timeout would)."""


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
    constraints: tuple[ConstraintTracker, ...] = ()

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


@dataclass(slots=True)
class ClaimPlan:
    claim: ResourceClaim
    owner: str
    requests: list[list[Alternative]]
    constraints: list[ConstraintTracker]
    picks: list[Pick] = field(default_factory=list)
    devices: dict[str, int] = field(default_factory=dict)  # device id -> times picked in this claim


class NodeSearch:
    def __init__(self, inventory: SnapshotIndex, view: NodeView, usage: Usage, gates: FeatureGates,
                 selectors: SelectorEvaluator, budget: int | None = None) -> None:
        self.inventory = inventory
        self.view = view
        self.usage = usage
        self.gates = gates
        self.selectors = selectors
        self.budget = budget
        self.steps = 0
        self.picked: set[str] = set()
        self.shared_in_search: dict[str, int] = defaultdict(int)
        self.consumed_in_search: dict[str, Consumption] = {}
        self.counters_in_search: dict[str, dict[CounterKey, Fraction]] = defaultdict(dict)
        self._cluster_counters: dict[str, dict[CounterKey, Fraction]] = {}
        self._overconsumed: dict[str, bool] = {}
        self.plans: list[ClaimPlan] = []
        # Gate answers looked up once: they are read for every device tried.
        self.consumable_gate = gates.consumable_capacity
        self.binding_gate = gates.binding_conditions
        self.taints_gate = gates.device_taints
        self.partitions_gate = gates.partitionable_devices

    # ----- pre-checks -------------------------------------------------------------------------

    def prepare(self, claims: Sequence[ResourceClaim]) -> None:
        """Section 4, in claim and request order; raises AllocationError for unusable requests."""
        self.plans = [self.plan_claim(claim) for claim in claims]

    def plan_claim(self, claim: ResourceClaim) -> ClaimPlan:
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
        for constraint in claim.spec.constraints:
            if constraint.match_attribute is None and constraint.distinct_attribute is None:
                raise AllocationError(f"{owner}: empty constraint (unsupported constraint type?)")
        return ClaimPlan(claim, owner, requests, trackers)

    def _alternative(self, owner: str, where: str, request: str, result_name: str,
                     selection: DeviceSelection, trackers: list[ConstraintTracker]) -> Alternative:
        gates = self.gates
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
            raise MissingDeviceClass(f"{where}: could not retrieve device class {name}", name)
        alternative = Alternative(
            request=request, result_name=result_name, selection=selection, device_class=device_class,
            admin=bool(selection.admin_access), class_owner=f"class {device_class.name}",
            signature=self.selectors.signature(device_class.name, device_class.selectors, owner,
                                               selection.selectors),
            constraints=tuple(t for t in trackers if t.applies(request, result_name)),
        )
        if selection.allocation_mode == ALL:
            alternative.all_devices = self._all_devices(owner, where, alternative)
        elif selection.allocation_mode != EXACT_COUNT:
            raise AllocationError(f"{where}: unsupported count mode {selection.allocation_mode}")
        return alternative

    def _all_devices(self, owner: str, where: str, alternative: Alternative) -> list[Device]:
        for pool in self.view.pools:
            if pool.incomplete:
                raise AllocationError(f"{where}: asks for all devices, but resource pool {pool.id} "
                                      "is currently being updated")
            if pool.invalid is not None:
                raise AllocationError(f"{where}: asks for all devices, but resource pool {pool.id} "
                                      "is currently invalid")
        # From 1.35 on, devices whose remaining capacity cannot serve the request are left out;
        # 1.34 listed them and then failed to take them.
        check_capacity = self.gates.minor >= 35
        chosen = []
        for device in self.view.devices:
            if self.selectable(owner, alternative, device) and (
                    not check_capacity or self._capacity_admits(alternative, device)):
                chosen.append(device)
        return chosen

    # ----- selection and availability ---------------------------------------------------------

    def selectable(self, owner: str, alternative: Alternative, device: Device) -> bool:
        """Section 5.2: binding conditions, class selectors, then request selectors."""
        if device.binding_conditions and not self.binding_gate:
            return False
        return self.selectors.selects(alternative.signature, alternative.class_owner,
                                      alternative.device_class.selectors, owner, alternative.selection.selectors,
                                      device)

    def _capacity_admits(self, alternative: Alternative, device: Device) -> bool:
        if not self.gates.consumable_capacity:
            return True
        multi = device.allow_multiple_allocations
        requests = alternative.selection.capacity_requests
        if not requests and not multi:
            return True
        amount = consumption(device, requests)
        if amount is None:
            return False
        if not multi:
            return fits(device, amount)
        key = device.id
        return fits(device, amount, self.usage.consumed.get(key), self.consumed_in_search.get(key))

    def blocker(self, plan: ClaimPlan, alternative: Alternative, device: Device) -> str | None:
        """Section 5.3 without constraints: why a selectable device cannot be taken now, or None."""
        device_id = device.id
        multi = self.consumable_gate and device.allow_multiple_allocations
        if alternative.admin:
            if device_id in plan.devices:
                return IN_USE
        elif multi:
            if device_id in self.usage.exclusive:
                return IN_USE
        elif device_id in self.picked or self.usage.is_allocated(device_id):
            return IN_USE
        if device.consumes_counters:
            if not self.partitions_gate:
                return PARTITIONS_OFF
            if not self._already_charged(device_id, multi) and not self._counters_fit(device):
                return COUNTERS
        if self.taints_gate and device.taints and not _tolerated(device, alternative.selection):
            return TAINTED
        if self.consumable_gate and not self._capacity_admits(alternative, device):
            return CAPACITY
        return None

    def _already_charged(self, device_id: str, multi: bool) -> bool:
        # Counters of a shared device are charged once, by whichever allocation came first.
        return multi and (device_id in self.usage.shared or device_id in self.shared_in_search)

    def _counters_fit(self, device: Device) -> bool:
        pool = self.view.pool_of[device.id]
        declared = pool.counter_sets
        cluster = self._cluster_usage(pool)
        if self._pool_overconsumed(pool, cluster):
            return False
        search = self.counters_in_search.get(pool.id, {})
        for use in device.consumes_counters:
            available = declared.get(use.counter_set, {})
            for counter, amount in use.counters.items():
                key = (use.counter_set, counter)
                limit = available.get(counter)
                if limit is None:
                    return False
                total = cluster.get(key, Fraction(0)) + search.get(key, Fraction(0)) + amount.value
                if total > limit.value:
                    return False
        return True

    def _pool_overconsumed(self, pool: PoolView, cluster: dict[CounterKey, Fraction]) -> bool:
        """Whether allocations in the cluster already exceed some counter of the pool.

        The scheduler checks every counter set of the pool, not only the ones the device consumes, so
        one over-consumed set (possible when allocations were made outside the allocator) leaves no
        counter-consuming device of the pool usable. Counters taken during this search never exceed
        their limit, so only the cluster's allocations can cause it.
        """
        cached = self._overconsumed.get(pool.id)
        if cached is None:
            cached = any(cluster.get((name, counter), Fraction(0)) > limit.value
                         for name, counters in pool.counter_sets.items() for counter, limit in counters.items())
            self._overconsumed[pool.id] = cached
        return cached

    def _cluster_usage(self, pool: PoolView) -> dict[CounterKey, Fraction]:
        cached = self._cluster_counters.get(pool.id)
        if cached is not None:
            return cached
        totals: dict[CounterKey, Fraction] = {}
        names = self.usage.by_pool.get(pool.id, ())
        if names:
            devices = self.inventory.pool_devices((pool.driver, pool.name), pool.generation)
            for name in names:
                allocated = devices.get(name)
                if allocated is None:
                    continue
                for use in allocated.consumes_counters:
                    for counter, amount in use.counters.items():
                        key = (use.counter_set, counter)
                        totals[key] = totals.get(key, Fraction(0)) + amount.value
        self._cluster_counters[pool.id] = totals
        return totals

    # ----- taking and releasing devices -------------------------------------------------------

    def take(self, plan: ClaimPlan, alternative: Alternative, device: Device, *,
             strict: bool = False) -> Pick | None:
        """Record the device for the alternative if it can be taken; None if not.

        With `strict` (allocation mode All) a constraint violation is an error, not a failure.
        """
        if self.budget is not None:
            self.steps += 1
            if self.steps > self.budget:
                raise SearchBudgetExceeded
        if self.blocker(plan, alternative, device) is not None:
            return None
        for added, tracker in enumerate(alternative.constraints):
            if not tracker.add(alternative.request, device):
                for undo in alternative.constraints[:added]:
                    undo.remove(alternative.request)
                if strict:
                    raise AllocationError(f"{plan.owner}, request {alternative.result_name}: cannot add "
                                          f"device {device.id} because a claim constraint would not be "
                                          "satisfied")
                return None
        return self._record(plan, alternative, device)

    def _record(self, plan: ClaimPlan, alternative: Alternative, device: Device) -> Pick:
        device_id = device.id
        multi = self.consumable_gate and device.allow_multiple_allocations
        pick = Pick(alternative, device, shared=multi)
        if device.consumes_counters and not self._already_charged(device_id, multi) and not alternative.admin:
            pool_id = self.view.pool_of[device_id].id
            charged: dict[CounterKey, Fraction] = {}
            totals = self.counters_in_search[pool_id]
            for use in device.consumes_counters:
                for counter, amount in use.counters.items():
                    key = (use.counter_set, counter)
                    charged[key] = charged.get(key, Fraction(0)) + amount.value
                    totals[key] = totals.get(key, Fraction(0)) + amount.value
            pick.counters = charged
        if multi:
            taken = consumption(device, alternative.selection.capacity_requests) or {}
            pick.consumed = taken
            mine = self.consumed_in_search.setdefault(device_id, {})
            for name, value in taken.items():
                mine[name] = mine.get(name, Fraction(0)) + value
            if not alternative.admin:
                self.shared_in_search[device_id] += 1
        elif not alternative.admin:
            self.picked.add(device_id)
        plan.devices[device_id] = plan.devices.get(device_id, 0) + 1
        plan.picks.append(pick)
        return pick

    def release(self, plan: ClaimPlan, pick: Pick) -> None:
        device_id = pick.device.id
        alternative = pick.alternative
        plan.picks.pop()
        left = plan.devices[device_id] - 1
        if left:
            plan.devices[device_id] = left
        else:
            del plan.devices[device_id]
        if pick.shared:
            mine = self.consumed_in_search[device_id]
            for name, value in (pick.consumed or {}).items():
                mine[name] -= value
            if not alternative.admin:
                self.shared_in_search[device_id] -= 1
                if not self.shared_in_search[device_id]:
                    del self.shared_in_search[device_id]
        elif not alternative.admin:
            self.picked.discard(device_id)
        if pick.counters:
            totals = self.counters_in_search[self.view.pool_of[device_id].id]
            for key, value in pick.counters.items():
                totals[key] -= value
        for tracker in reversed(alternative.constraints):
            tracker.remove(alternative.request)

    # ----- the search -------------------------------------------------------------------------

    def run(self) -> bool:
        """Depth-first first fit over claims, requests and device slots (section 6)."""
        return self._claim(0)

    def _claim(self, index: int) -> bool:
        if index == len(self.plans):
            return True
        return self._request(index, 0)

    def _request(self, claim_index: int, request_index: int) -> bool:
        plan = self.plans[claim_index]
        if request_index == len(plan.requests):
            return self._claim(claim_index + 1)
        alternatives = plan.requests[request_index]
        for position, alternative in enumerate(alternatives):
            if len(plan.picks) + alternative.count > MAX_RESULTS_PER_CLAIM:
                continue
            if alternative.all_devices is not None and position > 0 and self.gates.minor <= 35:
                if self._take_all_then_first_alternative(claim_index, request_index, alternative, alternatives[0]):
                    return True
            elif alternative.all_devices is not None:
                if self._take_all(claim_index, request_index, alternative):
                    return True
            elif self._slot(claim_index, request_index, alternative, 0, 0):
                return True
        return False

    def _take_all_then_first_alternative(self, claim_index: int, request_index: int, alternative: Alternative,
                                         first: Alternative) -> bool:
        """Kubernetes 1.34 and 1.35: an `All` subrequest other than the first takes its first device, then
        the upstream search goes on with the *first* subrequest's data from device slot 1 (its recursion
        drops the subrequest index; fixed in 1.36). Reproduced because those schedulers answer that way."""
        plan = self.plans[claim_index]
        devices = alternative.all_devices or []
        if not devices:
            return False
        pick = self.take(plan, alternative, devices[0], strict=True)
        if pick is None:
            return False
        if first.all_devices is not None:
            done = self._take_all(claim_index, request_index, first, start=1)
        else:
            done = self._slot(claim_index, request_index, first, 1, 0)
        if done:
            return True
        self.release(plan, pick)
        return False

    def _take_all(self, claim_index: int, request_index: int, alternative: Alternative, start: int = 0) -> bool:
        plan = self.plans[claim_index]
        devices = alternative.all_devices or []
        if not devices:
            return False
        taken: list[Pick] = []
        for device in devices[start:]:
            pick = self.take(plan, alternative, device, strict=True)
            if pick is None:
                break
            taken.append(pick)
        else:
            if self._request(claim_index, request_index + 1):
                return True
        for pick in reversed(taken):
            self.release(plan, pick)
        return False

    def _slot(self, claim_index: int, request_index: int, alternative: Alternative, slot: int,
              start: int) -> bool:
        if slot == alternative.count:
            return self._request(claim_index, request_index + 1)
        plan = self.plans[claim_index]
        devices = self.view.devices
        owner = plan.owner
        for position in range(start, len(devices)):
            device = devices[position]
            if not self.selectable(owner, alternative, device):
                continue
            pick = self.take(plan, alternative, device)
            if pick is None:
                continue
            # Combinations, not permutations: the next slot starts after this device, or at it
            # again when the device hands out shares.
            following = position if pick.shared else position + 1
            if self._slot(claim_index, request_index, alternative, slot + 1, following):
                return True
            self.release(plan, pick)
        return False


def _tolerated(device: Device, selection: DeviceSelection) -> bool:
    for taint in device.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
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
