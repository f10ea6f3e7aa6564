"""A small cluster for gap tests: class `gpu`, node n1 with 4 GPUs (80Gi each, DRA only), a unit
`gpus` counting those devices and device-plugin `nvidia.com/gpu`, a unit `gpu-memory`, ClusterQueue
`cq` (8 gpus, 640Gi) with LocalQueue `lq` in namespace `team`. Tests add what they are about."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from admission.core.features import gates_for
from admission.core.gaps import Gap, GapKind, GapReport, find_gaps, read_objects
from tests.support.builders import (
    DRIVER,
    claim,
    cluster_queue,
    device_class,
    exactly,
    gpu,
    holding,
    local_queue,
    node,
    pod,
    pod_group,
    quota,
    quota_unit,
    resource_slice,
)

TEAM = "team"
GPUS = quota_unit("gpus", devices={"deviceClassNames": ["gpu"]}, extendedResources=[{"name": "nvidia.com/gpu"}])
MEMORY = quota_unit("gpu-memory", capacity={"deviceClassNames": ["gpu"], "name": "memory"})


def base(*, gpus_nominal: int = 8) -> list[dict[str, Any]]:
    return [device_class("gpu"), node("n1"), resource_slice("n1", *(gpu(f"gpu-{i}") for i in range(4))),
            GPUS, MEMORY, cluster_queue("cq", quota("gpus", gpus_nominal), quota("gpu-memory", "640Gi")),
            local_queue("lq", "cq", TEAM)]


def device(name: str, node_name: str = "n1") -> str:
    return f"{DRIVER}/{node_name}/{name}"


def running_pod(name: str, namespace: str = TEAM, *, claims: Mapping[str, str] | None = None,
                node_name: str = "n1", **fields: Any) -> dict[str, Any]:
    return pod(name, namespace, node=node_name, phase="Running", claims=claims, **fields)


def held_claim(name: str, devices: Sequence[str], namespace: str = TEAM, users: Sequence[str] = (),
               **fields: Any) -> dict[str, Any]:
    """A claim for len(devices) GPUs, allocated those devices, reserved for `users`."""
    return claim(name, exactly(count=len(devices)), namespace=namespace, allocation=holding(*devices),
                 reserved_for=users, **fields)


def admitted_group(name: str, charge: Mapping[str, str], members: Sequence[str], phase: str = "Running",
                   namespace: str = TEAM) -> dict[str, Any]:
    return pod_group(name, len(members), "lq", namespace=namespace, status={
        "phase": phase, "clusterQueue": "cq", "charge": [{"unit": u, "amount": a} for u, a in charge.items()],
        "plan": {"pods": [{"name": m, "node": "n1"} for m in members]}})


def report(*objects: dict[str, Any], version: str = "1.35", gates: Mapping[str, bool] | None = None) -> GapReport:
    return find_gaps(read_objects(list(objects), gates_for(version, dict(gates or {}))))


def gaps_of(result: GapReport, kind: GapKind) -> list[Gap]:
    return [g for g in result.gaps if g.kind is kind]


def sizes(result: GapReport, kind: GapKind) -> dict[str, Fraction]:
    """measure -> size of the gaps of one kind (one gap per measure expected)."""
    found = gaps_of(result, kind)
    assert len({g.measure for g in found}) == len(found), found
    return {g.measure: g.size for g in found}
