"""One admission pass: order the pending groups, and admit each one whose charge and devices both fit.

Pure. The input is an immutable snapshot (DRA objects, nodes and the pods on them, groups, queues,
units, the queue accounting rebuilt from groups admitted before, devices promised to
admitted-but-unbound groups); the output is one decision per pending group. Groups are taken by
priority, then in creation order within a ClusterQueue, alternating between ClusterQueues at equal
priority. Each admitted group's devices, node resources and charge are taken before the next group
is considered; a group is admitted whole or not at all. A group with a declared shape is admitted whole
too, its members not created yet standing in as placeholders (`cycle.shape`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from heapq import heapify, heappop, heappush
from operator import attrgetter

from admission.core.allocator import (
    Allocator,
    GangMember,
    GangPlacement,
    KnownUnfit,
    Usage,
    members_for,
    place_gang,
)
from admission.core.cycle.extended import extended_claims_of
from admission.core.cycle.groups import GroupView
from admission.core.cycle.inventory import charging_inventory
from admission.core.cycle.late import extend, late_members
from admission.core.cycle.lines import behind_message, lines_of
from admission.core.cycle.never import ROOM_REASONS, Shapes, devices_message, never_fits
from admission.core.cycle.nodes import promised_pods, with_pods
from admission.core.cycle.parking import (
    ParkedWait,
    Parking,
    advance,
    after_cycle,
    own_objects,
    parked_wait,
    plain_units,
    still_parked,
)
from admission.core.cycle.plans import shaped_plan
from admission.core.cycle.pod_group_claims import unplannable
from admission.core.cycle.prechecked import Prechecked, context_of, may_keep, still_passed
from admission.core.cycle.shape import Gang, gang_of
from admission.core.cycle.steps import ALLOCATOR, CHARGING, StepTimer
from admission.core.cycle.timing import format_time, in_backoff
from admission.core.cycle.topology import never_in_topology, place_by_topology, topology_level
from admission.core.cycle.types import (
    Admit,
    CycleInput,
    CycleResult,
    CycleStats,
    Extend,
    GroupDecision,
    Wait,
    WaitReason,
)
from admission.core.errors import DraqError
from admission.core.models import AllocationResult, LabelSelector, ObjectRef, Pod, ResourceClaim, TopologyLevel
from admission.core.nodefit import NodeUsage
from admission.core.quota import (
    Amounts,
    ClusterQueue,
    GroupObjects,
    Inventory,
    LocalQueue,
    Placement,
    QueueingStrategy,
    QueueState,
    Unchargeable,
    charge_group,
)
from admission.core.quota.fairshare import dominant_share


def run_cycle(cycle: CycleInput) -> CycleResult:
    allocator = Allocator(cycle.snapshot, cycle.gates)
    steps = StepTimer(cycle.timer)
    usage = allocator.usage.copy()
    for allocation in cycle.promised:
        usage.add(allocation, cycle.gates)
    lines = lines_of(cycle, cycle.parking.lines if cycle.parking is not None else None)
    nodes = promised_pods(lines.holding, cycle.snapshot.node_fit.usage)
    inventory = charging_inventory(cycle.snapshot, cycle.gates)
    state = cycle.state
    decisions: list[GroupDecision] = []
    for line in lines.lines.values():
        decisions.extend(line.behind)
    queues = _QueueChecks(cycle)
    context = context_of(cycle)
    passed, gangs, ready, early = _prechecked(lines.head, cycle, queues, context)
    decisions.extend(early)
    # Late members of admitted groups go first: their group already runs.
    extended_any = False
    for group in lines.holding:
        late = late_members(group)  # only an admitted or running group has any
        if not late:
            continue
        grown = extend(group, late, state, allocator, usage, nodes, inventory, cycle)
        decisions.append(grown)
        if isinstance(grown, Extend):
            extended_any = True
            state = state.recharge(group.key, grown.charge)
            for allocation in grown.placement.allocations.values():
                usage.add(allocation, cycle.gates)
            nodes = with_pods(nodes, [p for p in late if p.key not in grown.joined], grown.placement.nodes)
    blocked: dict[str, str] = {}
    misses: dict[str, int] = {}  # per LocalQueue: groups evaluated and not admitted
    # What did not fit where, shared by the groups of this cycle while no admission changes the usage.
    unfit = _Unfit()
    idle = KnownUnfit()  # the same on the empty cluster, for every group of the cycle (`never_fits`)
    shapes = Shapes()  # what the gangs of one shape are charged (`never.Shapes`)
    extended = extended_claims_of(cycle.snapshot.claims)
    parking = None
    parked: dict[str, ParkedWait] = {}
    if cycle.parking is not None:
        parking = advance(cycle.parking, cycle, lines.pending.keys())
        last = cycle.parking.lines
        # Parked groups are pending groups of the last cycle: while those are the same, none is gone.
        parked = dict(parking.parked) if last is not None and last.pending is lines.pending else \
            {k: p for k, p in parking.parked.items() if k in lines.pending}
    plain = plain_units(cycle) if parking is not None else frozenset()
    sources = (cycle.snapshot.claims, cycle.snapshot.templates)
    kept_behind = cycle.parking.behind if cycle.parking is not None else {}
    behind: dict[str, Wait] = {}
    admitted: dict[str, Iterable[AllocationResult]] = {}
    strict: dict[str, bool] = {}  # by ClusterQueue (`_strict`)
    was_parked = parking.parked if parking is not None else {}
    evaluated = reused_count = woken = 0
    for group, cluster_queue in _ordered(ready, cycle):
        if cluster_queue in blocked:
            decisions.append(Wait(group.key, WaitReason.BLOCKED, f"ClusterQueue {cluster_queue} is StrictFIFO "
                                  f"and group {blocked[cluster_queue]} ahead of it does not fit yet",
                                  cluster_queue))
            continue
        local_key = group.local_key
        local = cycle.local_queues[local_key]
        if misses.get(local_key, 0) >= cycle.queue_misses:
            wait = _behind(group, local, kept_behind, queues)
            behind[group.key] = wait
            decisions.append(wait)
            continue
        def objects(group: GroupView = group) -> tuple[object, ...]:
            return own_objects(_gang(group, gangs).pods, cycle.snapshot.claims, cycle.snapshot.templates)
        reused = still_parked(parking, group, local, sources, objects) if parking is not None else None
        decision: Admit | Wait
        if reused is not None:
            decision = reused
            reused_count += 1
        else:
            evaluated += 1
            woken += group.key in was_parked
            decision = _decide(group, _gang(group, gangs), local, allocator, usage, nodes, inventory, state, cycle,
                               steps, unfit.at(usage, nodes), extended, idle, shapes)
            if parking is not None:
                _park(parked, parking, group, local, (sources, objects()), decision, state, plain)
        decisions.append(decision)
        if isinstance(decision, Admit):
            admitted[group.key] = decision.placement.allocations.values()
            state = state.admit(group.key, cluster_queue, decision.charge, local_key)
            for allocation in decision.placement.allocations.values():
                usage.add(allocation, cycle.gates)
            nodes = with_pods(nodes, _gang(group, gangs).pods, decision.placement.nodes)
            unfit.admitted(allocator, usage, decision.placement.nodes.values())
        else:
            misses[local_key] = misses.get(local_key, 0) + 1
            if decision.reason is not WaitReason.NEVER_FITS and _strict(cluster_queue, state, strict):
                blocked[cluster_queue] = group.key  # a group that never fits would block its queue for good
    after = None
    if parking is not None:
        after = after_cycle(parking, cycle, parked, state, admitted, extended_any)
        after = replace(after, behind=behind, lines=lines, prechecked=Prechecked(context, passed))
    stats = CycleStats(evaluated, reused_count, woken, len(parked))
    return CycleResult(tuple(decisions), state, usage, steps.totals(), parking=after, stats=stats)


def _strict(cluster_queue: str, state: QueueState, known: dict[str, bool]) -> bool:
    """Whether the ClusterQueue is StrictFIFO (`known`: the answers so far; specs do not change within a cycle)."""
    fifo = known.get(cluster_queue)
    if fifo is None:
        fifo = known[cluster_queue] = state.queue(cluster_queue).strategy is QueueingStrategy.STRICT_FIFO
    return fifo


def _gang(group: GroupView, gangs: dict[str, Gang]) -> Gang:
    """The group's gang, made once per cycle, and only for a group that needs it."""
    gang = gangs.get(group.key)
    if gang is None:
        gang = gangs[group.key] = gang_of(group)
    return gang


