"""Random but realistic DRA scenarios for comparing draq's allocator with the real kube-scheduler.

Pure generation from a seed: each trial is a fresh node (a GPU profile, some of its GPUs removed,
sometimes a NIC pool beside it), some of its devices already allocated to other claims, and one pod
with one to three claims pinned to that node. Only shapes that the default gate set of the target
release accepts are generated, and every class selector is guarded so that it cannot fail at run
time (a CEL runtime error aborts scheduling instead of answering "does not fit").
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from typing import Any

from admission.core.simulate import profiles

Manifest = dict[str, Any]
NIC = "nic.example.com"
SHARED = "share.example.com"  # devices that many claims share, each consuming some of their memory
FRACTIONAL = "fraction.example.com"  # shared devices whose bandwidth policy steps in fractions of a unit
# An extended resource a DeviceClass serves by name (KEP-5004); every class also serves its implicit
# `deviceclass.resource.kubernetes.io/<class>`. No simulated node lists either in its allocatable.
EXTENDED_CLASS, EXTENDED_RESOURCE = "extended-gpu", "example.com/gpu"

# The scenarios are the same on every run, in CI and locally: the README's "zero disagreements" is for
# this seed. DRAQ_DIFF_SEED picks others; a disagreement names its seed and trial.
DEFAULT_SEED = 20261122


def seed_from_environment() -> int:
    """DRAQ_DIFF_SEED if set, else DEFAULT_SEED."""
    text = os.environ.get("DRAQ_DIFF_SEED") or str(DEFAULT_SEED)
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"DRAQ_DIFF_SEED must be an integer, got {text!r}") from None

# Extra classes beside the drivers' own; each selector is safe on every device of every driver.
EXTRA_CLASSES: dict[str, str] = {
    "gpu-80g": ('device.driver in ["gpu.nvidia.com", "gpu.amd.com"] && '
                'device.capacity[device.driver].memory.compareTo(quantity("80Gi")) >= 0'),
    "hopper": ('device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu" && '
               'device.attributes["gpu.nvidia.com"].architecture == "Hopper"'),
    "any-gpu": ('device.driver in ["gpu.nvidia.com", "gpu.amd.com"] && '
                'device.attributes[device.driver].type in ["gpu", "amdgpu"]'),
    NIC: f'device.driver == "{NIC}"',
    SHARED: f'device.driver == "{SHARED}"',
    FRACTIONAL: f'device.driver == "{FRACTIONAL}"',
}
GPU_CLASSES = ("gpu.nvidia.com", "gpu.amd.com", "gpu-80g", "hopper", "any-gpu")
REQUEST_SELECTORS = (
    'device.capacity[device.driver].memory.compareTo(quantity("40Gi")) > 0',
    'device.attributes[device.driver].index < 4',
    'device.attributes[device.driver].productName.startsWith("NVIDIA")',
    'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:10"',
)


def device_classes() -> list[Manifest]:
    def klass(name: str, expression: str) -> Manifest:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]}}
    extended = klass(EXTENDED_CLASS, EXTRA_CLASSES["any-gpu"])
    extended["spec"]["extendedResourceName"] = EXTENDED_RESOURCE  # dropped where the feature is off
    return profiles.device_classes() + [klass(n, e) for n, e in EXTRA_CLASSES.items()] + [extended]


@dataclass(frozen=True)
class Features:
    """Alpha DRA features the control plane has on, and so the scenarios may use."""

    partitions: bool = False  # DRAPartitionableDevices (1.35+ slice layout)
    taints: bool = False  # DRADeviceTaints
    distinct: bool = False  # DRAConsumableCapacity: the API server keeps distinctAttribute constraints
    admin: bool = True  # DRAAdminAccess (on by default): the trial namespace allows admin access
    extended: bool = False  # DRAExtendedResource: containers ask for extended resources DRA devices serve
    fractional: bool = False  # DRAFractionalCapacityRange: capacity policies may step in fractions of a unit
    compatibility: bool = False  # DRADeviceCompatibilityGroups: partitions declare compatibility groups
    skip_operations: bool = False  # DRAOptionalNodeOperations: slices may skip node operations
    derived: bool = False  # DRADerivedAttributes: requests derive attributes for their constraints
    binding: bool = False  # DRADeviceBindingConditions: devices the scheduler waits for in PreBind


TAINT_KEY = "draq.io/unhealthy"
PARTITION_CLASSES = {"gpu.nvidia.com": "mig.nvidia.com", "gpu.amd.com": "partition.amd.com"}
PARTITION_PROFILES = {"gpu.nvidia.com": ("1g.10gb", "3g.40gb", "1g.5gb", "3g.20gb"), "gpu.amd.com": ("cpx_nps1",)}


@dataclass
class Trial:
    index: int
    node: Manifest
    slices: list[Manifest]
    in_use: list[Manifest]      # claims with status.allocation, written before the pod
    claims: list[Manifest]      # the pod's claims, in the pod's order
    pod: Manifest
    notes: list[str] = field(default_factory=list)
    # Pools of devices with binding conditions whose first attach for the pod fails (the driver stand-in
    # sets a binding failure condition, then the binding conditions once the scheduler allocates again).
    attach_fails_once: list[str] = field(default_factory=list)

    @property
    def node_name(self) -> str:
        return str(self.node["metadata"]["name"])

    @property
    def needs_attach(self) -> bool:
        """Some device of the node has binding conditions."""
        return any(d.get("bindingConditions") for d in _devices(self.slices))

    def describe(self) -> str:
        return json.dumps({"notes": self.notes, "node": self.node, "slices": self.slices, "inUse": self.in_use,
                           "claims": self.claims, "pod": self.pod}, indent=1)


def _nic_slice(node: str, rng: random.Random) -> Manifest:
    devices = [{"name": f"nic-{i}", "attributes": {
        "model": {"string": rng.choice(["cx7", "bf3"])},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{0x10 * (1 + i):02x}"}},
        "capacity": {"bandwidth": {"value": "400G"}}} for i in range(rng.randint(1, 4))]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{NIC}"},
            "spec": {"driver": NIC, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "nodeName": node, "devices": devices}}


def _inventory(node: str, rng: random.Random, features: Features) -> tuple[Manifest, list[Manifest]]:
    profile = profiles.PROFILES[rng.choice(sorted(profiles.PROFILES))]
    manifest = profiles.node_manifest(profile, node)
    if features.partitions and rng.random() < 0.5:
        # Whole GPUs and their partitions, consuming shared counters from a slice of their own.
        slices = profiles.resource_slices(profile, node, partitions=True)
    else:
        [gpus] = profiles.resource_slices(profile, node)
        keep = sorted(rng.sample(range(profile.gpus), rng.randint(2, profile.gpus)))
        gpus["spec"]["devices"] = [gpus["spec"]["devices"][i] for i in keep]
        slices = [gpus]
    if features.taints:
        for device in _devices(slices):
            if rng.random() < 0.15:
                device["taints"] = [{"key": TAINT_KEY, "value": "true",
                                     "effect": rng.choice(["NoSchedule", "NoSchedule", "None"])}]
    if rng.random() < 0.3:
        slices.append(_nic_slice(node, rng))
    return manifest, slices


def _devices(slices: list[Manifest]) -> list[Manifest]:
    return [d for rs in slices for d in rs["spec"].get("devices", [])]


def _partitioned(slices: list[Manifest]) -> bool:
    return any("sharedCounters" in rs["spec"] for rs in slices)


def _allocated_claim(name: str, node: str, results: list[Manifest]) -> Manifest:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "held", "exactly": {
                "deviceClassName": CLASS_OF_DRIVER[results[0]["driver"]], "count": len(results)}}]}},
            "status": {"allocation": {
                "devices": {"results": results},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}}


CLASS_OF_DRIVER = {"gpu.nvidia.com": "gpu.nvidia.com", "gpu.amd.com": "gpu.amd.com", NIC: NIC, SHARED: SHARED,
                   FRACTIONAL: FRACTIONAL}


def _in_use(node: str, slices: list[Manifest], rng: random.Random, prefix: str) -> list[Manifest]:
    claims = []
    share = 0.06 if _partitioned(slices) else 0.2
    for rs in slices:
        spec = rs["spec"]
        taken = [d["name"] for d in spec.get("devices", []) if rng.random() < share]
        if taken:
            results = [{"request": "held", "driver": spec["driver"], "pool": spec["pool"]["name"], "device": d}
                       for d in taken]
            claims.append(_allocated_claim(f"{prefix}-held-{len(claims)}", node, results))
    return claims


LIKELY_CLASSES = {"gpu.nvidia.com": ("gpu.nvidia.com", "any-gpu", "gpu-80g", "hopper"),
                  "gpu.amd.com": ("gpu.amd.com", "any-gpu", "gpu-80g")}


def _gpu_class(rng: random.Random, driver: str) -> str:
    """Mostly a class that can match this node's GPUs; sometimes any class (a likely "no")."""
    return rng.choice(GPU_CLASSES if rng.random() < 0.15 else LIKELY_CLASSES[driver])


