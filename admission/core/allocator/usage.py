"""Which devices are in use, from already-allocated claims (spec section 3).

Admin-access results hold nothing; with consumable capacity, results carrying a shareID hold a share
of the device's capacity; every other result holds its device exclusively. `reservedFor` does not
matter: an allocated but unreserved claim still holds its devices.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from fractions import Fraction

from admission.core.features import FeatureGates
from admission.core.models import AllocationResult, DeviceAllocation, qualified_name


class Usage:
    """Mutable in-use state; `copy()` before changing a shared one."""

    __slots__ = ("_owned", "by_pool", "consumed", "exclusive", "shared", "version")

    def __init__(self) -> None:
        self.exclusive: set[str] = set()
        self.shared: dict[str, int] = defaultdict(int)
        # device id -> qualified capacity name -> consumed by shares
        self.consumed: dict[str, dict[str, Fraction]] = {}
        # "driver/pool" -> device names holding an allocation (for counters)
        self.by_pool: dict[str, set[str]] = defaultdict(set)
        # The keys of `by_pool` whose sets belong to this usage alone; the others are shared with copies
        # and copied before they change (a copy costs little where pools are many).
        self._owned: set[str] = set()
        self.version = 0

    @classmethod
    def from_allocations(cls, allocations: Iterable[AllocationResult], gates: FeatureGates) -> Usage:
        usage = cls()
        for allocation in allocations:
            usage.add(allocation, gates)
        return usage

    def copy(self) -> Usage:
        other = Usage()
        other.exclusive = set(self.exclusive)
        other.shared = defaultdict(int, self.shared)
        other.consumed = {k: dict(v) for k, v in self.consumed.items()}
        other.by_pool = defaultdict(set, self.by_pool)
        self._owned = set()
        return other

    def within(self, devices: Collection[str], pools: Collection[str]) -> Usage:
        """The part of this usage that allocating on nodes that see only `devices` reads: those devices, and
        every allocated device of their pools (`pools`, as "driver/pool": shared counters count them all).
        The same answers on those nodes as this usage, from a copy a fraction of its size."""
        kept = set(devices)
        for pool in pools:
            kept.update(f"{pool}/{name}" for name in self.by_pool.get(pool, ()))
        other = Usage()
        other.exclusive = {d for d in kept if d in self.exclusive}
        other.shared = defaultdict(int, {d: n for d, n in self.shared.items() if d in kept})
        other.consumed = {d: dict(v) for d, v in self.consumed.items() if d in kept}
        other.by_pool = defaultdict(set, {p: self.by_pool[p] for p in pools if p in self.by_pool})
        self._owned = set()  # the pools' sets are shared now: copied by either before it changes them
        return other

    def add(self, allocation: AllocationResult, gates: FeatureGates) -> None:
        for result in allocation.results:
            self.add_result(result, gates)

    def add_result(self, result: DeviceAllocation, gates: FeatureGates) -> None:
        if result.admin_access:
            return
        device_id = result.device_id
        pool = f"{result.driver}/{result.pool}"
        if pool not in self._owned:
            self.by_pool[pool] = set(self.by_pool.get(pool, ()))
            self._owned.add(pool)
        self.by_pool[pool].add(result.device)
        self.version += 1
        if gates.consumable_capacity and result.share_id:
            self.shared[device_id] += 1
            if not result.consumed_capacity:
                return  # a share that took no capacity (the scheduler then does not track the device)
            totals = self.consumed.setdefault(device_id, {})
            for name, amount in result.consumed_capacity.items():
                key = qualified_name(name, result.driver)
                totals[key] = totals.get(key, Fraction(0)) + amount.value
        else:
            self.exclusive.add(device_id)

    def is_allocated(self, device_id: str) -> bool:
        return device_id in self.exclusive or device_id in self.shared
