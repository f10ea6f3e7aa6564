"""Each LocalQueue's pending groups, its head in its order and the Waits of the groups behind it, kept from one
cycle to the next so that a cycle touches only the LocalQueues whose groups changed.

A cycle considers at most `CycleInput.queue_budget` pending groups of a LocalQueue (its head, by priority,
creation and key); the others wait `BehindInQueue` unevaluated. Those Waits say the same from cycle to cycle
(no count in them), so a LocalQueue whose groups are the same objects as in the last cycle is given its head
and its Waits again, the same objects, without sorting or building anything. Groups are told apart by
identity: the operator hands the same view again for a group whose objects did not change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from admission.core.cycle.groups import GroupView
from admission.core.cycle.types import CycleInput, Wait, WaitReason


@dataclass(frozen=True, slots=True)
class Line:
    """One LocalQueue's pending groups (in the order the cycle's groups list them), its head and the Waits
    of the groups behind it, with what the Waits were made from."""

    members: tuple[GroupView, ...]
    head: tuple[GroupView, ...]
    behind: tuple[Wait, ...]
    made_from: tuple[int, int, str]  # budget, misses, ClusterQueue


@dataclass(frozen=True, slots=True)
class Lines:
    """The lines of one cycle's groups, by LocalQueue key in the order the groups first name them."""

    source: tuple[GroupView, ...] | None = None  # `CycleInput.groups` they were made from
    lines: Mapping[str, Line] = field(default_factory=dict)
    pending: Mapping[str, GroupView] = field(default_factory=dict)  # the groups in the lines, by key
    holding: tuple[GroupView, ...] = ()  # the groups that hold quota (admitted or running), in the cycle's order

    @property
    def head(self) -> list[GroupView]:
        return [g for line in self.lines.values() for g in line.head]



_order = attrgetter("order")


def lines_of(cycle: CycleInput, last: Lines | None) -> Lines:
    """The lines of `cycle`'s pending groups (those waiting for admission, and those whose record draq cannot
    trace), each made again only where its groups, the budget or its ClusterQueue changed since `last`."""
    kept = last.lines if last is not None else {}
    if last is not None and last.source is cycle.groups:
        lines = {key: _line(key, line.members, cycle, line) for key, line in kept.items()}
        return Lines(cycle.groups, lines, last.pending, last.holding)
    members: dict[str, list[GroupView]] = {}
    holding: list[GroupView] = []
    for group in cycle.groups:
        # A group whose record draq cannot trace is told so even when none of its members is gated.
        if group.pending or group.unsealed:
            members.setdefault(group.local_key, []).append(group)
        if group.holds_quota:
            holding.append(group)
    lines = {key: _line(key, groups, cycle, kept.get(key)) for key, groups in members.items()}
    pending = {g.key: g for groups in members.values() for g in groups}
    return Lines(cycle.groups, lines, pending, tuple(holding))


def _line(key: str, members: Sequence[GroupView], cycle: CycleInput, kept: Line | None) -> Line:
    local = cycle.local_queues.get(key)
    made_from = (cycle.queue_budget, cycle.queue_misses, local.cluster_queue if local is not None else "")
    if kept is not None and kept.made_from == made_from and _same(kept.members, members):
        return kept
    members = tuple(members)
    if len(members) <= cycle.queue_budget:
        return Line(members, members, (), made_from)
    ordered = sorted(members, key=_order)
    message = behind_message(key, cycle)
    behind = tuple(Wait(g.key, WaitReason.BEHIND, message, made_from[2]) for g in ordered[cycle.queue_budget:])
    return Line(members, tuple(ordered[:cycle.queue_budget]), behind, made_from)


def _same(before: Sequence[GroupView], now: Sequence[GroupView]) -> bool:
    return before is now or (len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True)))


def behind_message(local_queue: str, cycle: CycleInput) -> str:
    # No count that changes from cycle to cycle, so the group's status is written once.
    return (f"waits behind groups that come first in LocalQueue {local_queue}: each cycle considers at most "
            f"{cycle.queue_budget} pending groups of a LocalQueue and stops after {cycle.queue_misses} of them are "
            "not admitted; this group is considered once those ahead of it are admitted or leave")
