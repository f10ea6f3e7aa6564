"""What an admitted group holds, so that its eviction can be taken back out of a snapshot: its charge,
the devices of its claims (allocated, or promised by its recorded plan), and its pods' requests on
their nodes (bound, or planned)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from admission.core.allocator import Usage
from admission.core.cycle.groups import TERMINAL_PHASES, GroupView
from admission.core.cycle.plans import promised_allocations
from admission.core.cycle.shape import open_slot_pods
from admission.core.cycle.timing import parse_time
from admission.core.features import FeatureGates
from admission.core.models import AllocationResult, Pod, ResourceClaim, qualified_name
from admission.core.nodefit import NodeUsage, pod_amounts
from admission.core.quota import Admission, Amounts, Phase, QueueState


@dataclass(frozen=True, slots=True)
class Holding:
    """An admitted group as a possible victim."""

    group: str
    cluster_queue: str
    priority: int
    admitted_at: dt.datetime | None
    charge: Amounts
    allocations: tuple[AllocationResult, ...]
    pods: tuple[tuple[str, Pod], ...]  # (node, pod) per live member, bound or planned
    # Worked out once: the search reads them for every victim set it tries.
    nodes: frozenset[str] = field(init=False, repr=False, compare=False)
    devices: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", frozenset([node for node, _ in self.pods]))
        object.__setattr__(self, "devices", sum([len(a.results) for a in self.allocations]))

    def requests(self) -> tuple[tuple[str, Mapping[str, int]], ...]:
        """What the members take on their nodes (scheduler units)."""
        return tuple((node, pod_amounts(pod)) for node, pod in self.pods)


def holdings(groups: Iterable[GroupView], claims: Mapping[str, ResourceClaim],
             state: QueueState) -> tuple[Holding, ...]:
    """Every group the accounting holds as admitted, with what it takes."""
    admissions = state.admissions
    found = []
    for group in groups:
        admission = admissions.get(group.key) if group.holds_quota else None
        if admission is not None:
            found.append(_holding(group, admission, claims))
    return tuple(found)


def _holding(group: GroupView, admission: Admission, claims: Mapping[str, ResourceClaim]) -> Holding:
    pod_group = group.pod_group
    assert pod_group is not None  # it holds quota
    planned: dict[str, str] | None = None  # the plan's node per pod name, read for pods not bound yet
    pods: list[tuple[str, Pod]] = []
    allocations: dict[str, AllocationResult] = {}
    for pod in group.pods:
        if pod.phase in TERMINAL_PHASES:
            continue
        node = pod.node_name
        if not node:
            planned = planned if planned is not None else dict(pod_group.plan.nodes)
            node = planned.get(pod.name, "")
        if node:
            pods.append((node, pod))
        for entry in pod.resource_claims:
            name = pod.claim_name_for(entry)
            if not name:
                continue
            key = f"{pod.namespace}/{name}"
            claim = claims.get(key)
            if claim is not None and claim.allocation is not None:
                allocations[key] = claim.allocation
    pods.extend(open_slot_pods(group))
    # As the cycle's promised devices: the planned claims not seen allocated yet (none where the plan has none).
    promised = promised_allocations(pod_group.plan, group.pods, claims, group.namespace,
                                    pod_group.phase is Phase.RUNNING) if pod_group.plan.claims else ()
    return Holding(group.key, admission.cluster_queue, group.priority, parse_time(pod_group.admitted_at),
                   admission.charge, (*allocations.values(), *promised), tuple(pods))


def without_devices(usage: Usage, victims: Iterable[Holding], gates: FeatureGates) -> Usage:
    """A copy of `usage` with the victims' devices free again. The copy's sets and maps are replaced,
    never changed in place, so copies that share them with `usage` are untouched."""
    freed = usage.copy()
    exclusive = set(freed.exclusive)
    shared = dict(freed.shared)
    consumed = dict(freed.consumed)
    pools: dict[str, set[str]] = {}
    for victim in victims:
        for allocation in victim.allocations:
            for result in allocation.results:
                if result.admin_access:
                    continue
                device_id = result.device_id
                if gates.consumable_capacity and result.share_id:
                    left = shared.get(device_id, 0) - 1
                    if left > 0:
                        shared[device_id] = left
                    else:
                        shared.pop(device_id, None)
                    if result.consumed_capacity and device_id in consumed:
                        totals = dict(consumed[device_id])
                        for name, amount in result.consumed_capacity.items():
                            key = qualified_name(name, result.driver)
                            if key in totals:
                                totals[key] = max(totals[key] - amount.value, Fraction(0))
                        consumed[device_id] = totals
                else:
                    exclusive.discard(device_id)
                if device_id not in exclusive and device_id not in shared:
                    pool = f"{result.driver}/{result.pool}"
                    if pool not in pools:
                        pools[pool] = set(freed.by_pool.get(pool, ()))
                    pools[pool].discard(result.device)
    freed.exclusive = exclusive
    freed.shared = defaultdict(int, shared)
    freed.consumed = consumed
    for pool, devices in pools.items():
        freed.by_pool[pool] = devices
    return freed


def without_pods(nodes: NodeUsage, victims: Iterable[Holding],
                 requests_of: Callable[[Holding], Iterable[tuple[str, Mapping[str, int]]]] = Holding.requests,
                 ) -> NodeUsage:
    """`nodes` with the victims' pods gone; `requests_of` says what each victim's pods take (default: worked
    out from its pods)."""
    return nodes.minus_all([pair for victim in victims for pair in requests_of(victim)])
