"""Realistic GPU node profiles: the Node and ResourceSlice manifests a DRA driver would publish.

Pure functions returning plain manifests (dicts). Attribute names follow the NVIDIA and AMD DRA
drivers (`productName`, `architecture`, `driverVersion`, `resource.kubernetes.io/pcieRoot`, ...).
With `partitions=True` the slices also publish partitions (MIG for NVIDIA, CPX for AMD) that consume
shared counters of their parent GPU; that needs the DRAPartitionableDevices gate (alpha in 1.35).

`draq simulate` adds nodes of these profiles (`--add-nodes`, `--plan-nodes`); the local-cluster kit's node
simulator (`admission.localcluster.nodesim`) publishes the same manifests on a real control plane.

Racks (`RACK_PROFILES`): an NVL72-like rack is 18 GB200-like nodes of 4 GPUs in one NVLink clique, published
as the node label `nvidia.com/gpu.clique` and as the GPUs' attribute `gpu.nvidia.com/cliqueID`; H100 racks
carry block and rack node labels only. A node's `Location` adds those labels and the attribute; a node
without one is published exactly as before.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

Manifest = dict[str, Any]

NVIDIA = "gpu.nvidia.com"
AMD = "gpu.amd.com"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
BLOCK_LABEL = "sim.draq.io/block"
RACK_LABEL = "sim.draq.io/rack"
CLIQUE_LABEL = "nvidia.com/gpu.clique"  # as NVIDIA's GPU feature discovery labels multi-node NVLink nodes
CLIQUE_ATTRIBUTE = "cliqueID"  # published in the driver's domain: gpu.nvidia.com/cliqueID


@dataclass(frozen=True)
class Partition:
    name: str  # e.g. "1g.10gb"
    per_gpu: int
    memory: str
    compute: int  # compute slices (NVIDIA) or compute units (AMD) consumed


@dataclass(frozen=True)
class GpuProfile:
    name: str
    driver: str
    gpus: int
    product: str
    memory: str
    architecture: str
    driver_version: str
    extra_attributes: tuple[tuple[str, Any], ...] = ()
    capacity: tuple[tuple[str, str], ...] = ()
    compute_total: int = 7
    partitions: tuple[Partition, ...] = ()
    cpu: str = "96"
    node_memory: str = "1Ti"
    instance_type: str = ""


PROFILES: dict[str, GpuProfile] = {
    "h100": GpuProfile(
        name="h100", driver=NVIDIA, gpus=8, product="NVIDIA H100 80GB HBM3", memory="80Gi",
        architecture="Hopper", driver_version="570.124.6",
        extra_attributes=(("cudaComputeCapability", ("version", "9.0.0")), ("brand", ("string", "Nvidia"))),
        partitions=(Partition("1g.10gb", 7, "10Gi", 1), Partition("3g.40gb", 2, "40Gi", 3)),
        instance_type="p5.48xlarge"),
    "a100": GpuProfile(
        name="a100", driver=NVIDIA, gpus=8, product="NVIDIA A100-SXM4-40GB", memory="40Gi",
        architecture="Ampere", driver_version="570.124.6",
        extra_attributes=(("cudaComputeCapability", ("version", "8.0.0")), ("brand", ("string", "Nvidia"))),
        partitions=(Partition("1g.5gb", 7, "5Gi", 1), Partition("3g.20gb", 2, "20Gi", 3)),
        cpu="96", node_memory="1152Gi", instance_type="p4d.24xlarge"),
    "mi300x": GpuProfile(
        name="mi300x", driver=AMD, gpus=8, product="AMD_Instinct_MI300X_OAM", memory="196592Mi",
        architecture="CDNA3", driver_version="6.12.12",
        extra_attributes=(("family", ("string", "AI")), ("partitionProfile", ("string", "spx_nps1"))),
        capacity=(("computeUnits", "304"), ("simdUnits", "1216")), compute_total=304,
        partitions=(Partition("cpx_nps1", 8, "24574Mi", 38),),
        cpu="128", node_memory="2Ti", instance_type="mi300x-8"),
}
"""Node profiles of `--nodes` / `--add-nodes`; the rack-only profiles below are not among them."""

GB200 = GpuProfile(
    name="gb200", driver=NVIDIA, gpus=4, product="NVIDIA GB200", memory="186Gi",
    architecture="Blackwell", driver_version="580.95.5",
    extra_attributes=(("cudaComputeCapability", ("version", "10.0.0")), ("brand", ("string", "Nvidia"))),
    partitions=(Partition("1g.23gb", 7, "23Gi", 1), Partition("3g.93gb", 2, "93Gi", 3)),
    cpu="144", node_memory="960Gi", instance_type="gb200-nvl72")


@dataclass(frozen=True)
class RackProfile:
    name: str
    node: GpuProfile
    nodes: int
    nvlink: bool  # the rack's GPUs form one NVLink clique (node label and device attribute)


RACK_PROFILES: dict[str, RackProfile] = {
    "nvl72": RackProfile("nvl72", GB200, 18, nvlink=True),
    "h100": RackProfile("h100", PROFILES["h100"], 4, nvlink=False),
}


@dataclass(frozen=True)
class Location:
    """Where a simulated node sits: its block and rack labels, and its NVLink clique if it has one."""
    block: str | None = None
    rack: str | None = None
    clique: str | None = None

    def labels(self) -> dict[str, str]:
        pairs = ((BLOCK_LABEL, self.block), (RACK_LABEL, self.rack), (CLIQUE_LABEL, self.clique))
        return {key: value for key, value in pairs if value is not None}


@dataclass(frozen=True)
class RackNode:
    name: str
    profile: GpuProfile
    location: Location


def rack_nodes(rack: RackProfile, name: str, block: str | None = None) -> list[RackNode]:
    """The nodes of one rack `name`: `<name>-<n>`, labelled into the rack (and `block`); an NVLink rack's
    clique is `<cluster uuid>.<n>` as NVIDIA names cliques, one cluster uuid per rack name."""
    clique = f"{_cluster_uuid(name)}.0" if rack.nvlink else None
    location = Location(block=block, rack=name, clique=clique)
    return [RackNode(f"{name}-{index}", rack.node, location) for index in range(rack.nodes)]


def _cluster_uuid(rack: str) -> str:
    digest = _uid("nvlink-cluster", rack) + _uid("nvlink-cluster", rack, "2")
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _uid(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:16]


def device_classes() -> list[Manifest]:
    """The classes the drivers install: whole GPUs per vendor, and their partitions."""
    def klass(name: str, expression: str) -> Manifest:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]}}
    return [
        klass(NVIDIA, f'device.driver == "{NVIDIA}" && device.attributes["{NVIDIA}"].type == "gpu"'),
        klass("mig.nvidia.com", f'device.driver == "{NVIDIA}" && device.attributes["{NVIDIA}"].type == "mig"'),
        klass(AMD, f'device.driver == "{AMD}" && device.attributes["{AMD}"].type == "amdgpu"'),
        klass("partition.amd.com",
              f'device.driver == "{AMD}" && device.attributes["{AMD}"].type == "amdgpu-partition"'),
    ]


def node_manifest(profile: GpuProfile, node: str, *, device_plugin: bool = False,
                  location: Location | None = None) -> Manifest:
    """The Node object; its status (capacity, Ready) is written separately through the status subresource."""
    labels = {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "draq.io/simulated": "true", "draq.io/gpu-profile": profile.name,
              "node.kubernetes.io/instance-type": profile.instance_type or profile.name,
              **(location.labels() if location is not None else {})}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels},
            "status": node_status(profile, device_plugin=device_plugin)}


def node_status(profile: GpuProfile, *, device_plugin: bool = False) -> Manifest:
    capacity = {"cpu": profile.cpu, "memory": profile.node_memory, "pods": "110", "ephemeral-storage": "2Ti"}
    if device_plugin:
        resource = "nvidia.com/gpu" if profile.driver == NVIDIA else "amd.com/gpu"
        capacity[resource] = str(profile.gpus)
    return {
        "capacity": capacity, "allocatable": dict(capacity),
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "simulated node is ready"}],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "nodeInfo": {"kubeletVersion": "v1.35.8-sim", "architecture": "amd64", "operatingSystem": "linux",
                     "containerRuntimeVersion": "sim://1", "kernelVersion": "", "osImage": "draq node simulator",
                     "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
    }


def _gpu_device(profile: GpuProfile, node: str, index: int, partitions: bool, clique: str | None) -> Manifest:
    attrs: dict[str, Any] = {
        "type": {"string": "gpu" if profile.driver == NVIDIA else "amdgpu"},
        "productName": {"string": profile.product},
        "architecture": {"string": profile.architecture},
        "driverVersion": {"version": profile.driver_version},
        "index": {"int": index},
        "uuid": {"string": f"GPU-{_uid(node, str(index))}"},
        PCIE_ROOT: {"string": f"pci0000:{0x10 * (1 + index // 2):02x}"},
    }
    if profile.driver == NVIDIA:
        attrs["nvlinkDomain"] = {"string": f"{node}-nvswitch"}
    if clique is not None:
        attrs[CLIQUE_ATTRIBUTE] = {"string": clique}
    for key, (kind, value) in profile.extra_attributes:
        attrs[key] = {kind: value}
    capacity = {"memory": {"value": profile.memory}}
    capacity.update({k: {"value": v} for k, v in profile.capacity})
    device: Manifest = {"name": f"gpu-{index}", "attributes": attrs, "capacity": capacity}
    if partitions:
        device["consumesCounters"] = [{"counterSet": f"gpu-{index}-counters", "counters": _whole_gpu_counters(profile)}]
    return device


def _whole_gpu_counters(profile: GpuProfile) -> dict[str, Any]:
    return {"memory": {"value": profile.memory}, "compute": {"value": str(profile.compute_total)}}


def _partition_devices(profile: GpuProfile, node: str, index: int, clique: str | None) -> list[Manifest]:
    devices = []
    part_type = "mig" if profile.driver == NVIDIA else "amdgpu-partition"
    for partition in profile.partitions:
        for slot in range(partition.per_gpu):
            devices.append({
                "name": f"gpu-{index}-{partition.name.replace('.', '-').replace('_', '-')}-{slot}",
                "attributes": {
                    "type": {"string": part_type},
                    "profile": {"string": partition.name},
                    "productName": {"string": profile.product},
                    "parentIndex": {"int": index},
                    "parentUUID": {"string": f"GPU-{_uid(node, str(index))}"},
                    PCIE_ROOT: {"string": f"pci0000:{0x10 * (1 + index // 2):02x}"},
                    **({CLIQUE_ATTRIBUTE: {"string": clique}} if clique is not None else {}),
                },
                "capacity": {"memory": {"value": partition.memory}},
                "consumesCounters": [{"counterSet": f"gpu-{index}-counters", "counters": {
                    "memory": {"value": partition.memory}, "compute": {"value": str(partition.compute)}}}],
            })
    return devices


def resource_slices(profile: GpuProfile, node: str, *, partitions: bool = False, generation: int = 1,
                    location: Location | None = None) -> list[Manifest]:
    """The slices of one node's pool (pool name = node name). With partitions, counters live in a
    slice of their own (the 1.35+ layout) and each partition consumes its parent's counters. A location
    with a clique publishes it on every GPU and partition (`cliqueID`)."""
    clique = location.clique if location is not None else None
    devices = [_gpu_device(profile, node, i, partitions, clique) for i in range(profile.gpus)]
    if partitions:
        for i in range(profile.gpus):
            devices += _partition_devices(profile, node, i, clique)
    chunks = [devices[i:i + 64] for i in range(0, len(devices), 64 if partitions else 128)]
    count = len(chunks) + (1 if partitions else 0)
    pool = {"name": node, "generation": generation, "resourceSliceCount": count}
    base = f"{node}-{profile.driver}"
    slices = [_slice(f"{base}-{n}", profile.driver, pool, node, {"devices": chunk}) for n, chunk in enumerate(chunks)]
    if partitions:
        counters = [{"name": f"gpu-{i}-counters", "counters": _whole_gpu_counters(profile)}
                    for i in range(profile.gpus)]
        slices.append(_slice(f"{base}-counters", profile.driver, pool, node, {"sharedCounters": counters}))
    return slices


def _slice(name: str, driver: str, pool: Manifest, node: str, body: Manifest) -> Manifest:
    spec: Manifest = {"driver": driver, "pool": dict(pool), "nodeName": node, **body}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def inventory(layout: dict[str, int], *, partitions: bool = False) -> list[Manifest]:
    """Nodes, slices and classes for e.g. {"h100": 2, "mi300x": 1}: node names `<profile>-<n>`."""
    objects: list[Manifest] = list(device_classes())
    for profile_name, count in layout.items():
        profile = PROFILES[profile_name]
        for n in range(count):
            node = f"{profile_name}-{n}"
            objects.append(node_manifest(profile, node))
            objects += resource_slices(profile, node, partitions=partitions)
    return objects