def _exact(rng: random.Random, gpu_driver: str | None, features: Features, partitions: bool) -> Manifest:
    request: Manifest = {"deviceClassName": _gpu_class(rng, gpu_driver) if gpu_driver else NIC}
    gpu = gpu_driver is not None
    if gpu_driver and partitions and rng.random() < 0.5:
        request["deviceClassName"] = PARTITION_CLASSES[gpu_driver]
        if rng.random() < 0.5:
            wanted = rng.choice(PARTITION_PROFILES[gpu_driver])
            request["selectors"] = [{"cel": {"expression": f'device.attributes["{gpu_driver}"].profile == "{wanted}"'}}]
        gpu = False  # the GPU request selectors read attributes partitions do not have
    if rng.random() < 0.1:
        request["allocationMode"] = "All"
    else:
        request["count"] = rng.choice([1, 1, 1, 2, 2, 3, 4, 8])
    if gpu and rng.random() < 0.3:
        request["selectors"] = [{"cel": {"expression": rng.choice(REQUEST_SELECTORS)}}]
    if features.taints and rng.random() < 0.4:
        request["tolerations"] = [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    return request


def _request(name: str, rng: random.Random, gpu_driver: str | None, features: Features, partitions: bool) -> Manifest:
    if gpu_driver and rng.random() < 0.2:
        subs = []
        for i in range(rng.randint(2, 3)):
            sub = _exact(rng, gpu_driver, features, partitions)
            subs.append({"name": f"alt{i}", **sub})
        return {"name": name, "firstAvailable": subs}
    return {"name": name, "exactly": _exact(rng, gpu_driver, features, partitions)}


def _claim(name: str, rng: random.Random, gpu_driver: str, has_nic: bool, features: Features,
           partitions: bool) -> Manifest:
    requests = [_request("gpus", rng, gpu_driver, features, partitions)]
    if has_nic and rng.random() < 0.5:
        requests.append(_request("nic", rng, None, features, partitions))
    devices: Manifest = {"requests": requests}
    if len(requests) == 2 and rng.random() < 0.5:
        devices["constraints"] = [{"requests": ["gpus", "nic"],
                                   "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": devices}}


def _pod(name: str, node: str, claims: list[Manifest]) -> Manifest:
    refs = [{"name": f"c{i}", "resourceClaimName": c["metadata"]["name"]} for i, c in enumerate(claims)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.example/job:1",
                                     "resources": {"claims": [{"name": r["name"]} for r in refs]}}],
                     "resourceClaims": refs}}