def _prechecked(head: Sequence[GroupView], cycle: CycleInput, queues: _QueueChecks, context: tuple[object, ...]
                ) -> tuple[dict[str, GroupView], dict[str, Gang], list[GroupView], list[Wait]]:
    """The checks before ordering on each group of the LocalQueues' heads, skipped for a group that passed
    them in the last cycle in the same context (`prechecked`): the groups that passed, the gangs made, the
    groups ready to be ordered, and the Waits of the others."""
    kept = still_passed(cycle.parking.prechecked, context) if cycle.parking is not None else {}
    passed: dict[str, GroupView] = {}
    gangs: dict[str, Gang] = {}
    ready: list[GroupView] = []
    early: list[Wait] = []
    for group in head:
        if kept.get(group.key) is group:
            passed[group.key] = group
            ready.append(group)
            continue
        gang = gangs[group.key] = gang_of(group)
        wait = _precheck(group, gang, cycle, queues)
        if wait is not None:
            early.append(wait)
            continue
        ready.append(group)
        if may_keep(group, gang):
            passed[group.key] = group
    return passed, gangs, ready, early


def _behind(group: GroupView, local: LocalQueue, kept: Mapping[str, Wait], queues: _QueueChecks) -> Wait:
    """The `BehindInQueue` Wait of a group of the head past the misses: the last cycle's where it says the same."""
    message = queues.behind_message(local.key)
    wait = kept.get(group.key)
    if wait is None or wait.message != message or wait.cluster_queue != local.cluster_queue:
        wait = Wait(group.key, WaitReason.BEHIND, message, local.cluster_queue)
    return wait


