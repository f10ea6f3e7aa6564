"""Declared shapes by kind: the members a top-level object's spec declares for one group, by role.

Each function reads one kind's spec (the field names of its real API) and returns the roles as
(name, pod template manifest, count). Missing or malformed fields count as the API's defaults, so a
shape is always defined; a role of count 0 is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

RoleSpec = tuple[str, Mapping[str, Any], int]
ShapeOf = Callable[[Mapping[str, Any]], tuple[RoleSpec, ...]]


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(obj.get("spec"))


def job_size(job_spec: Mapping[str, Any]) -> int:
    """A Job runs at most `parallelism` pods at once (default 1), never more than `completions`."""
    size = _count(job_spec.get("parallelism"), 1)
    completions = job_spec.get("completions")
    if isinstance(completions, int) and not isinstance(completions, bool) and completions > 0:
        size = min(size, completions)
    return size


def _roles(*roles: RoleSpec) -> tuple[RoleSpec, ...]:
    return tuple(role for role in roles if role[2] > 0)


def job_shape(job: Mapping[str, Any]) -> tuple[RoleSpec, ...]:
    """batch/v1 Job: `spec.parallelism` (capped by `completions`) pods of `spec.template`."""
    spec = _spec(job)
    return _roles(("job", _map(spec.get("template")), job_size(spec)))


def jobset_shape(jobset: Mapping[str, Any]) -> tuple[RoleSpec, ...]:
    """JobSet (jobset.x-k8s.io): per `spec.replicatedJobs[]`, `replicas` (default 1) Jobs, each of its
    template's parallelism."""
    roles = []
    for entry in _spec(jobset).get("replicatedJobs") or ():
        replicated = _map(entry)
        job_spec = _map(_map(replicated.get("template")).get("spec"))
        count = _count(replicated.get("replicas"), 1) * job_size(job_spec)
        roles.append((str(replicated.get("name") or "job"), _map(job_spec.get("template")), count))
    return _roles(*roles)


def leaderworkerset_shape(lws: Mapping[str, Any]) -> tuple[RoleSpec, ...]:
    """LeaderWorkerSet (leaderworkerset.x-k8s.io/v1), one replica group: a leader (`leaderTemplate`, else
    `workerTemplate`) and `size - 1` workers of `workerTemplate` (`size` defaults to 1)."""
    template = _map(_spec(lws).get("leaderWorkerTemplate"))
    workers = _map(template.get("workerTemplate"))
    leader = _map(template.get("leaderTemplate")) or workers
    size = max(_count(template.get("size"), 1), 1)
    return _roles(("leader", leader, 1), ("worker", workers, size - 1))


def _replica_specs(field: str) -> ShapeOf:
    def shape(job: Mapping[str, Any]) -> tuple[RoleSpec, ...]:
        specs = _map(_spec(job).get(field))
        return _roles(*((str(role), _map(_map(spec).get("template")), _count(_map(spec).get("replicas"), 1))
                        for role, spec in sorted(specs.items())))
    shape.__doc__ = f"kubeflow.org/v1: per role of `spec.{field}`, `replicas` (default 1) pods of its template."
    return shape


pytorchjob_shape = _replica_specs("pytorchReplicaSpecs")
mpijob_shape = _replica_specs("mpiReplicaSpecs")


def raycluster_shape(cluster: Mapping[str, Any]) -> tuple[RoleSpec, ...]:
    """RayCluster (ray.io/v1): the head (`headGroupSpec.template`) and, per `workerGroupSpecs[]`,
    `minReplicas` (default 0) x `numOfHosts` (default 1) pods of its template."""
    spec = _spec(cluster)
    roles = [("head", _map(_map(spec.get("headGroupSpec")).get("template")), 1)]
    for entry in spec.get("workerGroupSpecs") or ():
        group = _map(entry)
        count = _count(group.get("minReplicas"), 0) * max(_count(group.get("numOfHosts"), 1), 1)
        roles.append((str(group.get("groupName") or "worker"), _map(group.get("template")), count))
    return _roles(*roles)
