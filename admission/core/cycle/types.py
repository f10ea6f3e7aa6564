"""The admission cycle's types: its input, each group's decision, preemptions, and the cycle's result.

Every module of the cycle and its callers (the operator, the simulator, views, bench) use these; none of
them holds logic beyond reading its own fields.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from admission.core.allocator import Snapshot, Usage
from admission.core.cycle.groups import GroupView
from admission.core.features import FeatureGates
from admission.core.models import AllocationResult, ObjectRef, Topology
from admission.core.quota import (
    NONE,
    Amounts,
    CompiledUnit,
    LocalQueue,
    Placement,
    Plan,
    QueueState,
    SelectionFilter,
)

if TYPE_CHECKING:
    from admission.core.cycle.parking import Parking

DEFAULT_QUEUE_BUDGET = 64
DEFAULT_QUEUE_MISSES = 8


class WaitReason(StrEnum):
    """Why a group stays pending; also the PodGroup condition's reason."""

    INCOMPLETE = "Incomplete"
    INVALID = "GroupInvalid"  # its members disagree about the group (labels); was InvalidGroup before 0.2
    NO_QUEUE = "QueueMissing"
    QUOTA = "QuotaExceeded"
    DEVICES = "DevicesUnavailable"
    NODES = "NodesUnavailable"  # a pod passes the scheduler's node filters (resources, taints, affinity) nowhere
    UNSUPPORTED = "UnsupportedConstraint"  # pod affinity by namespaceSelector; a claim shared in a native gang
    UNCHARGEABLE = "Unchargeable"
    BLOCKED = "BlockedByStrictFIFO"
    NO_UNIT = "QuotaUnitMissing"
    BACKOFF = "EvictedBackoff"
    QUEUE_INVALID = "QueueInvalid"  # its LocalQueue or ClusterQueue does not parse
    UNIT_INVALID = "QuotaUnitInvalid"  # its queue quotes a unit that does not compile or fails on a device
    USAGE_UNKNOWN = "UsageUnknown"  # a record of its queue (or cohort) that may hold quota does not parse
    UNREADABLE = "PodGroupUnreadable"  # its own PodGroup does not parse: whether it is admitted is unknown
    # its members (or declared shape) fit neither the empty cluster nor its ClusterQueue's limits: waiting cannot help
    NEVER_FITS = "NeverAdmissible"  # also: it asks a topology level its queue lacks, or no domain can hold it
    BEHIND = "BehindInQueue"  # its LocalQueue's head took this cycle's evaluations (CycleInput.queue_budget)
    PRIORITY_CAP = "PriorityAboveCap"  # its priority is above its LocalQueue's or ClusterQueue's maxPriority
    UNSEALED = "RecordNotSealed"  # its PodGroup's record was not written by draq (its seal does not verify)
    MISSING = "ObjectMissing"  # a ResourceClaim, ResourceClaimTemplate or DeviceClass its members name does not exist


@dataclass(frozen=True, slots=True)
class Admit:
    group: str
    cluster_queue: str
    local_queue: str
    charge: Amounts
    borrowed: Amounts
    plan: Plan  # what the PodGroup's status records
    placement: Placement  # the allocator's answer: pod key -> node, allocator claim key -> devices
    charge_lines: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Wait:
    group: str
    reason: WaitReason
    message: str
    cluster_queue: str = ""


@dataclass(frozen=True, slots=True)
class Extend:
    """Late members admitted into their group: the record's new charge and plan, and where they go."""

    group: str
    cluster_queue: str
    charge: Amounts  # the group's whole charge, late members included
    added: Amounts
    plan: Plan  # the recorded plan with the late members added
    placement: Placement  # the late members' nodes, and the devices of those placed afresh
    # Keys of the late members that took a reserved slot: their node room and devices were held (and
    # charged) since admission, so they add nothing to the cycle's usage.
    joined: tuple[str, ...] = ()
    # (member, slot) pairs: members that match no role of the declared shape stand for these open slots,
    # which are given up (their devices and node room released, `freed` taken off the charge); the
    # members are placed as themselves from the next cycle on.
    given_up: tuple[tuple[str, str], ...] = ()
    freed: Amounts = NONE


