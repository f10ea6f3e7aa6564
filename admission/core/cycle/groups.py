"""Pod groups as the admission cycle sees them: managed pods grouped by label, with their PodGroup.

A managed pod carries `draq.io/queue` and `draq.io/pod-group` (the webhook sets both). Pods with the
same group label in one namespace form a group; its PodGroup object, when one exists, supplies the
minimum and the recorded admission. Without one the minimum is the pods' `draq.io/group-min` label (1
when absent). The priority is the members' (`group_priority`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL, label_value
from admission.core.models import DeclaredShape, ObjectRef, Pod, TopologyRequest, annotated_request
from admission.core.quota import Phase, PodGroup
from admission.core.workloads import BY_KIND, Membership, declared_shape

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class GroupView:
    """One gang: its pods (gated or not), its PodGroup if one exists, and what the cycle needs to order it."""

    namespace: str
    name: str
    queue: str  # LocalQueue name in `namespace`
    min_member: int
    priority: int
    created: str  # RFC 3339; earlier is served first within a queue and priority
    pods: tuple[Pod, ...]
    pod_group: PodGroup | None = None
    problem: str = ""  # a label a user must fix before the group can be considered
    unreadable: str = ""  # why its PodGroup, which exists, does not parse (its record is unknown)
    unsealed: bool = False  # `unreadable` because draq cannot trace its record to its own writes
    # The record draq last sealed for an `unsealed` group, when this process saw it: the usage counts it.
    last_sealed: PodGroup | None = None
    declared: DeclaredShape | None = None  # the members its owner's spec declares, when draq knows the owner
    # The topology level its members must or should share (`docs/topology.md`); None: anywhere.
    topology: TopologyRequest | None = None
    # `namespace/name`, computed once: every cycle looks groups up by key many times.
    key: str = field(init=False, repr=False, compare=False)
    # `holds_quota` and `pending`, computed once from the fields above (a view never changes): each cycle, and
    # each pass of the loop, asks them of every group, thousands of which may wait.
    holds_quota: bool = field(init=False, repr=False, compare=False)
    pending: bool = field(init=False, repr=False, compare=False)
    # Its place among waiting groups: priority first, then creation, then key (`queue_order`).
    order: tuple[int, str, str] = field(init=False, repr=False, compare=False)
    local_key: str = field(init=False, repr=False, compare=False)  # its LocalQueue's `namespace/name`

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")
        object.__setattr__(self, "local_key", f"{self.namespace}/{self.queue}")
        object.__setattr__(self, "holds_quota", self.pod_group is not None and self.pod_group.holds_quota)
        object.__setattr__(self, "pending", self._pending())
        object.__setattr__(self, "order", (-self.priority, self.created, self.key))

    @property
    def ref(self) -> ObjectRef:
        """Its PodGroup's identity (the object may not exist yet)."""
        return ObjectRef("PodGroup", self.namespace, self.name)

    @property
    def gated(self) -> tuple[Pod, ...]:
        return tuple(p for p in self.pods if GATE in p.scheduling_gates)

    @property
    def counted_record(self) -> PodGroup | None:
        """The record the queue usage counts: its PodGroup's, or for a record draq cannot trace the one it
        last sealed (never a forged lower charge or a forged Finished)."""
        return self.pod_group if self.pod_group is not None else self.last_sealed

    def _pending(self) -> bool:
        """Waiting for admission: not admitted, and has gated members; or, with a declared shape, has no
        members yet and has not finished (it can be admitted before they exist)."""
        if self.holds_quota:
            return False
        finished = self.pod_group is not None and self.pod_group.phase is Phase.FINISHED
        return any(GATE in p.scheduling_gates for p in self.pods) or (
            self.declared is not None and not self.pods and not finished)


def is_managed(pod: Pod) -> bool:
    return QUEUE_LABEL in pod.labels and GROUP_LABEL in pod.labels


