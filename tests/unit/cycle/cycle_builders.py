"""Builders for admission-cycle tests: GPU nodes, gated group members, queues, and a cycle runner."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from admission.core.allocator import Snapshot
from admission.core.cycle import CycleInput, CycleResult, GroupView, collect_groups, rebuild_state, run_cycle
from admission.core.features import gates_for
from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.models import AllocationResult, Pod, parse_objects
from admission.core.quantity import parse_quantity
from admission.core.quota import (
    ClusterQueue,
    CompiledUnit,
    DraCel,
    LocalQueue,
    PodGroup,
    QueueingStrategy,
    UnitQuota,
    compile_unit,
    device_selected,
    parse_pod_group,
    parse_quota_unit,
)

NS = "team"
GATES = gates_for("1.34")


def gpu_node(name: str, gpus: int = 4, model: str = "H100") -> list[dict[str, Any]]:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}
    devices = [{"name": f"gpu-{i}", "attributes": {"model": {"string": model}},
                "capacity": {"memory": {"value": "80Gi"}}} for i in range(gpus)]
    rs = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-gpus"},
          "spec": {"driver": "gpu.example.com", "nodeName": name,
                   "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}
    return [node, rs]


GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
             "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}


def gpu_template(name: str, count: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": count}}]}}}}


def gpu_claim(name: str, count: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu",
                                                                           "count": count}}]}}}


def member(name: str, group: str, *, queue: str = "lq", group_min: int | str = 1, template: str | None = None,
           claim: str | None = None, created: str = "2026-01-01T00:00:00Z", gated: bool = True,
           node: str = "", phase: str = "Pending") -> dict[str, Any]:
    entries = []
    if template:
        entries.append({"name": "gpu", "resourceClaimTemplateName": template})
    if claim:
        entries.append({"name": "shared", "resourceClaimName": claim})
    spec: dict[str, Any] = {"containers": [{"name": "main"}], "resourceClaims": entries}
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    if node:
        spec["nodeName"] = node
    labels = {QUEUE_LABEL: queue, GROUP_LABEL: group, GROUP_MIN_LABEL: str(group_min)}
    return {"apiVersion": "v1", "kind": "Pod", "status": {"phase": phase},
            "metadata": {"name": name, "namespace": NS, "labels": labels, "creationTimestamp": created},
            "spec": spec}


def gang(group: str, size: int, gpus_each: int, **options: Any) -> list[dict[str, Any]]:
    """`size` gated pods of one group, each with its own claim of `gpus_each` GPUs from a template."""
    template = f"{group}-gpus"
    return [gpu_template(template, gpus_each)] + [
        member(f"{group}-{i}", group, group_min=size, template=template, **options) for i in range(size)]


def pod_group(name: str, min_member: int, *, queue: str = "lq", priority: int = 0,
              status: dict[str, Any] | None = None) -> PodGroup:
    manifest = {"apiVersion": "draq.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"minMember": min_member, "queue": queue, "priority": priority}, "status": status or {}}
    return parse_pod_group(manifest)


def cluster_queue(name: str, gpus: int | str, strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO,
                  cohort: str | None = None, borrowing: int | None = None) -> ClusterQueue:
    limit = None if borrowing is None else parse_quantity(borrowing)
    return ClusterQueue(name, (UnitQuota("gpus", parse_quantity(gpus), limit),), cohort, strategy=strategy)


def gpu_units() -> tuple[CompiledUnit, ...]:
    unit = {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": "gpus"},
            "spec": {"devices": {"deviceClassNames": ["gpu"]}}}
    return (compile_unit(parse_quota_unit(unit), DraCel()),)


def cycle(objects: Sequence[dict[str, Any]], queues: Iterable[ClusterQueue],
          local_queues: Iterable[LocalQueue] = (LocalQueue(NS, "lq", "main"),),
          pod_groups: Iterable[PodGroup] = (), promised: tuple[AllocationResult, ...] = ()) -> CycleResult:
    return run_cycle(cycle_input(objects, queues, local_queues, pod_groups, promised))


def cycle_input(objects: Sequence[dict[str, Any]], queues: Iterable[ClusterQueue],
                local_queues: Iterable[LocalQueue] = (LocalQueue(NS, "lq", "main"),),
                pod_groups: Iterable[PodGroup] = (), promised: tuple[AllocationResult, ...] = ()) -> CycleInput:
    models = parse_objects([GPU_CLASS, *objects])
    snapshot = Snapshot.from_models(models)
    groups = groups_of(objects, pod_groups)
    return CycleInput(snapshot, GATES, groups, {q.key: q for q in local_queues}, gpu_units(),
                      rebuild_state(queues, groups), device_selected, promised)


def groups_of(objects: Sequence[dict[str, Any]], pod_groups: Iterable[PodGroup] = ()) -> tuple[GroupView, ...]:
    pods = [m for m in parse_objects(objects) if isinstance(m, Pod)]
    return collect_groups(pods, pod_groups)