def _park(parked: dict[str, ParkedWait], parking: Parking, group: GroupView, local: LocalQueue,
          looked_up: tuple[tuple[object, object], tuple[object, ...]], decision: Admit | Wait, state: QueueState,
          plain: frozenset[str]) -> None:
    """Park the group after its evaluation, or forget its parking when it may not stay parked. `looked_up`:
    the snapshot's claims and templates, and the group's own objects in them."""
    sources, objects = looked_up
    record = (parked_wait(parking, group, local, sources, objects, decision, state, plain)
              if isinstance(decision, Wait) else None)
    if record is None:
        parked.pop(group.key, None)
    else:
        parked[group.key] = record


class _Unfit:
    """What placing found for one state of the device and node usage (`KnownUnfit`)."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.version = -1
        self.nodes: NodeUsage | None = None
        self.known = KnownUnfit()
        # Carried over an admission, which only adds to the device and node usage: the nodes full before,
        # and the (shape, node) pairs that did not fit (more in use fits no more).
        self.full: frozenset[str] | None = None
        self.carried: KnownUnfit | None = None

    def at(self, usage: Usage, nodes: NodeUsage) -> KnownUnfit:
        if usage is not self.usage or usage.version != self.version or nodes is not self.nodes:
            full, self.full = self.full, None
            carried, self.carried = self.carried, None
            self.usage, self.version, self.nodes = usage, usage.version, nodes
            self.known = KnownUnfit(full=full) if carried is None else carried.after_admission(full)
        return self.known

    def admitted(self, allocator: Allocator, usage: Usage, placed: Iterable[str]) -> None:
        """An admission added to `usage` on the `placed` nodes only: the nodes full before stay full, and
        of the placed ones those now full join them; what did not fit still does not."""
        if usage is not self.usage:
            return
        self.carried = self.known
        before = self.known.full
        if before is not None:
            self.full = before | allocator.full_nodes(usage, set(placed) - before)


def _above_cap(group: GroupView, local: LocalQueue, queue: ClusterQueue) -> Wait | None:
    """A group whose priority is above the cap of its LocalQueue or ClusterQueue waits, naming the cap."""
    for kind, name, cap in (("LocalQueue", local.key, local.max_priority),
                            ("ClusterQueue", queue.name, queue.max_priority)):
        if cap is not None and group.priority > cap:
            return Wait(group.key, WaitReason.PRIORITY_CAP, f"priority {group.priority} (the highest of its "
                        f"pods' PriorityClasses) is above the spec.maxPriority {cap} of {kind} {name}; give its "
                        f"pods a PriorityClass of at most {cap}, or use another queue", queue.name)
    return None


# ----- before ordering ------------------------------------------------------------------------------
class _QueueChecks:
    """What the checks before ordering find of each LocalQueue, worked out once per cycle (they read nothing of
    the group but its LocalQueue, and name the group only in the Wait they give): whether the queue is usable
    (`_unusable_queue`) and whether its ClusterQueue serves the namespace (`_unserved`)."""

    def __init__(self, cycle: CycleInput) -> None:
        self._cycle = cycle
        self._usable: dict[str, bool] = {}
        self._served: dict[str, bool] = {}
        self._messages: dict[str, str] = {}

    def usable(self, group: GroupView, local: LocalQueue) -> bool:
        ok = self._usable.get(local.key)
        if ok is None:
            ok = self._usable[local.key] = _unusable_queue(group, local, self._cycle) is None
        return ok

    def served(self, group: GroupView, local: LocalQueue, queue: ClusterQueue) -> bool:
        ok = self._served.get(local.key)
        if ok is None:
            ok = self._served[local.key] = _unserved(group, local, queue, self._cycle) is None
        return ok

    def behind_message(self, local_queue: str) -> str:
        message = self._messages.get(local_queue)
        if message is None:
            message = self._messages[local_queue] = behind_message(local_queue, self._cycle)
        return message


def _precheck(group: GroupView, gang: Gang, cycle: CycleInput, queues: _QueueChecks) -> Wait | None:
    if group.unsealed:
        return Wait(group.key, WaitReason.UNSEALED, f"{group.unreadable}; the group is not considered and its "
                    "pods stay gated until then")
    if group.unreadable:
        return Wait(group.key, WaitReason.UNREADABLE, f"{group.unreadable}; whether the group is admitted "
                    "cannot be told, so it is not considered until its PodGroup is fixed")
    if group.problem:
        return Wait(group.key, WaitReason.INVALID, group.problem)
    local = cycle.local_queues.get(group.local_key)
    if local is None or not queues.usable(group, local):
        return _unusable_queue(group, local, cycle)
    queue = cycle.state.queues[local.cluster_queue]
    above = _above_cap(group, local, queue)
    if above is not None:
        return above
    if not queues.served(group, local, queue):
        return _unserved(group, local, queue, cycle)
    retry = in_backoff(group, cycle.now) if cycle.now is not None else None
    if retry is not None:
        return Wait(group.key, WaitReason.BACKOFF, f"evicted {group.pod_group.evictions if group.pod_group else 0} "
                    f"time(s) for not being bound in time; admitted again after {format_time(retry)}",
                    local.cluster_queue)
    unsupported = (_unsupported_constraint(gang.pods)
                   or _claim_shared_in_native_gang(group, cycle.snapshot.claims, cycle.gates.minor)
                   or unplannable(group, cycle.gates))
    if unsupported:
        return Wait(group.key, WaitReason.UNSUPPORTED, unsupported, local.cluster_queue)
    level = topology_level(group, local.cluster_queue, cycle)
    if isinstance(level, Wait):
        return level
    return _incomplete(group, gang, local.cluster_queue)


def _unserved(group: GroupView, local: LocalQueue, queue: ClusterQueue, cycle: CycleInput) -> Wait | None:
    """The ClusterQueue serves no namespace, or not the group's."""
    if queue.namespace_selector is None:
        return Wait(group.key, WaitReason.NO_QUEUE, f"ClusterQueue {local.cluster_queue} has no "
                    f"spec.namespaceSelector, so it serves no namespace (LocalQueue {group.namespace}/{group.queue} "
                    "points to it); its administrator sets namespaceSelector to a selector matching the namespace, "
                    "or {} for every namespace", local.cluster_queue)
    labels = None if cycle.namespace_labels is None else cycle.namespace_labels.get(group.namespace, {})
    if labels is not None and not queue.serves(labels):
        return Wait(group.key, WaitReason.NO_QUEUE, f"namespace {group.namespace} is not selected by the "
                    f"namespaceSelector of ClusterQueue {local.cluster_queue}", local.cluster_queue)
    return None