def collect_groups(pods: Iterable[Pod], pod_groups: Iterable[PodGroup],
                   created: Mapping[str, str] | None = None,
                   unreadable: Mapping[str, str] | None = None,
                   unsealed: Mapping[str, PodGroup | None] | None = None) -> tuple[GroupView, ...]:
    """Every group with at least one managed pod or a PodGroup object, sorted by key.

    `created` maps PodGroup keys to their creationTimestamp (FIFO order); without it, the earliest
    member's creation time is used. `unreadable` maps the keys of PodGroups that exist but do not parse
    to why: their groups are kept out of admission (their record, maybe an admission, is unknown).
    `unsealed` maps the keys of those among them whose record draq cannot trace to its own writes to the
    record draq last sealed for them (None when not known).
    """
    by_key: dict[str, list[Pod]] = {}
    for pod in pods:
        if is_managed(pod):
            by_key.setdefault(f"{pod.namespace}/{pod.labels[GROUP_LABEL]}", []).append(pod)
    objects = {g.key: g for g in pod_groups}
    groups = []
    for key in sorted(set(by_key) | set(objects)):
        members = tuple(sorted(by_key.get(key, ()), key=lambda p: p.name))
        view = _view(key, members, objects.get(key), (created or {}).get(key, ""))
        broken = (unreadable or {}).get(key, "")
        if broken and unsealed is not None and key in unsealed:
            view = replace(view, unsealed=True, last_sealed=unsealed[key])
        groups.append(replace(view, unreadable=broken) if broken else view)
    return tuple(groups)


def _view(key: str, pods: tuple[Pod, ...], pod_group: PodGroup | None, created: str) -> GroupView:
    namespace, name = key.split("/", 1)
    earliest = min((p.meta.creation_timestamp for p in pods if p.meta.creation_timestamp), default="")
    topology, topology_problem = _topology_request(pods, pod_group)
    if pod_group is not None:
        return GroupView(namespace, name, pod_group.queue, pod_group.min_member, group_priority(pods, pod_group),
                         created or earliest, pods, pod_group,
                         _queue_mismatch(pods, pod_group.queue) or topology_problem, topology=topology)
    queues = sorted({p.labels[QUEUE_LABEL] for p in pods})
    minimum, problem = _label_minimum(pods)
    if len(queues) > 1:
        problem = f"members name different queues ({', '.join(queues)}) in label {QUEUE_LABEL}"
    return GroupView(namespace, name, queues[0], minimum, group_priority(pods, None), earliest, pods, None,
                     problem or topology_problem, topology=topology)


def _topology_request(pods: tuple[Pod, ...], pod_group: PodGroup | None) -> tuple[TopologyRequest | None, str]:
    """The group's topology request: its PodGroup's spec.topology, else its members' annotations (those
    that carry one must agree); and a problem with the annotations, or ""."""
    if pod_group is not None and pod_group.topology is not None:
        return pod_group.topology, ""
    found: dict[TopologyRequest, str] = {}
    for pod in pods:
        request = annotated_request(pod.annotations)
        if isinstance(request, str):
            return None, f"pod {pod.key}: {request}"
        if request is not None:
            found.setdefault(request, pod.key)
    if len(found) > 1:
        asked = ", ".join(f"{key} asks {request.describe()}" for request, key in sorted(found.items(), key=str))
        return None, f"members ask different topology levels ({asked}); give every member the same annotation"
    return next(iter(found), None), ""


def group_priority(pods: tuple[Pod, ...], pod_group: PodGroup | None) -> int:
    """The highest spec.priority among the members (the API server sets it from their PriorityClass, whose
    use a ResourceQuota scope can limit per namespace; 0 without members); a PodGroup's spec.priority may
    lower it, never raise it (whoever may write the PodGroup could otherwise choose any priority)."""
    highest = max((p.priority for p in pods), default=0)
    if pod_group is None or pod_group.priority is None:
        return highest
    return min(pod_group.priority, highest)