MISSING_CLASS = "draq-e2e-missing-class"  # never created: the scheduler reports such pods unschedulable


def _extras(rng: random.Random, claims: list[Manifest], gpu_driver: str, has_nic: bool, features: Features,
            partitions: bool) -> list[str]:
    """Shapes drawn from a random stream of their own (so the trials above stay as they were): an
    admin-access request beside the normal ones of a claim, distinctAttribute constraints (alpha gates),
    a request naming a DeviceClass that does not exist."""
    notes = []
    for claim in claims:
        devices = claim["spec"]["devices"]
        requests = devices["requests"]
        if features.admin and rng.random() < 0.15:
            monitor = _exact(rng, gpu_driver, Features(), partitions)
            monitor.pop("allocationMode", None)
            monitor["count"] = rng.choice([1, 1, 2])
            monitor["adminAccess"] = True
            requests.insert(rng.randrange(len(requests) + 1), {"name": "monitor", "exactly": monitor})
            notes.append(f"{claim['metadata']['name']}: admin access beside normal requests")
        if features.distinct and "constraints" not in devices and rng.random() < 0.35:
            names = [r["name"] for r in requests if r["name"] != "monitor"]
            scope = names if len(names) > 1 and rng.random() < 0.6 else names[:1]
            devices["constraints"] = [{"requests": scope, "distinctAttribute": profiles.PCIE_ROOT}]
            if has_nic and "nic" not in names and rng.random() < 0.5:
                requests.append({"name": "nic", "exactly": {"deviceClassName": NIC, "count": 1}})
                devices["constraints"][0]["requests"] = [*scope, "nic"]
            notes.append(f"{claim['metadata']['name']}: distinctAttribute {profiles.PCIE_ROOT}")
        if rng.random() < 0.03:
            victim = rng.choice(requests)
            for selection in [victim["exactly"]] if "exactly" in victim else victim["firstAvailable"]:
                selection["deviceClassName"] = MISSING_CLASS
            notes.append(f"{claim['metadata']['name']}: request {victim['name']} names a missing DeviceClass")
    return notes