def _incomplete(group: GroupView, gang: Gang, queue: str) -> Wait | None:
    """Fewer members than the minimum: existing ones, plus the declared ones not created yet."""
    if len(gang.pods) >= group.min_member:
        return None
    if gang.slots:
        return Wait(group.key, WaitReason.INCOMPLETE, f"its declared shape has {len(gang.slots)} members "
                    f"({len(group.pods)} exist), fewer than its minimum {group.min_member}; waiting for more "
                    "members, or lower the PodGroup's spec.minMember", queue)
    return Wait(group.key, WaitReason.INCOMPLETE, f"{len(group.pods)} of {group.min_member} members exist; "
                "waiting for the rest", queue)


def _unusable_queue(group: GroupView, local: LocalQueue | None, cycle: CycleInput) -> Wait | None:
    """The group's LocalQueue, ClusterQueue or a unit its queue quotes is missing or invalid, or the queue's
    usage is unknown. Each bad object stops only the groups that need it, with its reason."""
    if local is None:
        name = f"{group.namespace}/{group.queue}"
        broken = cycle.invalid.get(ObjectRef("LocalQueue", group.namespace, group.queue))
        if broken:
            return Wait(group.key, WaitReason.QUEUE_INVALID, f"LocalQueue {name} is invalid: {broken}")
        return Wait(group.key, WaitReason.NO_QUEUE, f"LocalQueue {name} does not exist")
    queue = local.cluster_queue
    if queue not in cycle.state.queues:
        broken = cycle.invalid.get(ObjectRef("ClusterQueue", "", queue))
        points = f"LocalQueue {local.key} points to ClusterQueue {queue}"
        if broken:
            return Wait(group.key, WaitReason.QUEUE_INVALID, f"{points}, which is invalid: {broken}", queue)
        return Wait(group.key, WaitReason.NO_QUEUE, f"{points}, which does not exist", queue)
    return _unusable_units(group, queue, cycle)


