"""The one table of workload kinds draq knows: for each, its API, the integration that enables it, how its
pods are grouped, what it declares, and how it is evicted.

Adding a kind is one entry here (and its shape function in `shapes`, when it declares members).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from admission.core.workloads import shapes
from admission.core.workloads.shapes import ShapeOf


class Grouping(Enum):
    GANG = "gang"  # the object's pods (and its children's) are one group, named after the object
    PER_POD = "per-pod"  # each pod is its own group, unless the user labels it into one
    REPLICA_GROUP = "replica-group"  # one group per LeaderWorkerSet replica (leader and its workers)


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    kind: str
    api_version: str  # group/version, as in `apiVersion`
    plural: str
    framework: str  # the integration that enables it (chart value `integrations.frameworks`)
    grouping: Grouping
    suspend: tuple[str, ...] = ()  # the field path that suspends it; empty: no such field
    shape: ShapeOf | None = None  # the members it declares (per group); None: it declares none itself

    @property
    def api_group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def suspendable(self) -> bool:
        return bool(self.suspend)

    def suspend_patch(self, suspend: bool) -> dict[str, Any]:
        """The merge patch that sets its suspend field."""
        patch: dict[str, Any] = {self.suspend[-1]: suspend}
        for key in reversed(self.suspend[:-1]):
            patch = {key: patch}
        return patch

    def suspended(self, obj: Mapping[str, Any]) -> bool:
        value: Any = obj
        for key in self.suspend:
            value = value.get(key) if isinstance(value, Mapping) else None
        return value is True


JOB = "batch/job"
JOBSET = "jobset.x-k8s.io/jobset"
TRAINJOB = "trainer.kubeflow.org/trainjob"
LEADERWORKERSET = "leaderworkerset.x-k8s.io/leaderworkerset"
PYTORCHJOB = "kubeflow.org/pytorchjob"
MPIJOB = "kubeflow.org/mpijob"
RAYCLUSTER = "ray.io/raycluster"
RAYJOB = "ray.io/rayjob"
DEPLOYMENT = "deployment"
STATEFULSET = "statefulset"
WORKLOAD = "scheduling.k8s.io/workload"

FRAMEWORKS = (JOB, JOBSET, TRAINJOB, LEADERWORKERSET, PYTORCHJOB, MPIJOB, RAYCLUSTER, RAYJOB, DEPLOYMENT,
              STATEFULSET, WORKLOAD)
DEFAULT_FRAMEWORKS = (JOB, DEPLOYMENT, STATEFULSET)
"""On unless chosen otherwise: the kinds whose controllers every cluster runs."""

_SPEC_SUSPEND = ("spec", "suspend")
KINDS: tuple[WorkloadKind, ...] = (
    WorkloadKind("Job", "batch/v1", "jobs", JOB, Grouping.GANG, _SPEC_SUSPEND, shapes.job_shape),
    WorkloadKind("JobSet", "jobset.x-k8s.io/v1alpha2", "jobsets", JOBSET, Grouping.GANG, _SPEC_SUSPEND,
                 shapes.jobset_shape),
    WorkloadKind("TrainJob", "trainer.kubeflow.org/v1alpha1", "trainjobs", TRAINJOB, Grouping.GANG, _SPEC_SUSPEND),
    WorkloadKind("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", "leaderworkersets", LEADERWORKERSET,
                 Grouping.REPLICA_GROUP, (), shapes.leaderworkerset_shape),
    WorkloadKind("PyTorchJob", "kubeflow.org/v1", "pytorchjobs", PYTORCHJOB, Grouping.GANG,
                 ("spec", "runPolicy", "suspend"), shapes.pytorchjob_shape),
    WorkloadKind("MPIJob", "kubeflow.org/v1", "mpijobs", MPIJOB, Grouping.GANG, ("spec", "runPolicy", "suspend"),
                 shapes.mpijob_shape),
    WorkloadKind("RayCluster", "ray.io/v1", "rayclusters", RAYCLUSTER, Grouping.GANG, _SPEC_SUSPEND,
                 shapes.raycluster_shape),
    WorkloadKind("RayJob", "ray.io/v1", "rayjobs", RAYJOB, Grouping.GANG, _SPEC_SUSPEND),
    WorkloadKind("ReplicaSet", "apps/v1", "replicasets", DEPLOYMENT, Grouping.PER_POD),
    WorkloadKind("Deployment", "apps/v1", "deployments", DEPLOYMENT, Grouping.PER_POD),
    WorkloadKind("StatefulSet", "apps/v1", "statefulsets", STATEFULSET, Grouping.PER_POD),
    WorkloadKind("Workload", "scheduling.k8s.io/v1alpha1", "workloads", WORKLOAD, Grouping.GANG),
)
BY_KIND: Mapping[str, WorkloadKind] = {k.kind: k for k in KINDS}


REQUIRES: Mapping[str, tuple[str, ...]] = {JOBSET: (JOB,), TRAINJOB: (JOBSET, JOB), RAYJOB: (RAYCLUSTER,)}
"""Integrations whose owner chains pass through another's kinds (a JobSet's pods are owned by its Jobs)."""


def with_required(frameworks: Iterable[str]) -> tuple[str, ...]:
    """The chosen integrations and those they require, in the table's order; raises ValueError naming an
    unknown integration."""
    chosen = set(frameworks)
    unknown = sorted(chosen - set(FRAMEWORKS))
    if unknown:
        raise ValueError(f"integrations.frameworks: unknown integration(s) {', '.join(unknown)}; "
                         f"known: {', '.join(FRAMEWORKS)}")
    chosen |= {needed for name in list(chosen) for needed in REQUIRES.get(name, ())}
    return tuple(name for name in FRAMEWORKS if name in chosen)


def enabled_kinds(frameworks: Iterable[str]) -> tuple[WorkloadKind, ...]:
    """The kinds of the chosen integrations and of those they require."""
    chosen = set(with_required(frameworks))
    return tuple(k for k in KINDS if k.framework in chosen)
