"""Compatibility groups (DRADeviceCompatibilityGroups, 1.37): devices that draw on one counter set may be
allocated together only while the groups they declare for it have one in common.

The state of a counter set is what its devices share so far: None before the first device; `all_empty`
while every device declared no group (then only devices without groups may join); else the groups common
to all of them (which may have become none at all, as devices allocated in the cluster were never checked).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupState:
    all_empty: bool
    groups: frozenset[str] = frozenset()


Groups = GroupState | None
# What a device changed: (pool, counter set), whether the search had a state for it, and that state.
GroupsUndo = list[tuple[tuple[str, str], bool, Groups]]
_ALL_EMPTY = GroupState(all_empty=True)


def groups_admit(state: Groups, groups: tuple[str, ...]) -> bool:
    """Whether a device declaring `groups` may join a counter set in `state`."""
    if state is None:
        return True
    if not groups:
        return state.all_empty
    return not state.all_empty and not state.groups.isdisjoint(groups)


def groups_add(state: Groups, groups: tuple[str, ...]) -> GroupState:
    """The state once a device declaring `groups` joined (admitted, or allocated in the cluster)."""
    if state is None:
        return GroupState(False, frozenset(groups)) if groups else _ALL_EMPTY
    if state.all_empty or not groups:
        return state
    return GroupState(False, state.groups.intersection(groups))