def _unusable_units(group: GroupView, queue: str, cycle: CycleInput) -> Wait | None:
    # Charges already recorded in a unit that is missing or invalid stay in the queue's usage; nothing new
    # is admitted while a quoted unit cannot be computed.
    quoted = [q.unit for q in cycle.state.queues[queue].quotas]
    invalid = [why for unit in quoted if (why := cycle.invalid.get(ObjectRef("QuotaUnit", "", unit)))]
    if invalid:
        return Wait(group.key, WaitReason.UNIT_INVALID, f"ClusterQueue {queue} quotes an invalid unit: "
                    f"{'; '.join(invalid)}; fix the QuotaUnit or remove it from the queue's spec.quotas", queue)
    known_units = {unit.name for unit in cycle.units}
    missing = sorted(unit for unit in quoted if unit not in known_units)
    if missing:
        return Wait(group.key, WaitReason.NO_UNIT, f"ClusterQueue {queue} quotes QuotaUnit {', '.join(missing)}, "
                    "which does not exist (deleted?); restore it or remove it from the queue's spec.quotas", queue)
    unknown = cycle.state.usage_unknown(queue)
    if unknown:
        return Wait(group.key, WaitReason.USAGE_UNKNOWN, f"ClusterQueue {queue} admits nothing new while its "
                    f"usage is unknown: {unknown}", queue)
    return None


EVERY_NAMESPACE = LabelSelector()


def _unsupported_constraint(pods: Sequence[Pod]) -> str:
    """A required pod affinity term with a namespaceSelector selects by namespaces' labels, which the node
    fit does not read; draq cannot promise the scheduler binds the whole group, and does not admit it."""
    for pod in pods:
        for at, term in enumerate(pod.affinity_terms):
            if term.namespace_selector is not None and term.namespace_selector != EVERY_NAMESPACE:
                return (f"pod {pod.key} has a required pod affinity term (spec.affinity.podAffinity."
                        f"requiredDuringSchedulingIgnoredDuringExecution[{at}]) with a namespaceSelector, which "
                        "draq does not evaluate: it cannot promise that the scheduler places every member of the "
                        "group at once. List the namespaces in `namespaces` instead, or use the preferred form")
    return ""