SHARE_MEMORY = "40Gi"  # each shared device's memory; claims take it in steps of 10Gi (at least 10Gi)


def _shared_slice(node: str, rng: random.Random) -> Manifest:
    devices = [{"name": f"share-{i}", "allowMultipleAllocations": True, "capacity": {"memory": {
        "value": SHARE_MEMORY, "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}}}}
        for i in range(rng.randint(1, 2))]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-share"},
            "spec": {"driver": SHARED, "pool": {"name": f"{node}-share", "generation": 1, "resourceSliceCount": 1},
                     "nodeName": node, "devices": devices}}


def _shares_held(node: str, shared: Manifest, rng: random.Random, prefix: str) -> list[Manifest]:
    """Claims already holding shares of the shared devices: each takes 10-30Gi of one device."""
    claims = []
    for device in shared["spec"]["devices"]:
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            share = f"{rng.getrandbits(32):08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
            results = [{"request": "held", "driver": SHARED, "pool": shared["spec"]["pool"]["name"],
                        "device": device["name"], "shareID": share,
                        "consumedCapacity": {"memory": rng.choice(["10Gi", "20Gi", "30Gi"])}}]
            claims.append(_allocated_claim(f"{prefix}-shared-{len(claims)}", node, results))
    return claims


def _share_request(rng: random.Random) -> Manifest:
    """A request for shares: the policy's default, a step, a value it rounds up, or more than a device has."""
    request: Manifest = {"deviceClassName": SHARED, "count": rng.choice([1, 1, 1, 2])}
    memory = rng.choice([None, "10Gi", "20Gi", "15Gi", "30Gi", "50Gi"])
    if memory is not None:
        request["capacity"] = {"requests": {"memory": memory}}
    return request


def _newer_shapes(trial: Trial, rng: random.Random, features: Features) -> None:
    """Shapes of the releases since 1.35, drawn from a random stream of their own: device taints with the
    NoExecute effect and tolerations of every effect (taints on), and devices shared by many claims
    through consumable capacity (DRAConsumableCapacity on)."""
    if features.taints:
        for device in _devices(trial.slices):
            for taint in device.get("taints", []):
                if rng.random() < 0.4:
                    taint["effect"] = "NoExecute"
                    trial.notes.append(f"{device['name']}: a NoExecute taint")
        for claim in trial.claims:
            for request in claim["spec"]["devices"]["requests"]:
                for selection in [request["exactly"]] if "exactly" in request else request["firstAvailable"]:
                    for toleration in selection.get("tolerations", []):
                        if rng.random() < 0.4:
                            toleration.pop("effect", None)  # tolerates every effect
    if features.extended and rng.random() < 0.3:
        _extended_resources(trial, rng)
    if features.distinct and rng.random() < 0.35:
        shared = _shared_slice(trial.node_name, rng)
        trial.slices.append(shared)
        trial.in_use.extend(_shares_held(trial.node_name, shared, rng, f"t{trial.index}"))
        for claim in trial.claims:
            if rng.random() < 0.6:
                claim["spec"]["devices"]["requests"].append({"name": "share", "exactly": _share_request(rng)})
                trial.notes.append(f"{claim['metadata']['name']}: shares of a device (consumable capacity)")


def _milli(amount: int) -> str:
    """A quantity of `amount` thousandths, written as a user would (1500m, 2)."""
    return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"


def _fractional_device(index: int, rng: random.Random) -> tuple[Manifest, list[int]]:
    """A shared device with a bandwidth policy in milli-units that the API server accepts (default and max
    on the steps from min, one step within the value), and the amounts a share may take of it."""
    value = rng.choice([1500, 2000, 2500, 3000])
    low = rng.choice([250, 500, 1000])
    step = rng.choice([s for s in (100, 250, 500, 1000) if low + s <= value])
    amounts = list(range(low, value + 1, step))
    rng_policy: Manifest = {"min": _milli(low), "step": _milli(step)}
    if rng.random() < 0.4:
        amounts = amounts[:rng.randint(2, len(amounts))]
        rng_policy["max"] = _milli(amounts[-1])
    device = {"name": f"frac-{index}", "allowMultipleAllocations": True, "capacity": {"bandwidth": {
        "value": _milli(value), "requestPolicy": {"default": _milli(low), "validRange": rng_policy}}}}
    return device, amounts


def _fractional_shapes(trial: Trial, rng: random.Random, features: Features) -> None:
    """DRAFractionalCapacityRange (1.37): devices shared in fractions of a unit, some shares already held,
    and requests for amounts between the steps (which the scheduler rounds up on milli-units)."""
    if not features.fractional or rng.random() >= 0.35:
        return
    node = trial.node_name
    made = [_fractional_device(i, rng) for i in range(rng.randint(1, 2))]
    pool = f"{node}-frac"
    spec = {"driver": FRACTIONAL, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node, "devices": [device for device, _ in made]}
    trial.slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": pool},
                         "spec": spec})
    for device, amounts in made:
        for _ in range(rng.choice([0, 1, 1, 2])):
            share = f"{rng.getrandbits(32):08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
            results = [{"request": "held", "driver": FRACTIONAL, "pool": pool, "device": device["name"],
                        "shareID": share, "consumedCapacity": {"bandwidth": _milli(rng.choice(amounts[:2]))}}]
            trial.in_use.append(_allocated_claim(f"t{trial.index}-frac-{len(trial.in_use)}", node, results))
    for claim in trial.claims:
        for n in range(rng.choice([0, 1, 1, 2])):
            request: Manifest = {"deviceClassName": FRACTIONAL, "count": rng.choice([1, 1, 2])}
            amount = rng.choice([None, 100, 300, 600, 700, 1000, 1200, 1750])
            if amount is not None:
                request["capacity"] = {"requests": {"bandwidth": _milli(amount)}}
            claim["spec"]["devices"]["requests"].append({"name": f"frac-{n}", "exactly": request})
            trial.notes.append(f"{claim['metadata']['name']}: shares in fractions of a unit (fractional capacity)")