def _label_minimum(pods: tuple[Pod, ...]) -> tuple[int, str]:
    values = sorted({p.labels.get(GROUP_MIN_LABEL, "1") for p in pods})
    numbers = []
    for value in values:
        if not value.isdigit() or int(value) < 1:
            pod = next(p for p in pods if p.labels.get(GROUP_MIN_LABEL, "1") == value)
            return 1, f"pod {pod.key}, label {GROUP_MIN_LABEL}: {value!r} is not a group size (a whole number >= 1)"
        numbers.append(int(value))
    if len(numbers) > 1:
        return max(numbers), f"members disagree on label {GROUP_MIN_LABEL} ({', '.join(values)})"
    return numbers[0], ""


def _queue_mismatch(pods: tuple[Pod, ...], queue: str) -> str:
    other = next((p for p in pods if p.labels[QUEUE_LABEL] != queue), None)
    if other is None:
        return ""
    return (f"pod {other.key}, label {QUEUE_LABEL}: names queue {other.labels[QUEUE_LABEL]!r} but its "
            f"PodGroup uses {queue!r}")


def with_owners(group: GroupView, members: Mapping[str, Membership]) -> GroupView:
    """The group as its members' owner chains (`members`, by pod name) make it: its declared shape, and its
    minimum from that shape; or a problem that keeps it waiting (an owner that
    cannot be read, two objects claiming the group, a label that contradicts the chain, a minimum above
    the declared shape). A group that holds quota keeps its minimum and is given no problem: nothing it
    was admitted or charged for changes under it; it is only given its declared shape, whose role templates
    its late members are matched against for the slots its plan keeps open."""
    if group.problem or not members:
        return group
    problem = _chain_problem(group, members)
    gangs = [m for m in members.values() if m.gang]
    if group.holds_quota:
        declared = declared_shape(gangs[0]) if gangs and not problem else None
        return group if declared is None else replace(group, declared=declared)
    if problem:
        return replace(group, problem=problem)
    declared = declared_shape(gangs[0]) if gangs else None
    if declared is None:
        return group
    if group.pod_group is None and group.min_member > declared.total:
        return replace(group, problem=(
            f"label {GROUP_MIN_LABEL}: {group.min_member} is above the {declared.total} members {declared.owner} "
            f"declares; lower it, or raise the owner's size"), declared=declared)
    # The owner's spec is the group's size: a PodGroup draq made from the pods' labels may hold an older one.
    return replace(group, declared=declared, min_member=declared.total)


def _chain_problem(group: GroupView, members: Mapping[str, Membership]) -> str:
    for name, member in sorted(members.items()):
        if member.missing is not None:
            return unreadable_owner(member.missing, f"pod {group.namespace}/{name}")
        if member.problem:
            return f"pod {group.namespace}/{name}: {member.problem}"
    tops = sorted({str(m.top) for m in members.values() if m.gang})
    if len(tops) > 1:
        return (f"{' and '.join(tops)} both claim group {group.name!r} (label {GROUP_LABEL}): rename one of them, "
                f"or label one's pod template with another group")
    for name, member in sorted(members.items()):
        if member.gang and label_value(member.group) != group.name:
            return (f"pod {group.namespace}/{name}, label {GROUP_LABEL}: {group.name!r} contradicts its owner chain, "
                    f"which makes it a member of group {label_value(member.group)!r} ({member.top}); remove the "
                    f"label from the pod template")
    return ""


def unreadable_owner(ref: ObjectRef, reader: str) -> str:
    """Why a group waits for an owner draq cannot read: the object, and the right it needs."""
    kind = BY_KIND.get(ref.kind)
    right = f"{kind.plural}.{kind.api_group}" if kind is not None and kind.api_group else (
        kind.plural if kind is not None else ref.kind)
    return (f"{reader} is owned by {ref}, which draq cannot read: it was deleted, or draq lacks get/list/watch "
            f"on {right} (enable its integration in the chart's integrations.frameworks)")