def _claim_shared_in_native_gang(group: GroupView, claims: Mapping[str, ResourceClaim], minor: int) -> str:
    """Members of one native gang that share a ResourceClaim not allocated yet. kube-scheduler 1.35 (a
    v1alpha1 Workload) allocates the claim for the first member, which then waits at the gang's Permit
    step, and refuses the others while the claim "is in the process of being allocated": the gang never
    binds. 1.36 (a v1alpha2 PodGroup) gives the other members the pending allocation but does not keep them
    to the nodes its devices are reachable from: they may be bound where the claim cannot be used. 1.37
    does both right, so from 1.37 such a gang is planned like any group sharing a claim."""
    users: dict[tuple[str, str], list[str]] = {}
    for pod in group.pods:
        gang = pod.workload or (pod.scheduling_group if minor < 37 else "")
        for entry in pod.resource_claims if gang else ():
            if entry.resource_claim_name is not None:
                users.setdefault((gang, entry.resource_claim_name), []).append(pod.name)
    for (gang, name), pods in sorted(users.items()):
        claim = claims.get(f"{group.namespace}/{name}")
        if len(pods) > 1 and (claim is None or claim.allocation is None):
            why = ("does not allocate a claim shared inside a gang, so the gang would never bind" if minor < 36
                   else "gives the claim's pending allocation to the other members without keeping them to its "
                   "devices' nodes, so members may be bound where the claim cannot be used (fixed in 1.37)")
            return (f"pods {', '.join(sorted(pods))} share ResourceClaim {group.namespace}/{name} and are members "
                    f"of the native gang {gang}: kube-scheduler 1.{minor} {why}. Allocate the claim "
                    "first (e.g. for a pod outside the gang), use a template per pod, or leave these pods out of "
                    "native gangs")
    return ""


def _ordered(groups: Sequence[GroupView], cycle: CycleInput) -> list[tuple[GroupView, str]]:
    """Priority first; within a priority, ClusterQueues take turns, each in creation order; in each turn
    the queue with the lowest weighted dominant share of its cohort (at the start of the cycle) goes first."""
    queues: dict[str, list[GroupView]] = {}
    for group in sorted(groups, key=_order):
        queues.setdefault(cycle.local_queues[group.local_key].cluster_queue, []).append(group)
    shares = {name: dominant_share(cycle.state, name) for name in queues}
    rank = {share: at for at, share in enumerate(sorted(set(shares.values())))}  # compared as small ints
    # Each ClusterQueue's turn key; only the queue that took its turn changes its key, so a heap finds the
    # lowest as a scan of every queue would.
    turns = [(-members[0].priority, 0, rank[shares[name]], members[0].created, name)
             for name, members in queues.items()]
    heapify(turns)
    taken = dict.fromkeys(queues, 0)
    order: list[tuple[GroupView, str]] = []
    while turns:
        _, served, share, _, name = heappop(turns)
        members, at = queues[name], taken[name]
        order.append((members[at], name))
        taken[name] = at = at + 1
        if at < len(members):
            heappush(turns, (-members[at].priority, served + 1, share, members[at].created, name))
    return order


_order = attrgetter("order")


# ----- one group ------------------------------------------------------------------------------------
def _decide(group: GroupView, gang: Gang, local: LocalQueue, allocator: Allocator, usage: Usage,
            nodes: NodeUsage, inventory: Inventory, state: QueueState, cycle: CycleInput, steps: StepTimer,
            known: KnownUnfit | None = None,
            extended: Mapping[tuple[str, str], ResourceClaim] | None = None,
            idle: KnownUnfit | None = None, shapes: Shapes | None = None) -> Admit | Wait:
    snapshot = cycle.snapshot
    try:
        members = members_for(gang.pods, snapshot.claims, snapshot.templates)
    except DraqError as err:  # a claim or a template a member names does not exist
        return Wait(group.key, WaitReason.MISSING, f"{err}: create it, or correct the reference (the group waits "
                    "until then)", local.cluster_queue)
    decision = _try(group, gang, members, local, allocator, usage, nodes, inventory, state, cycle, steps, known,
                    extended, shapes)
    if isinstance(decision, Wait) and decision.reason in ROOM_REASONS:
        never = never_fits(group.key, gang, local.cluster_queue, allocator, inventory, cycle, idle, shapes, members)
        if never is not None:
            return never
    return decision


