"""Devices for metrics: what each node publishes, and who holds each allocated device.

`allocated_devices` maps every device in a claim's `status.allocation` to its node, its UUID (where
the driver publishes one, as NVIDIA's does), the claim, the pods the claim is reserved for, and the
queue those pods are charged to, so that per-device telemetry keyed by UUID (DCGM's) can be read per
queue.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from admission.core.allocator import Snapshot
from admission.core.cycle import GroupView
from admission.core.models import Device, ResourceClaim
from admission.core.quota import LocalQueue

UUID_ATTRIBUTES = ("uuid", "UUID")
"""Attribute names (in the driver's own domain) read as the device's UUID."""


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    node: str
    driver: str
    pool: str
    device: str
    uuid: str  # "" when the driver publishes none
    namespace: str
    claim: str
    pod: str  # "" when the claim is reserved for no pod (yet)
    cluster_queue: str  # "" for pods draq does not manage
    local_queue: str


@dataclass(frozen=True, slots=True)
class PodQueue:
    node: str
    cluster_queue: str
    local_queue: str


def published_devices(snapshot: Snapshot) -> Mapping[tuple[str, str], int]:
    """(node, driver) -> devices in the current generation of the pools' slices ("" for devices that
    are not local to one node)."""
    counts: Counter[tuple[str, str]] = Counter()
    for (driver, pool), slices in snapshot.inventory.slices_by_pool.items():
        generation = snapshot.inventory.current_generation((driver, pool))
        for item in slices:
            if item.pool_generation == generation:
                for device in item.devices:
                    counts[(device.node_name or item.node_name or "", driver)] += 1
    return dict(counts)


def pod_queues(groups: Iterable[GroupView], local_queues: Mapping[str, LocalQueue]) -> Mapping[str, PodQueue]:
    """`namespace/pod` -> its node and queues, for every member of a managed group."""
    found = {}
    for group in groups:
        local = local_queues.get(f"{group.namespace}/{group.queue}")
        cluster_queue = local.cluster_queue if local is not None else ""
        if group.pod_group is not None and group.pod_group.cluster_queue and group.holds_quota:
            cluster_queue = group.pod_group.cluster_queue
        for pod in group.pods:
            found[pod.key] = PodQueue(pod.node_name, cluster_queue, group.queue)
    return found


def allocated_devices(snapshot: Snapshot, pods: Mapping[str, PodQueue]) -> tuple[AllocatedDevice, ...]:
    """One row per allocated device and consuming pod (one with pod "" for a claim reserved for none)."""
    devices = _device_index(snapshot)
    rows = []
    for claim in sorted(snapshot.allocated_claims(), key=lambda c: c.key):
        consumers = _consumers(claim) or ("",)
        assert claim.allocation is not None
        for result in claim.allocation.results:
            device, node = devices.get((result.driver, result.pool, result.device), (None, ""))
            for pod in consumers:
                where = pods.get(f"{claim.namespace}/{pod}") if pod else None
                rows.append(AllocatedDevice(
                    node or _pod_node(snapshot, claim.namespace, pod, where), result.driver, result.pool, result.device,
                    device_uuid(device) if device is not None else "", claim.namespace, claim.name, pod,
                    where.cluster_queue if where else "", where.local_queue if where else ""))
    return tuple(sorted(set(rows), key=lambda r: (r.node, r.driver, r.pool, r.device, r.namespace, r.claim, r.pod)))


def device_uuid(device: Device) -> str:
    values = device.attributes.get(device.driver, {})
    for name in UUID_ATTRIBUTES:
        value = values.get(name)
        if isinstance(value, str):
            return value
    return ""


def _pod_node(snapshot: Snapshot, namespace: str, pod: str, where: PodQueue | None) -> str:
    """The node of a device that is not local to one node: where its consuming pod runs."""
    if where is not None and where.node:
        return where.node
    found = snapshot.pods.get(f"{namespace}/{pod}") if pod else None
    return found.node_name if found is not None else ""


def _consumers(claim: ResourceClaim) -> tuple[str, ...]:
    return tuple(sorted(c.name for c in claim.reserved_for if c.resource == "pods" and not c.api_group))


def _device_index(snapshot: Snapshot) -> Mapping[tuple[str, str, str], tuple[Device, str]]:
    """(driver, pool, device) -> the device (current generation) and its node ("" when not node-local)."""
    index = {}
    for (driver, pool), slices in snapshot.inventory.slices_by_pool.items():
        generation = snapshot.inventory.current_generation((driver, pool))
        for item in slices:
            if item.pool_generation == generation:
                for device in item.devices:
                    index[(driver, pool, device.name)] = (device, device.node_name or item.node_name or "")
    return index
