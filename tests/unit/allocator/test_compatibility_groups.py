"""Compatibility groups (DRADeviceCompatibilityGroups, 1.37): the state of one counter set as devices join it."""

from __future__ import annotations

from admission.core.allocator.compatibility import groups_add, groups_admit


def test_a_counter_set_without_devices_admits_any() -> None:
    assert groups_admit(None, ()) and groups_admit(None, ("g1",))


def test_devices_without_groups_go_only_with_each_other() -> None:
    state = groups_add(None, ())
    assert groups_admit(state, ())
    assert not groups_admit(state, ("g1",))
    assert not groups_admit(groups_add(None, ("g1",)), ())


def test_each_device_narrows_the_common_groups() -> None:
    state = groups_add(groups_add(None, ("g1", "g2", "g3")), ("g2", "g3", "g4"))
    assert state.groups == frozenset({"g2", "g3"})
    assert groups_admit(state, ("g3",)) and not groups_admit(state, ("g1", "g4"))


def test_allocated_devices_with_no_common_group_admit_nothing() -> None:
    state = groups_add(groups_add(None, ("g1",)), ("g2",))  # allocated in the cluster, never checked
    assert not groups_admit(state, ("g1",)) and not groups_admit(state, ())