def _try(group: GroupView, gang: Gang, members: Sequence[GangMember], local: LocalQueue, allocator: Allocator,
         usage: Usage, nodes: NodeUsage, inventory: Inventory, state: QueueState, cycle: CycleInput,
         steps: StepTimer, known: KnownUnfit | None,
         extended: Mapping[tuple[str, str], ResourceClaim] | None, shapes: Shapes | None = None) -> Admit | Wait:
    queue = local.cluster_queue
    snapshot = cycle.snapshot
    objects = GroupObjects(gang.pods, snapshot.claims, snapshot.templates, extended)
    level = topology_level(group, queue, cycle)  # a Wait was answered before ordering
    with steps.step(ALLOCATOR):
        if isinstance(level, TopologyLevel):
            domained = place_by_topology(group, level, allocator, members, usage, nodes, known)
            if domained.never:
                return never_in_topology(group, queue, domained)
            placed = domained.placement
        else:
            placed = place_gang(allocator, members, usage=usage, nodes=nodes, known=known)
    if placed.error:
        # The scheduler would not schedule a member anywhere (a missing DeviceClass, a CEL error):
        # that is the reason to give, whatever the quota says.
        return _unplaced(group, placed, queue)
    if not placed.feasible:
        with steps.step(CHARGING):
            worst = _worst_charge(group.key, gang, members, objects, allocator, inventory, cycle, shapes)
        if worst is None:
            return _unplaced(group, placed, queue)
        fits = state.fits(queue, worst)
        if not fits.ok:
            return Wait(group.key, WaitReason.QUOTA, _quota_message(fits.reason, worst), queue)
        return _unplaced(group, placed, queue)
    placement = Placement(dict(placed.placements), dict(placed.allocations))
    try:
        with steps.step(CHARGING):
            charged = charge_group(objects, cycle.units, inventory, cycle.matches, placement)
    except Unchargeable as err:
        return Wait(group.key, WaitReason.UNCHARGEABLE, str(err), queue)
    fits = state.fits(queue, charged.total)
    if not fits.ok:
        return Wait(group.key, WaitReason.QUOTA, _quota_message(fits.reason, charged.total), queue)
    return Admit(group.key, queue, local.key, charged.total, fits.borrowed,
                 shaped_plan(gang.pods, gang.slots, placed.placements, placed.allocations), placement,
                 tuple(f"{line.source}: {line.amounts.describe()}" for line in charged.lines if line.amounts))


def _worst_charge(group: str, gang: Gang, members: Sequence[GangMember], objects: GroupObjects, allocator: Allocator,
                  inventory: Inventory, cycle: CycleInput, shapes: Shapes | None) -> Amounts | None:
    """What a gang that was not placed is charged (the worst case over the devices it could get), or None when it
    cannot be charged; worked out once per shape and cycle (`never.Shapes`), unless a member has a claim the
    scheduler made for its extended resources (looked up by the pod's name)."""
    made = objects.extended
    key = shapes.key(group, allocator, members, gang.pods) if shapes is not None and not (
        made and any((p.namespace, p.name) in made for p in gang.pods)) else None
    if shapes is not None and key is not None and key in shapes.worst:
        return shapes.worst[key]
    try:
        worst: Amounts | None = charge_group(objects, cycle.units, inventory, cycle.matches, None).total
    except Unchargeable:
        worst = None
    if shapes is not None and key is not None:
        shapes.worst[key] = worst
    return worst


def _quota_message(reason: str, total: Amounts) -> str:
    return f"{reason} (group needs {total.describe() if total else 'nothing'})"


def _unplaced(group: GroupView, placed: GangPlacement, queue: str) -> Wait:
    if placed.missing_class:
        return Wait(group.key, WaitReason.MISSING, f"{placed.reason}: create DeviceClass {placed.missing_class} "
                    "(kubectl get deviceclasses), or name an existing one in the claim", queue)
    reason = WaitReason.NODES if placed.unschedulable else WaitReason.DEVICES
    return Wait(group.key, reason, devices_message(placed), queue)


