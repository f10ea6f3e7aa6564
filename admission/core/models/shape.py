"""A workload's declared shape: the members its owner's spec says it will have, before they all exist.

A JobSet declares its replicated Jobs' pod templates times their parallelism, a LeaderWorkerSet group a
leader and `size - 1` workers, a RayCluster a head and its worker groups' `minReplicas`. The admission cycle
can reserve room for the members of a declared shape that do not exist yet; they join the plan when the
controller creates them.
"""

from __future__ import annotations

from dataclasses import dataclass

from admission.core.models.meta import ObjectRef
from admission.core.models.pod import Pod


@dataclass(frozen=True, slots=True)
class Role:
    """One kind of member a workload declares: a pod template (as a Pod with an empty name) and how many."""

    name: str  # e.g. a JobSet's replicatedJob name, "leader", "worker", "head"
    template: Pod
    count: int


@dataclass(frozen=True, slots=True)
class DeclaredShape:
    """The members the top-level object `owner` declares for one group, by role."""

    owner: ObjectRef
    roles: tuple[Role, ...]

    @property
    def total(self) -> int:
        return sum(role.count for role in self.roles)
