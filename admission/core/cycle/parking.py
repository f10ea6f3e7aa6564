"""Parked groups: a pending group that was evaluated and not admitted is not evaluated again until something
that could change its answer happens, as the kube-scheduler's queueing hints and Kueue's inadmissible
workloads do. A cycle's cost then follows what changed, not the size of the backlog.

A parked group keeps the Wait it was given; the cycle hands that Wait out again in the group's turn, so the
order, the per-LocalQueue misses, StrictFIFO blocking and preemption see exactly what an evaluation would
give. A parked Wait is given out again only while all of these hold:

- the group's view (its pods, PodGroup, creation time), the claims and templates its members name, and its
  LocalQueue are the same objects or equal;
- the cycle's configuration (units, feature gates, topologies) is equal, and no ClusterQueue of its cohort
  changed its spec (`Epochs.queues`);
- the cluster's capacity epoch is the same (`Epochs.capacity`): the shell's counter of changes that could
  give a group room (`node_frees_room`, `claim_frees_room`, `pod_frees_room`, and any change to
  ResourceSlices, DeviceClasses or taint rules), bumped here too when a promised device reservation went
  away without its claim holding the devices, when late members were placed, or when an admission of the
  last cycle is not recorded yet (its usage is not in this cycle's);
- for a quota wait, no ClusterQueue of its cohort has less usage in any unit than at the end of the last
  cycle (`Epochs.freed`);
- less than `Parking.safety_seconds` passed since it was evaluated: a periodic safety re-evaluation, so a
  missed hint cannot keep a group waiting for good.

Why the same Wait is still the answer: within those conditions the devices, node room and quota usage a
group meets in its turn are at least those it met when it was parked (admissions, bindings and allocations
only add to them), and neither a placement nor a quota check can succeed on more usage where it failed on
less. That does not hold for a pod that needs other pods near it (required pod affinity, topology spread):
a newly bound pod can let it fit, so groups with such members are never parked, as the scheduler requeues
those pods on pod events. A quota wait is
parked only when its ClusterQueue's units count devices without a selector or weight: otherwise its charge
could depend on which devices a busier cluster leaves to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from enum import StrEnum

from admission.core.allocator import Usage
from admission.core.cycle.groups import TERMINAL_PHASES, GroupView
from admission.core.cycle.lines import Lines
from admission.core.cycle.prechecked import Prechecked
from admission.core.cycle.types import CycleInput, Wait, WaitReason
from admission.core.models import AllocationResult, Node, Pod, ResourceClaim, ResourceClaimTemplate
from admission.core.quota import LocalQueue, QueueState

DEFAULT_SAFETY_SECONDS = 60.0


class ParkKind(StrEnum):
    """What a parked group waits for."""

    QUOTA = "quota"  # its ClusterQueue or cohort to free quota (or raise it)
    ROOM = "room"  # devices or node room: a node, slice, class or claim to change, or a bound pod to go


PARKED_REASONS: Mapping[WaitReason, ParkKind] = {
    WaitReason.QUOTA: ParkKind.QUOTA,
    WaitReason.DEVICES: ParkKind.ROOM,
    WaitReason.NODES: ParkKind.ROOM,
    WaitReason.NEVER_FITS: ParkKind.ROOM,
}
# Not parked: `Unchargeable`, whose answer depends on the devices chosen, and every reason given before a
# group is placed (those checks are cheap and run every cycle).


@dataclass(frozen=True, slots=True)
class Changes:
    """What the shell feeds each cycle: its capacity counter and its monotonic clock."""

    capacity: int = 0  # bumped on every change that could give a waiting group room (see the module's text)
    now: float = 0.0  # seconds, monotonic


@dataclass(frozen=True, slots=True)
class Epochs:
    """Counters kept by the core from one cycle to the next; a parked group remembers their values."""

    capacity: int = 0
    config: int = 0
    freed: Mapping[str, int] = field(default_factory=dict)  # by cohort (a ClusterQueue without one: its name)
    queues: Mapping[str, int] = field(default_factory=dict)  # by cohort: spec changes of its ClusterQueues


@dataclass(frozen=True, slots=True)
class ParkedWait:
    wait: Wait
    group: GroupView
    local: LocalQueue
    objects: tuple[object, ...]  # `own_objects`: the claims and templates its members name
    sources: tuple[object, object]  # the snapshot's claims and templates they were looked up in
    kind: ParkKind
    cohort: str
    capacity: int
    config: int
    freed: int
    queues: int
    since: float


@dataclass(frozen=True, slots=True)
class Baseline:
    """The end of the last cycle, to tell what changed since."""

    shell_capacity: int
    state: QueueState
    promised: Mapping[str, AllocationResult]  # `_promised`
    admitted: frozenset[str]
    extended: bool
    config: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Parking:
    """The parked groups and the counters, carried from one cycle's result (`CycleResult.parking`) to the next
    cycle's input (`CycleInput.parking`, with this cycle's `Changes`)."""

    changes: Changes = field(default_factory=Changes)
    safety_seconds: float = DEFAULT_SAFETY_SECONDS
    parked: Mapping[str, ParkedWait] = field(default_factory=dict)
    epochs: Epochs = field(default_factory=Epochs)
    last: Baseline | None = None
    # Each LocalQueue's pending groups, head and `BehindInQueue` Waits as the last cycle had them (`lines`):
    # given again where the LocalQueue's groups did not change, so that thousands of groups behind their
    # LocalQueue's budget cost nothing.
    lines: Lines | None = None
    prechecked: Prechecked | None = None  # the groups that passed the checks before ordering, and in what context
    # The last cycle's `BehindInQueue` Waits of groups in a head past its LocalQueue's misses, by group: given
    # again, the same objects, where nothing in them changed.
    behind: Mapping[str, Wait] = field(default_factory=dict)

    def fed(self, changes: Changes) -> Parking:
        """The same parking, with this cycle's changes from the shell."""
        return replace(self, changes=changes)