@dataclass(frozen=True, slots=True)
class LateWait:
    group: str
    message: str


GroupDecision = Admit | Wait | Extend | LateWait


@dataclass(frozen=True, slots=True)
class Preempt:
    """Evict `victims` (group keys) so that `group` can be admitted, to `nodes`."""

    group: str
    cluster_queue: str
    priority: int
    victims: tuple[str, ...]
    nodes: tuple[str, ...]

    @property
    def message(self) -> str:
        return (f"preempted by group {self.group} (ClusterQueue {self.cluster_queue}, priority {self.priority}), "
                f"which needs its place on {', '.join(self.nodes) or 'the cluster'}; requeued")


@dataclass(frozen=True, slots=True)
class Preemptions:
    preempts: tuple[Preempt, ...] = ()
    waits: Mapping[str, Wait] = field(default_factory=dict)  # the preemptors' Wait, saying what happens
    placed_tries: int = 0


@dataclass(frozen=True, slots=True)
class CycleInput:
    snapshot: Snapshot
    gates: FeatureGates
    groups: tuple[GroupView, ...]  # pending groups only are considered; others are ignored
    local_queues: Mapping[str, LocalQueue]  # by `namespace/name`
    units: tuple[CompiledUnit, ...]
    state: QueueState
    matches: SelectionFilter
    promised: tuple[AllocationResult, ...] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None  # None: do not check selectors
    now: dt.datetime | None = None  # None: evicted groups are not held back by their backoff
    timer: Callable[[], float] | None = None  # the shell's monotonic clock: CycleResult.step_seconds
    # Objects that do not parse or cannot be used: why. QuotaUnits named here are not in `units`; the groups
    # that need one of them wait with its reason.
    invalid: Mapping[ObjectRef, str] = field(default_factory=dict)
    # Per LocalQueue and cycle: the most pending groups considered (its head, in its order), and how many of
    # them may be evaluated without being admitted before the rest of the queue waits. The others wait
    # unevaluated, so one tenant's thousands of never-fitting groups cost each cycle a few evaluations.
    queue_budget: int = DEFAULT_QUEUE_BUDGET
    queue_misses: int = DEFAULT_QUEUE_MISSES
    topologies: Mapping[str, Topology] = field(default_factory=dict)  # by name; those that parse
    # The groups parked by the last cycle and the counters (`cycle.parking`); None: every group is evaluated.
    parking: Parking | None = None
    # Whether a group that fits no empty cluster waits `NeverAdmissible` (off: as DevicesUnavailable or
    # NodesUnavailable, for capacity planning, where the cluster is what changes)
    never_on_cluster: bool = True


@dataclass(frozen=True, slots=True)
class CycleStats:
    """How a cycle treated the groups it reached in their turn (late members and `BehindInQueue` aside)."""

    evaluated: int = 0  # placed and charged
    parked: int = 0  # given their parked Wait again, not evaluated
    # Of the evaluated, those parked by the last cycle: woken by a change (or the safety period). Each group
    # is reached at most once per cycle, so `woken` never exceeds the number parked before the cycle.
    woken: int = 0
    parked_after: int = 0  # the groups the next cycle starts with parked


@dataclass(frozen=True, slots=True)
class CycleResult:
    decisions: tuple[GroupDecision, ...]
    state: QueueState  # accounting after this cycle's admissions
    usage: Usage = field(repr=False, default_factory=Usage)
    step_seconds: Mapping[str, float] = field(default_factory=dict)  # allocator, charging (with a timer)
    # Whom to evict for the groups that wait (`decide`); their Waits in `decisions` say so already.
    preemptions: Preemptions = field(default_factory=Preemptions)
    parking: Parking | None = None  # what the next cycle's input takes (with `CycleInput.parking`)
    stats: CycleStats = field(default_factory=CycleStats)

    @property
    def admitted(self) -> tuple[Admit, ...]:
        return tuple(d for d in self.decisions if isinstance(d, Admit))

    @property
    def waiting(self) -> tuple[Wait, ...]:
        return tuple(d for d in self.decisions if isinstance(d, Wait))

    def decision(self, group: str) -> GroupDecision | None:
        return next((d for d in self.decisions if d.group == group), None)
