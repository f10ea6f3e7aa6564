"""The groups of one reading, kept from the last: a group whose inputs are the objects it was built from last
time keeps its view, so thousands of groups that nothing changed for cost a few dictionary lookups each."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from admission.core.cycle import GroupView, collect_groups
from admission.core.labels import GROUP_LABEL, QUEUE_LABEL
from admission.core.models import Pod
from admission.core.quota import PodGroup

_Inputs = tuple[tuple[Pod, ...], PodGroup | None, str, str, bool, PodGroup | None]
"""A group's members, PodGroup, creation time, why its PodGroup does not parse, whether its record is
untraceable, and the record last sealed for it: all that `collect_groups` reads of one group."""


class GroupMemo:
    """`collect_groups`, group by group, reusing the views whose inputs are the same objects as before."""

    def __init__(self) -> None:
        self._views: dict[str, tuple[_Inputs, GroupView]] = {}

    def collect(self, pods: Iterable[Pod], pod_groups: Iterable[PodGroup], created: Mapping[str, str],
                unreadable: Mapping[str, str], unsealed: Mapping[str, PodGroup | None]) -> tuple[GroupView, ...]:
        """What `collect_groups(pods, pod_groups, created, unreadable, unsealed)` returns."""
        members: dict[str, list[Pod]] = {}
        for pod in pods:
            labels = pod.labels
            if QUEUE_LABEL in labels and GROUP_LABEL in labels:
                members.setdefault(f"{pod.namespace}/{labels[GROUP_LABEL]}", []).append(pod)
        objects = {g.key: g for g in pod_groups}
        kept: dict[str, tuple[_Inputs, GroupView]] = {}
        views = []
        for key in sorted(members.keys() | objects.keys()):
            inputs: _Inputs = (tuple(members.get(key, ())), objects.get(key), created.get(key, ""),
                               unreadable.get(key, ""), key in unsealed, unsealed.get(key))
            known = self._views.get(key)
            view = known[1] if known is not None and _same(known[0], inputs) else _one(key, inputs)
            kept[key] = (inputs, view)
            views.append(view)
        self._views = kept  # groups that are gone are forgotten
        return tuple(views)


def _same(before: _Inputs, now: _Inputs) -> bool:
    pods, pod_group, created, broken, untraceable, sealed = before
    if pod_group is not now[1] or created != now[2] or broken != now[3] or untraceable != now[4] \
            or sealed is not now[5] or len(pods) != len(now[0]):
        return False
    return all(a is b for a, b in zip(pods, now[0], strict=True))


def _one(key: str, inputs: _Inputs) -> GroupView:
    pods, pod_group, created, broken, untraceable, sealed = inputs
    (view,) = collect_groups(pods, () if pod_group is None else (pod_group,), {key: created} if created else {},
                             {key: broken} if broken else {}, {key: sealed} if untraceable else {})
    return view
