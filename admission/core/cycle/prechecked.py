"""Groups that passed the checks before ordering, kept from one cycle to the next.

The checks before a group is ordered (its queues, the namespace selector, priority caps, the units its queue
quotes, the members' constraints, its minimum) read the group and the cycle's configuration. A group that
passed them, the same object, passes again while that configuration is equal (`context_of`), so a cycle
checks only the groups that changed. Left out, and checked every cycle: a group that was evicted (its
backoff follows the clock), one that asks for a topology (its check reads the nodes' labels) and one with
a member in a native gang (its check reads the claims).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from admission.core.cycle.groups import GroupView
from admission.core.cycle.shape import Gang
from admission.core.cycle.types import CycleInput
from admission.core.quota import Phase


@dataclass(frozen=True, slots=True)
class Prechecked:
    context: tuple[object, ...] = ()  # `context_of` the cycle that checked them
    passed: Mapping[str, GroupView] = field(default_factory=dict)  # by key


def context_of(cycle: CycleInput) -> tuple[object, ...]:
    """What the checks before ordering read besides the group."""
    return (cycle.local_queues, cycle.state.queues, cycle.state.unknown, cycle.invalid, cycle.units,
            cycle.namespace_labels, cycle.gates)


def still_passed(kept: Prechecked | None, context: tuple[object, ...]) -> Mapping[str, GroupView]:
    """The groups that passed in the last cycle, when its context is this one's; otherwise none."""
    if kept is None or len(kept.context) != len(context):
        return {}
    if all(a is b or a == b for a, b in zip(kept.context, context, strict=True)):
        return kept.passed
    return {}


def may_keep(group: GroupView, gang: Gang) -> bool:
    """Whether the group's passing depends on nothing but the group and `context_of`."""
    if group.topology is not None:
        return False
    if group.pod_group is not None and group.pod_group.phase is Phase.EVICTED:
        return False
    return not any(p.workload or p.scheduling_group for p in gang.pods)