COMPATIBILITY_GROUPS = ((), ("small",), ("large",), ("small", "large"), ("mixed",), ("small", "mixed"))


def _compatibility_shapes(trial: Trial, rng: random.Random, features: Features) -> None:
    """DRADeviceCompatibilityGroups (1.37 alpha): the whole GPUs and partitions of some nodes declare the
    groups they may share a counter set with, so that only some layouts of partitions fit together."""
    partitioned = [d for d in _devices(trial.slices) if d.get("consumesCounters")]
    if not features.compatibility or not partitioned or rng.random() >= 0.6:
        return
    for device in partitioned:
        for use in device["consumesCounters"]:
            groups = rng.choice(COMPATIBILITY_GROUPS)
            if groups:
                use["compatibilityGroups"] = list(groups)
    trial.notes.append(f"{trial.node_name}: partitions with compatibility groups")


def _optional_operations_shapes(trial: Trial, rng: random.Random, features: Features) -> None:
    """DRAOptionalNodeOperations (1.37 alpha): a slice whose devices skip node operations, on a node that
    declares the feature or not (its devices then go to no pod there)."""
    with_devices = [rs for rs in trial.slices if rs["spec"].get("devices")]
    if not features.skip_operations or not with_devices or rng.random() >= 0.4:
        return
    chosen = rng.choice(with_devices)
    chosen["spec"]["skipNodeOperations"] = rng.choice([["*"], ["NodePrepareResources", "NodeUnprepareResources"]])
    declares = rng.random() < 0.5
    if declares:
        trial.node["status"]["declaredFeatures"] = ["DRAOptionalNodeOperations"]
    trial.notes.append(f"{chosen['metadata']['name']}: skips node operations (node declares the feature: "
                       f"{'yes' if declares else 'no'})")