def cohort_of(state: QueueState, queue: str) -> str:
    cluster_queue = state.queues.get(queue)
    return cluster_queue.cohort or queue if cluster_queue is not None else queue


def _config(cycle: CycleInput) -> tuple[object, ...]:
    return (cycle.units, cycle.gates, dict(cycle.topologies))


def advance(parking: Parking, cycle: CycleInput, pending: AbstractSet[str]) -> Parking:
    """The counters brought up to this cycle: each one bumped where the cluster changed since the last.
    `pending`: the keys of the groups waiting for admission now."""
    last, epochs = parking.last, parking.epochs
    if last is None:
        return parking
    capacity_changed = (last.shell_capacity != parking.changes.capacity or last.extended
                        or _promise_freed(last.promised, cycle) or any(key in pending for key in last.admitted))
    freed, queues = _queue_changes(last.state, cycle.state)
    epochs = Epochs(epochs.capacity + capacity_changed, epochs.config + (last.config != _config(cycle)),
                    _bumped(epochs.freed, freed), _bumped(epochs.queues, queues))
    return replace(parking, epochs=epochs)


def _promised(promised: Iterable[AllocationResult]) -> dict[str, AllocationResult]:
    # An allocation holds mappings (consumed capacity), so it is not hashable; its text stands for it.
    return {repr(a): a for a in promised}


def _promise_freed(before: Mapping[str, AllocationResult], cycle: CycleInput) -> bool:
    """Whether a device promised at the end of the last cycle is neither promised nor allocated now. A
    promise that ends because the scheduler allocated its claim on the planned devices frees nothing."""
    now = _promised(cycle.promised)
    gone = [a for key, a in before.items() if key not in now]
    if not gone:
        return False
    held: Usage = cycle.snapshot.in_use(cycle.gates)
    return any(r.share_id or not held.is_allocated(r.device_id)
               for allocation in gone for r in allocation.results if not r.admin_access)


def node_frees_room(before: Node | None, after: Node | None) -> bool:
    """Whether this change of a node could give a waiting group room: a node added, or changed in what
    placement reads (labels, allocatable, taints, schedulability). A removed node gives none, and neither
    does one that only gained taints or was cordoned (a node going NotReady, as the node-lifecycle
    controller taints it): a taint or a cordon only turns pods away."""
    return after is not None and after != before and not _only_restricted(before, after)


def _only_restricted(before: Node | None, after: Node) -> bool:
    return before is not None and before.meta == after.meta and before.allocatable == after.allocatable \
        and (after.unschedulable or not before.unschedulable) and set(before.taints) <= set(after.taints)


def claim_frees_room(before: ResourceClaim | None, after: ResourceClaim | None) -> bool:
    """Whether this change of a claim could free devices: an allocated claim deleted, or its allocation
    removed or changed. A new claim, or one allocated now, takes devices and gives none."""
    return before is not None and before.allocation is not None and (
        after is None or after.allocation != before.allocation)


def pod_frees_room(before: Pod | None, after: Pod | None) -> bool:
    """Whether this change of a pod could free node room: a pod that held room on a node deleted, finished,
    moved, or changed in what it asks. A pending pod holds no room (its own group sees its changes), and a
    pod bound now takes room."""
    if before is None or not _holds_room(before):
        return False
    return after is None or not _holds_room(after) or after.node_name != before.node_name \
        or _asks(after) != _asks(before)


def _holds_room(pod: Pod) -> bool:
    return bool(pod.node_name) and pod.phase not in TERMINAL_PHASES


def _asks(pod: Pod) -> tuple[object, ...]:
    return (pod.containers, pod.init_containers, pod.overhead, pod.resources, pod.resource_claims)


