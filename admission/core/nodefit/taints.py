"""TaintToleration and NodeUnschedulable, as the scheduler filters nodes.

A node's NoSchedule and NoExecute taints must each be tolerated by one of the pod's tolerations;
PreferNoSchedule only lowers a node's score and is ignored. A node marked `spec.unschedulable`
takes only pods that tolerate `node.kubernetes.io/unschedulable:NoSchedule`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from admission.core.models import Taint, Toleration
from admission.core.models.taint import NO_EXECUTE, NO_SCHEDULE

FILTERED_EFFECTS = frozenset({NO_SCHEDULE, NO_EXECUTE})
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)


def tolerated(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def untolerated_taint(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule or NoExecute taint no toleration matches, or None."""
    for taint in taints:
        if taint.effect in FILTERED_EFFECTS and not tolerated(taint, tolerations):
            return taint
    return None


def tolerates_unschedulable(tolerations: Iterable[Toleration]) -> bool:
    return tolerated(UNSCHEDULABLE_TAINT, tolerations)
