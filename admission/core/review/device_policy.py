"""Pod CREATE: whether a pod uses devices, whether its namespace lets it do so outside a queue, and
whether its controller owner exempts it from queues (only once the owner is read and its uid matches)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from admission.core.labels import DEVICE_POLICIES, DEVICE_POLICY_LABEL, REQUIRE_QUEUE
from admission.core.models import ObjectRef
from admission.core.nodefit import is_extended_resource
from admission.core.review.envelope import JsonObject
from admission.core.review.lookups import GatingPolicy, Lookups
from admission.core.review.readers import controller_owner, mapping

# Extended resources that DRA device classes serve (KEP 5004) live under kubernetes.io, unlike device plugins'.
_DRA_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"


def device_use(pod: JsonObject | None) -> tuple[str, ...]:
    """What devices the pod asks for, one phrase each: its DRA claims and the extended resources (device
    plugins', e.g. nvidia.com/gpu) that any container, init containers included, requests or limits."""
    spec = mapping(mapping(pod).get("spec"))
    uses: list[str] = []
    claims = spec.get("resourceClaims")
    if isinstance(claims, list) and claims:
        names = ", ".join(str(mapping(entry).get("name", "?")) for entry in claims)
        uses.append(f"ResourceClaims in spec.resourceClaims ({names})")
    for field in ("initContainers", "containers"):
        containers = spec.get(field)
        for container in containers if isinstance(containers, list) else []:
            resources = mapping(mapping(container).get("resources"))
            named = {name for part in ("requests", "limits") for name in mapping(resources.get(part))}
            for name in sorted(n for n in named if isinstance(n, str) and is_device_resource(n)):
                uses.append(f"{name} in {field[:-1]} {mapping(container).get('name', '?')}")
    return tuple(dict.fromkeys(uses))


def is_device_resource(name: str) -> bool:
    return is_extended_resource(name) or name.startswith(_DRA_EXTENDED_PREFIX)


@dataclass(frozen=True, slots=True)
class DevicePolicy:
    """A namespace's device policy and where it came from (for messages)."""

    value: str
    source: str

    @property
    def requires_queue(self) -> bool:
        return self.value == REQUIRE_QUEUE


def namespace_device_policy(labels: Mapping[str, str], policy: GatingPolicy) -> DevicePolicy:
    """The namespace's label `draq.io/device-policy`, else the webhook's default. An unknown value is taken
    as `require-queue`: a typo must not let devices escape the queues."""
    value = labels.get(DEVICE_POLICY_LABEL)
    if value is None:
        return DevicePolicy(policy.default_device_policy, "the webhook's default for managed namespaces")
    if value in DEVICE_POLICIES:
        return DevicePolicy(value, f"the namespace label {DEVICE_POLICY_LABEL}={value}")
    return DevicePolicy(REQUIRE_QUEUE, f"the namespace label {DEVICE_POLICY_LABEL}={value!r}, which is not one of "
                        f"{', '.join(DEVICE_POLICIES)} and is taken as {REQUIRE_QUEUE}")


@dataclass(frozen=True, slots=True)
class OwnerExemption:
    """Whether the pod's controller owner exempts it from queues; when an owner of an exempt kind is named
    but not verified, `note` says why (for messages) and `missing` names the owner to read."""

    exempt: bool
    note: str = ""
    missing: tuple[ObjectRef, ...] = ()


NOT_EXEMPT = OwnerExemption(False)


def owner_exemption(pod: JsonObject | None, namespace: str, lookups: Lookups, policy: GatingPolicy) -> OwnerExemption:
    owner = controller_owner(pod)
    kind, name, uid = owner.get("kind"), owner.get("name"), owner.get("uid")
    if not isinstance(kind, str) or kind not in policy.exempt_owner_kinds:
        return NOT_EXEMPT
    if not (isinstance(name, str) and name and isinstance(uid, str) and uid):
        return OwnerExemption(False, f"its controller ownerReference of kind {kind} has no name or uid, so it "
                              "exempts the pod from nothing")
    found = lookups.owner(kind, namespace, name)
    if found is None:
        return OwnerExemption(False, f"its owner {kind} {namespace}/{name} does not exist or could not be read, "
                              "so it exempts the pod from nothing", (ObjectRef(kind, namespace, name),))
    actual = mapping(found.get("metadata")).get("uid")
    if actual != uid:
        return OwnerExemption(False, f"its ownerReference names {kind} {namespace}/{name} with uid {uid}, but "
                              f"that {kind} has uid {actual}, so it exempts the pod from nothing")
    return OwnerExemption(True)
