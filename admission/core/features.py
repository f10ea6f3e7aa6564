"""DRA feature gates per Kubernetes release, and `--feature-gates` parsing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from admission.core.errors import InvalidInput

SUPPORTED_VERSIONS = ("1.34", "1.35", "1.36", "1.37")
DEFAULT_VERSION = "1.35"

# Gates that change what the allocator (or the API server, for fields) does.
_DEFAULTS: dict[str, dict[str, bool]] = {
    "1.34": {
        "DRAPrioritizedList": True, "DRAAdminAccess": True, "DRAResourceClaimDeviceStatus": True,
        "DRADeviceBindingConditions": False, "DRAPartitionableDevices": False,
        "DRADeviceTaints": False, "DRAConsumableCapacity": False, "DRAExtendedResource": False,
        "DRAListTypeAttributes": False, "DRADeviceTaintRules": False,
    },
    "1.35": {
        "DRAPrioritizedList": True, "DRAAdminAccess": True, "DRAResourceClaimDeviceStatus": True,
        "DRADeviceBindingConditions": False, "DRAPartitionableDevices": False,
        "DRADeviceTaints": False, "DRAConsumableCapacity": False, "DRAExtendedResource": False,
        "DRAListTypeAttributes": False, "DRADeviceTaintRules": False,
    },
    "1.36": {
        "DRAPrioritizedList": True, "DRAAdminAccess": True, "DRAResourceClaimDeviceStatus": True,
        "DRADeviceBindingConditions": True, "DRAPartitionableDevices": True,
        "DRADeviceTaints": True, "DRAConsumableCapacity": True, "DRAExtendedResource": True,
        "DRAListTypeAttributes": False, "DRADeviceTaintRules": False, "DRAWorkloadResourceClaims": False,
    },
    # From the versioned gate specs of k8s.io/kubernetes v1.37.2 (pkg/features/kube_features.go).
    "1.37": {
        "DRAPrioritizedList": True, "DRAAdminAccess": True, "DRAResourceClaimDeviceStatus": True,
        "DRADeviceBindingConditions": True, "DRAPartitionableDevices": True,
        "DRADeviceTaints": True, "DRAConsumableCapacity": True, "DRAExtendedResource": True,
        "DRAListTypeAttributes": False, "DRADeviceTaintRules": True,
        "DRAFractionalCapacityRange": True, "DRADeviceCompatibilityGroups": False,
        "DRADerivedAttributes": False, "DRAOptionalNodeOperations": False, "DRAWorkloadResourceClaims": False,
    },
}
# Gates that change what the allocator does and that draq does not model: with one on, draq says so (at
# start and in `draq allocate`) instead of answering as if it were off. Every 1.37 gate is modelled now.
UNMODELLED_GATES: dict[str, str] = {}
KNOWN_GATES = frozenset(_DEFAULTS["1.37"])
# GA gates locked to their default: the components refuse to start when one is set otherwise.
_LOCKED: dict[str, frozenset[str]] = {
    "1.36": frozenset({"DRAAdminAccess"}),
    "1.37": frozenset({"DRAAdminAccess", "DRAPrioritizedList", "DRAExtendedResource",
                       "DRAResourceClaimDeviceStatus"}),
}
# Alpha in 1.35: what `--alpha-dra` switches on for every control-plane component.
ALPHA_GATES_1_35 = (
    "DRAConsumableCapacity", "DRAExtendedResource", "DRAPartitionableDevices", "DRADeviceTaints",
    "DRADeviceBindingConditions",
)


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """The DRA gates in force for one decision, plus the release whose behaviour is modelled."""

    version: str
    enabled: frozenset[str]
    # The minor release, read once: the allocator asks for it on every node and device.
    minor: int = field(init=False, repr=False, compare=False)
    # The gates the allocator asks about, answered once too.
    prioritized_list: bool = field(init=False, repr=False, compare=False)
    admin_access: bool = field(init=False, repr=False, compare=False)
    partitionable_devices: bool = field(init=False, repr=False, compare=False)
    device_taints: bool = field(init=False, repr=False, compare=False)
    consumable_capacity: bool = field(init=False, repr=False, compare=False)
    # Devices with binding conditions are usable only with both gates on.
    binding_conditions: bool = field(init=False, repr=False, compare=False)
    extended_resource: bool = field(init=False, repr=False, compare=False)
    list_type_attributes: bool = field(init=False, repr=False, compare=False)
    # Capacity request policies rounded on milli-units rather than whole units (1.37).
    fractional_capacity_range: bool = field(init=False, repr=False, compare=False)
    # Devices drawing on one counter set must share a compatibility group (1.37); with the gate off, 1.37
    # ignores slices whose devices declare such groups.
    compatibility_groups: bool = field(init=False, repr=False, compare=False)
    # Devices of slices that skip node operations go only to nodes that declare the feature (1.37).
    optional_node_operations: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        on = self.enabled
        for name, value in (
                ("minor", int(self.version.split(".")[1])),
                ("prioritized_list", "DRAPrioritizedList" in on),
                ("admin_access", "DRAAdminAccess" in on),
                ("partitionable_devices", "DRAPartitionableDevices" in on),
                ("device_taints", "DRADeviceTaints" in on),
                ("consumable_capacity", "DRAConsumableCapacity" in on),
                ("binding_conditions", {"DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"} <= on),
                ("extended_resource", "DRAExtendedResource" in on),
                ("list_type_attributes", "DRAListTypeAttributes" in on),
                ("fractional_capacity_range", "DRAFractionalCapacityRange" in on),
                ("compatibility_groups", "DRADeviceCompatibilityGroups" in on),
                ("optional_node_operations", "DRAOptionalNodeOperations" in on)):
            object.__setattr__(self, name, value)

    def __contains__(self, gate: object) -> bool:
        return gate in self.enabled

    def unmodelled(self) -> tuple[str, ...]:
        """One line per gate in force whose allocator semantics draq does not model."""
        return tuple(f"{gate} is on ({self.version}): {why}; answers that depend on it are not the "
                     f"scheduler's" for gate, why in UNMODELLED_GATES.items() if gate in self.enabled)


def normalize_version(version: str | None) -> str:
    if not version:
        return DEFAULT_VERSION
    parts = version.strip().lstrip("v").split(".")
    short = ".".join(parts[:2])
    if short not in _DEFAULTS:
        raise InvalidInput("--kubernetes-version", "", f"{version!r} is not supported; use one of "
                           + ", ".join(SUPPORTED_VERSIONS))
    return short


def gates_for(version: str | None = None, overrides: Mapping[str, bool] | None = None) -> FeatureGates:
    """Defaults of `version` with explicit `overrides` applied on top."""
    v = normalize_version(version)
    state = dict(_DEFAULTS[v])
    for gate, on in (overrides or {}).items():
        if gate not in KNOWN_GATES:
            raise InvalidInput("--feature-gates", gate, "unknown DRA feature gate; known: "
                               + ", ".join(sorted(KNOWN_GATES)))
        if gate not in state:
            raise InvalidInput("--feature-gates", gate, f"is not a gate of Kubernetes {v}; remove it from the flag "
                               "or model a release that has it")
        if gate in _LOCKED.get(v, ()) and on != state[gate]:
            raise InvalidInput("--feature-gates", gate, f"is GA and locked to {str(state[gate]).lower()} in {v}; "
                               "remove it from the flag")
        state[gate] = on
    return FeatureGates(v, frozenset(g for g, on in state.items() if on))


def exactly(version: str | None, enabled: set[str] | frozenset[str] | list[str]) -> FeatureGates:
    """Exactly these gates on, every other DRA gate off (as the conformance cases state)."""
    return FeatureGates(normalize_version(version), frozenset(enabled))


def parse_gate_flag(text: str) -> dict[str, bool]:
    """Parse `A=true,B=false` as kube components do."""
    result: dict[str, bool] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or value.lower() not in ("true", "false"):
            raise InvalidInput("--feature-gates", item, "expected Gate=true or Gate=false")
        result[name.strip()] = value.lower() == "true"
    return result


def modelled_release(server: str | None) -> tuple[str, tuple[str, ...]]:
    """The release whose semantics draq models for an API server of release `server` (`1.37`; None when
    it did not say), and what draq says at start when that is not the server's own release."""
    if server is None:
        return DEFAULT_VERSION, (f"the API server did not report its version: allocation follows Kubernetes "
                                 f"{DEFAULT_VERSION}; pass --kubernetes-version to choose",)
    if server in _DEFAULTS:
        return server, ()
    oldest, newest = SUPPORTED_VERSIONS[0], SUPPORTED_VERSIONS[-1]
    minor = int(server.split(".")[1])
    if minor < int(oldest.split(".")[1]):
        return oldest, (f"Kubernetes {server} is older than the oldest release draq models ({oldest}): "
                        f"allocation answers follow {oldest} and are not that scheduler's",)
    return newest, (f"Kubernetes {server} is newer than the newest release draq models ({newest}): allocation "
                    f"answers follow {newest}; what {server} changed is not modelled",)