def _queue_changes(before: QueueState, now: QueueState) -> tuple[set[str], set[str]]:
    """The cohorts where a ClusterQueue's usage went down in some unit, and those where a spec changed."""
    freed: set[str] = set()
    respecified: set[str] = set()
    for name in before.queues.keys() | now.queues.keys():
        old, new = before.queues.get(name), now.queues.get(name)
        cohorts = {q.cohort or name for q in (old, new) if q is not None}
        if old != new:
            respecified |= cohorts
            freed |= cohorts
        elif _went_down(before, now, name):
            freed |= cohorts
    return freed, respecified


def _went_down(before: QueueState, now: QueueState, queue: str) -> bool:
    used = now.usage(queue)
    return any(used.get(unit) < amount for unit, amount in before.usage(queue))


def _bumped(counters: Mapping[str, int], keys: Iterable[str]) -> Mapping[str, int]:
    keys = set(keys)
    if not keys:
        return counters
    return {**counters, **{key: counters.get(key, 0) + 1 for key in keys}}


def own_objects(pods: Iterable[Pod], claims: Mapping[str, ResourceClaim],
                templates: Mapping[str, ResourceClaimTemplate]) -> tuple[object, ...]:
    """The claims and templates the pods name (None where one does not exist), in their order."""
    found: list[object] = []
    for pod in pods:
        for entry in pod.resource_claims:
            name = pod.claim_name_for(entry)
            found.append(claims.get(f"{pod.namespace}/{name}") if name is not None
                         else templates.get(f"{pod.namespace}/{entry.resource_claim_template_name}"))
    return tuple(found)


def still_parked(parking: Parking, group: GroupView, local: LocalQueue, sources: tuple[object, object],
                 objects: Callable[[], tuple[object, ...]]) -> Wait | None:
    """The group's parked Wait when nothing that could change it happened since; otherwise None.
    `sources`: the snapshot's claims and templates; `objects`: the group's `own_objects` in them."""
    parked = parking.parked.get(group.key)
    if parked is None:
        return None
    epochs = parking.epochs
    if parked.capacity != epochs.capacity or parked.config != epochs.config \
            or parked.queues != epochs.queues.get(parked.cohort, 0):
        return None
    if parked.kind is ParkKind.QUOTA and parked.freed != epochs.freed.get(parked.cohort, 0):
        return None
    if parking.changes.now - parked.since >= parking.safety_seconds:
        return None
    if (parked.group is not group and parked.group != group) or (parked.local is not local and parked.local != local):
        return None
    unchanged = parked.sources[0] is sources[0] and parked.sources[1] is sources[1]
    if not unchanged and not _same_objects(parked.objects, objects()):
        return None
    return parked.wait


def _same_objects(before: tuple[object, ...], now: tuple[object, ...]) -> bool:
    return len(before) == len(now) and all(a is b or a == b for a, b in zip(before, now, strict=True))


def parked_wait(parking: Parking, group: GroupView, local: LocalQueue, sources: tuple[object, object],
                objects: tuple[object, ...], wait: Wait, state: QueueState,
                plain_units: frozenset[str]) -> ParkedWait | None:
    """The record that parks `group` after it was evaluated to `wait`, or None when it may not be parked.
    `plain_units`: the units that count devices without a selector or a weight."""
    kind = PARKED_REASONS.get(wait.reason)
    if kind is None or any(p.affinity_terms or p.spread_constraints for p in group.pods):
        return None
    queue = state.queues.get(local.cluster_queue)
    if queue is None or (kind is ParkKind.QUOTA and any(q.unit not in plain_units for q in queue.quotas)):
        return None
    cohort = cohort_of(state, local.cluster_queue)
    epochs = parking.epochs
    return ParkedWait(wait, group, local, objects, sources, kind, cohort, epochs.capacity, epochs.config,
                      epochs.freed.get(cohort, 0), epochs.queues.get(cohort, 0), parking.changes.now)


def plain_units(cycle: CycleInput) -> frozenset[str]:
    return frozenset(u.name for u in cycle.units if u.select is None and u.weigh is None)


def after_cycle(parking: Parking, cycle: CycleInput, parked: Mapping[str, ParkedWait], state: QueueState,
                admitted: Mapping[str, Iterable[AllocationResult]], extended: bool) -> Parking:
    """The parking the next cycle starts from: this cycle's parked groups and what it ended with. `admitted`:
    the groups admitted by this cycle and their devices, which the next cycle must find promised (or the
    capacity counter must have moved: their claims were allocated, or they went away)."""
    taken = [a for allocations in admitted.values() for a in allocations]
    baseline = Baseline(parking.changes.capacity, state, _promised((*cycle.promised, *taken)),
                        frozenset(admitted), extended, _config(cycle))
    return replace(parking, parked=parked, last=baseline)