ROOTS = '["pci0000:10", "pci0000:20"]'  # the PCIe roots of the first socket, say
SOCKET = "derived/socket"


def _socket(guarded: bool, low: str, high: str) -> str:
    """An expression telling the socket of a device from its PCIe root; unguarded, a device without the
    attribute fails the scheduling attempt."""
    roots = 'device.attributes["resource.kubernetes.io"]'
    found = f'{roots}.pcieRoot in {ROOTS} ? {low} : {high}'
    return f'"pcieRoot" in {roots} ? ({found}) : {low}' if guarded else found


def _derive(request: Manifest, name: str, expression: str) -> None:
    for selection in [request["exactly"]] if "exactly" in request else request["firstAvailable"]:
        selection.setdefault("derivedAttributes", []).append({"name": name, "expression": expression})


def _derived_shapes(trial: Trial, rng: random.Random, features: Features) -> None:
    """DRADerivedAttributes (1.37 alpha): a claim's GPUs (and NIC) must sit on one socket, told by a derived
    attribute from their PCIe roots (matchAttribute), or its GPUs must come from different sockets, a derived
    attribute shadowing the devices' own pcieRoot (distinctAttribute). Sometimes the expression does not
    check that the attribute exists, so a device without it fails the attempt."""
    if not features.derived or rng.random() >= 0.45:
        return
    for claim in trial.claims:
        requests = {r["name"]: r for r in claim["spec"]["devices"]["requests"] if r["name"] in ("gpus", "nic")}
        if not requests:
            continue
        guarded = rng.random() < 0.8
        constraints = claim["spec"]["devices"].setdefault("constraints", [])
        if rng.random() < 0.5:
            constraints.append({"requests": sorted(requests), "matchAttribute": SOCKET})
            for request in requests.values():
                _derive(request, SOCKET, _socket(guarded, "0", "1"))
            trial.notes.append(f"{claim['metadata']['name']}: devices on one socket (derived attribute)")
        elif "gpus" in requests:
            constraints.append({"requests": ["gpus"], "distinctAttribute": profiles.PCIE_ROOT})
            _derive(requests["gpus"], profiles.PCIE_ROOT, _socket(guarded, '"low"', '"high"'))
            trial.notes.append(f"{claim['metadata']['name']}: GPUs on different sockets (derived attribute)")
        if not guarded:
            trial.notes.append(f"{claim['metadata']['name']}: derived attribute read without a check")


# The conditions a device with binding conditions (KEP-5007) waits for: the driver stand-in of the
# differential sets them True once the scheduler has allocated the device, or sets the failure condition.
BINDING_CONDITIONS = ("draq.io/attached", "draq.io/fabric-ready")
BINDING_FAILURE_CONDITION = "draq.io/attach-failed"


