"""The groups of one reading, kept from the last: only the groups whose inputs are other objects than last time
are built again, so thousands of groups that nothing changed for cost a set operation each, not a view."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from typing import TypeVar

from admission.core.cycle import GroupView, collect_groups
from admission.core.labels import GROUP_LABEL, QUEUE_LABEL
from admission.core.models import Pod
from admission.core.quota import PodGroup

V = TypeVar("V")


class GroupMemo:
    """`collect_groups`, group by group, building again only the views whose inputs changed.

    A group's inputs: its members, its PodGroup, its creation time, why its PodGroup does not parse, whether
    its record is untraceable and the record last sealed for it. Members and PodGroups are told apart by
    identity (the reader keeps every object it did not see change), the rest by value."""

    def __init__(self) -> None:
        self._pods: dict[int, tuple[Pod, str]] = {}  # id -> the managed pod (kept alive: ids stay unique), group
        self._pod_groups: dict[int, PodGroup] = {}
        self._by_pod_key: dict[str, Pod] = {}  # the managed pods by their own key
        self._collected = False
        self._members: dict[str, dict[int, Pod]] = {}
        self._objects: dict[str, PodGroup] = {}
        self._created: Mapping[str, str] = {}
        self._unreadable: Mapping[str, str] = {}
        self._unsealed: Mapping[str, PodGroup | None] = {}
        self._views: dict[str, GroupView] = {}
        self._order: list[str] = []  # the keys of `_views`, sorted
        self._sorted: tuple[GroupView, ...] = ()

    def collect(self, pods: Iterable[Pod], pod_groups: Iterable[PodGroup], created: Mapping[str, str],
                unreadable: Mapping[str, str], unsealed: Mapping[str, PodGroup | None],
                changed_pods: tuple[Mapping[str, Pod], Iterable[str]] | None = None,
                changed_pod_groups: tuple[Mapping[str, PodGroup], Iterable[str]] | None = None
                ) -> tuple[GroupView, ...]:
        """What `collect_groups(pods, pod_groups, created, unreadable, unsealed)` returns. `changed_pods`: every
        pod by key and the keys changed since the last call, when known; then `pods` is not read (and those
        pods are taken from the mapping: the managed ones are those with both of draq's labels).
        `changed_pod_groups`: the same for the PodGroups (then `pod_groups` is not read)."""
        if changed_pods is not None and self._collected:
            dirty = self._pods_changed(*changed_pods)
        else:
            dirty = self._members_changed(pods if changed_pods is None else changed_pods[0].values())
        if changed_pod_groups is not None and self._collected:
            dirty |= self._pod_groups_changed_at(*changed_pod_groups)
        else:
            dirty |= self._pod_groups_changed(pod_groups if changed_pod_groups is None
                                              else changed_pod_groups[0].values())
        self._collected = True
        dirty |= _changed(self._created, created) | _changed(self._unreadable, unreadable)
        dirty |= _changed(self._unsealed, unsealed, by_identity=True)
        self._created, self._unreadable, self._unsealed = created, unreadable, unsealed
        if not dirty:
            return self._sorted
        for key in dirty:
            members, pod_group = self._members.get(key), self._objects.get(key)
            if not members and pod_group is None:
                if self._views.pop(key, None) is not None:
                    del self._order[bisect_left(self._order, key)]
                continue
            if key not in self._views:
                insort(self._order, key)
            self._views[key] = _one(key, tuple(members.values()) if members else (), pod_group,
                                    created.get(key, ""), unreadable.get(key, ""), unsealed)
        views = self._views
        self._sorted = tuple(views[key] for key in self._order)
        return self._sorted

    def _members_changed(self, pods: Iterable[Pod]) -> set[str]:
        """Take this reading's managed pods; the keys of the groups that gained or lost one."""
        now: dict[int, Pod] = {id(p): p for p in pods if _managed(p)}
        before = self._pods
        dirty = {self._leave(gone) for gone in before.keys() - now.keys()}
        dirty.update(self._join(now[new]) for new in now.keys() - before.keys())
        return dirty

    def _pods_changed(self, by_key: Mapping[str, Pod], changed: Iterable[str]) -> set[str]:
        """The same from the pods whose keys changed alone."""
        dirty: set[str] = set()
        for pod_key in changed:
            old = self._by_pod_key.get(pod_key)
            new = by_key.get(pod_key)
            if new is not None and not _managed(new):
                new = None
            if old is not None and old is not new:
                dirty.add(self._leave(id(old)))
            if new is not None and old is not new:
                dirty.add(self._join(new))
        return dirty

    def _leave(self, gone: int) -> str:
        """A managed pod that left (or was replaced by another object): its group's key."""
        pod, key = self._pods.pop(gone)
        if self._by_pod_key.get(pod.key) is pod:
            del self._by_pod_key[pod.key]
        members = self._members[key]
        del members[gone]
        if not members:
            del self._members[key]
        return key

    def _join(self, pod: Pod) -> str:
        key = f"{pod.namespace}/{pod.labels[GROUP_LABEL]}"
        self._pods[id(pod)] = (pod, key)
        self._by_pod_key[pod.key] = pod
        self._members.setdefault(key, {})[id(pod)] = pod
        return key

    def _pod_groups_changed(self, pod_groups: Iterable[PodGroup]) -> set[str]:
        now = {id(g): g for g in pod_groups}
        before = self._pod_groups
        dirty: set[str] = set()
        for gone in before.keys() - now.keys():
            key = before.pop(gone).key
            dirty.add(key)
            self._objects.pop(key, None)
        for new in now.keys() - before.keys():
            group = before[new] = now[new]
            dirty.add(group.key)
            self._objects[group.key] = group
        return dirty

    def _pod_groups_changed_at(self, by_key: Mapping[str, PodGroup], changed: Iterable[str]) -> set[str]:
        """The same from the PodGroups whose keys changed alone."""
        dirty: set[str] = set()
        for key in changed:
            old, new = self._objects.get(key), by_key.get(key)
            if old is new:
                continue
            if old is not None:
                del self._pod_groups[id(old)]
                del self._objects[key]
            if new is not None:
                self._pod_groups[id(new)] = new
                self._objects[key] = new
            dirty.add(key)
        return dirty


def _managed(pod: Pod) -> bool:
    return QUEUE_LABEL in pod.labels and GROUP_LABEL in pod.labels


def _changed(before: Mapping[str, V], now: Mapping[str, V], by_identity: bool = False) -> set[str]:
    """The keys whose value differs between the two mappings (present in one only included)."""
    if before is now:
        return set()
    if not by_identity and before == now:
        return set()
    missing = object()
    keys = before.keys() | now.keys()
    if by_identity:
        return {k for k in keys if before.get(k, missing) is not now.get(k, missing)}
    return {k for k in keys if before.get(k, missing) != now.get(k, missing)}


def _one(key: str, pods: tuple[Pod, ...], pod_group: PodGroup | None, created: str, broken: str,
         unsealed: Mapping[str, PodGroup | None]) -> GroupView:
    (view,) = collect_groups(pods, () if pod_group is None else (pod_group,), {key: created} if created else {},
                             {key: broken} if broken else {}, {key: unsealed[key]} if key in unsealed else {})
    return view
