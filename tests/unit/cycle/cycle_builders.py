"""Admission-cycle helpers on top of tests.support.builders: GPU nodes, gated group members, queues, a cycle runner.

Everything lives in namespace NS, in LocalQueue `lq` of ClusterQueue `main`, and is counted in QuotaUnit `gpus`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from admission.core.allocator import Snapshot
from admission.core.cycle import CycleInput, CycleResult, GroupView, collect_groups, rebuild_state, run_cycle
from admission.core.features import gates_for
from admission.core.models import AllocationResult, Pod
from admission.core.quota import (
    ClusterQueue,
    CompiledUnit,
    DraCel,
    LocalQueue,
    PodGroup,
    QueueingStrategy,
    compile_unit,
    device_selected,
)
from tests.support.builders import (
    CREATED,
    HOSTNAME_LABEL,
    Manifest,
    claim,
    cluster_queue,
    device_class,
    exactly,
    gpu,
    local_queue,
    model,
    models,
    node,
    pod,
    pod_group,
    quota,
    quota_unit,
    resource_slice,
    template,
)

NS = "team"
GATES = gates_for("1.34")
GPU_CLASS = device_class("gpu")
LOCAL_QUEUES: tuple[LocalQueue, ...] = tuple(models(local_queue("lq", "main", NS)))


def gpu_node(name: str, gpus: int = 4, model: str = "H100") -> list[Manifest]:
    """A node and its slice of `gpus` GPUs (80Gi each)."""
    return [node(name, {HOSTNAME_LABEL: name}),
            resource_slice(name, *(gpu(f"gpu-{i}", model) for i in range(gpus)), name=f"{name}-gpus")]


def gpu_template(name: str, count: int) -> Manifest:
    return template(name, exactly("gpus", count=count), namespace=NS)


def gpu_claim(name: str, count: int) -> Manifest:
    return claim(name, exactly("gpus", count=count), namespace=NS)


def member(name: str, group: str, *, queue: str = "lq", group_min: int | str = 1, template: str | None = None,
           claim: str | None = None, created: str = CREATED, gated: bool = True,
           node: str = "", phase: str = "Pending", priority: int | None = None) -> Manifest:
    """A pod of `group`: its claim entry `gpu` from `template`, entry `shared` naming `claim`; `priority` is
    its spec.priority (from its PriorityClass)."""
    return pod(name, NS, queue=queue, group=group, group_min=group_min, gated=gated,
               templates={"gpu": template} if template else None, claims={"shared": claim} if claim else None,
               node=node, phase=phase, created=created, priority=priority)


def gang(group: str, size: int, gpus_each: int, **options: Any) -> list[Manifest]:
    """`size` gated pods of one group, each with its own claim of `gpus_each` GPUs from a template."""
    name = f"{group}-gpus"
    return [gpu_template(name, gpus_each)] + [
        member(f"{group}-{i}", group, group_min=size, template=name, **options) for i in range(size)]


def group_record(name: str, min_member: int, *, queue: str = "lq", priority: int | None = None,
          status: dict[str, Any] | None = None) -> PodGroup:
    """The PodGroup model of `name`."""
    return model(pod_group(name, min_member, queue, namespace=NS, priority=priority, status=status or {}))


def gpu_queue(name: str, gpus: int | str, strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO,
              cohort: str | None = None) -> ClusterQueue:
    """The ClusterQueue model of `name` with a nominal quota of `gpus` in unit `gpus`."""
    return model(cluster_queue(name, quota("gpus", gpus), cohort=cohort, strategy=strategy))


def gpu_units() -> tuple[CompiledUnit, ...]:
    return (compile_unit(model(quota_unit("gpus", devices={"deviceClassNames": ["gpu"]})), DraCel()),)


def cycle(objects: Sequence[Manifest], queues: Iterable[ClusterQueue],
          local_queues: Iterable[LocalQueue] = LOCAL_QUEUES,
          pod_groups: Iterable[PodGroup] = (), promised: tuple[AllocationResult, ...] = ()) -> CycleResult:
    return run_cycle(cycle_input(objects, queues, local_queues, pod_groups, promised))


def room_cycle(objects: Sequence[Manifest], queues: Iterable[ClusterQueue],
               local_queues: Iterable[LocalQueue] = LOCAL_QUEUES) -> CycleResult:
    """A cycle that does not judge groups against the empty cluster (as capacity planning runs it): what a
    group lacks now, for a group that no node could ever hold as well."""
    return run_cycle(dataclasses.replace(cycle_input(objects, queues, local_queues), never_on_cluster=False))


def cycle_input(objects: Sequence[Manifest], queues: Iterable[ClusterQueue],
                local_queues: Iterable[LocalQueue] = LOCAL_QUEUES,
                pod_groups: Iterable[PodGroup] = (), promised: tuple[AllocationResult, ...] = ()) -> CycleInput:
    snapshot = Snapshot.from_models(models(GPU_CLASS, *objects))
    groups = groups_of(objects, pod_groups)
    return CycleInput(snapshot, GATES, groups, {q.key: q for q in local_queues}, gpu_units(),
                      rebuild_state(queues, groups), device_selected, promised)


def groups_of(objects: Sequence[Manifest], pod_groups: Iterable[PodGroup] = ()) -> tuple[GroupView, ...]:
    pods = [m for m in models(*objects) if isinstance(m, Pod)]
    return collect_groups(pods, pod_groups)