def _attached_pool(trial: Trial, rng: random.Random) -> None:
    """A second pool of the node's GPU driver holding GPUs that must be attached before the pod binds
    (binding conditions, the failure condition the API requires with them, sometimes `bindsToNode`).
    Its name sorts before the node's own pool, so only the rule "pools with binding conditions last"
    makes the scheduler try it after that pool; sometimes the node's own GPUs need attaching too."""
    node, gpus = trial.node_name, trial.slices[0]
    whole = [d for d in _devices([gpus]) if d["attributes"]["type"]["string"] in ("gpu", "amdgpu")]
    devices = []
    for i, template in enumerate(rng.sample(whole, rng.randint(1, min(3, len(whole))))):
        device = json.loads(json.dumps(template))
        device.pop("consumesCounters", None)
        device["name"] = f"attached-{i}"
        device["attributes"]["uuid"] = {"string": f"GPU-attached-{node}-{i}"}
        _needs_attach(device, rng)
        devices.append(device)
    pool = f"attach-{node}"
    trial.slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                         "metadata": {"name": f"{node}-attach"},
                         "spec": {"driver": gpus["spec"]["driver"], "nodeName": node, "devices": devices,
                                  "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}}})
    trial.notes.append(f"{pool}: GPUs with binding conditions in a pool of their own")
    pools = [pool]
    if rng.random() < 0.5:
        for device in gpus["spec"]["devices"]:
            if rng.random() < 0.5:
                _needs_attach(device, rng)
        pools.append(gpus["spec"]["pool"]["name"])
        trial.notes.append(f"{node}: binding conditions on the node's own GPUs too")
    if rng.random() < 0.5:
        trial.attach_fails_once.extend(pools)
        trial.notes.append(f"{pool}: the first attach of a device fails (binding failure condition)")


def _needs_attach(device: Manifest, rng: random.Random) -> None:
    device["bindingConditions"] = list(BINDING_CONDITIONS[:rng.randint(1, 2)])
    device["bindingFailureConditions"] = [BINDING_FAILURE_CONDITION]
    if rng.random() < 0.5:
        device["bindsToNode"] = True


def _extended_resources(trial: Trial, rng: random.Random) -> None:
    """The container asks for GPUs as an extended resource (the class's own name or the implicit one), which
    the scheduler turns into a claim of its own for the pod; sometimes the pod has no claim besides."""
    implicit = f"deviceclass.resource.kubernetes.io/{_gpu_class(rng, _gpu_driver(trial))}"
    resource = rng.choice([EXTENDED_RESOURCE, implicit])
    count = rng.choice([1, 1, 2, 4, 8])
    if rng.random() < 0.3:
        trial.claims.clear()
        trial.pod["spec"]["resourceClaims"] = []
        trial.pod["spec"]["containers"][0]["resources"] = {}
    trial.pod["spec"]["containers"][0]["resources"]["limits"] = {resource: str(count)}
    name = "a class's extendedResourceName" if resource == EXTENDED_RESOURCE else "a class's implicit name"
    trial.notes.append(f"{trial.pod['metadata']['name']}: {count} of {resource}, an extended resource through DRA "
                       f"({name})")


def _gpu_driver(trial: Trial) -> str:
    return str(trial.slices[0]["spec"]["driver"])


def trial(seed: int, index: int, features: Features = Features()) -> Trial:
    rng = random.Random(f"{seed}/{index}")
    node = f"diff-{seed}-{index}"
    node_manifest, slices = _inventory(node, rng, features)
    prefix = f"t{index}"
    held = _in_use(node, slices, rng, prefix)
    has_nic = any(rs["spec"]["driver"] == NIC for rs in slices)
    gpu_driver = slices[0]["spec"]["driver"]
    partitions = _partitioned(slices)
    claims = [_claim(f"{prefix}-c{i}", rng, gpu_driver, has_nic, features, partitions)
              for i in range(rng.choice([1, 1, 1, 1, 2, 3]))]
    notes = _extras(random.Random(f"{seed}/{index}/extras"), claims, gpu_driver, has_nic, features, partitions)
    made = Trial(index, node_manifest, slices, held, claims, _pod(f"{prefix}-pod", node, claims), notes)
    _newer_shapes(made, random.Random(f"{seed}/{index}/newer"), features)
    _fractional_shapes(made, random.Random(f"{seed}/{index}/fractional"), features)
    _compatibility_shapes(made, random.Random(f"{seed}/{index}/compatibility"), features)
    _optional_operations_shapes(made, random.Random(f"{seed}/{index}/operations"), features)
    _derived_shapes(made, random.Random(f"{seed}/{index}/derived"), features)
    binding = random.Random(f"{seed}/{index}/binding")
    if features.binding and binding.random() < 0.5:
        _attached_pool(made, binding)
    return made
