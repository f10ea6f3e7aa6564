"""core/v1 ResourceQuota and Namespace: what native quota allows and counts in a namespace.

Resource names that matter for devices (Kubernetes' quota evaluators): `<class>.deviceclass.resource.k8s.io/devices`
(devices requested by ResourceClaims of a DeviceClass), `requests.<extended resource>` (e.g.
`requests.nvidia.com/gpu`, pod requests; with DRAExtendedResource also claims of a class mapped to it),
`requests.deviceclass.resource.kubernetes.io/<class>` (the implicit extended resource of a class) and
`count/resourceclaims.resource.k8s.io`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from admission.core.models._fields import Fields
from admission.core.models.meta import Named, ObjectMeta, parse_meta
from admission.core.quantity import Quantity

CLASS_DEVICES_SUFFIX = ".deviceclass.resource.k8s.io/devices"
CLAIM_COUNT = "count/resourceclaims.resource.k8s.io"
REQUESTS_PREFIX = "requests."


@dataclass(frozen=True, slots=True)
class ResourceQuota(Named):
    meta: ObjectMeta
    hard: Mapping[str, Quantity] = field(default_factory=dict)
    # status.used as the quota controller wrote it; None when the object has no status (e.g. a manifest file).
    used: Mapping[str, Quantity] | None = None
    # spec.scopes and the scope names of spec.scopeSelector: a scoped quota counts only some pods.
    scopes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Namespace(Named):
    meta: ObjectMeta

    @property
    def labels(self) -> Mapping[str, str]:
        return self.meta.labels


def class_devices_resource(device_class: str) -> str:
    """The quota resource counting devices requested by claims of a class."""
    return f"{device_class}{CLASS_DEVICES_SUFFIX}"


def device_class_of(resource: str) -> str | None:
    """The DeviceClass a `<class>.deviceclass.resource.k8s.io/devices` quota resource counts, else None."""
    if resource.endswith(CLASS_DEVICES_SUFFIX) and len(resource) > len(CLASS_DEVICES_SUFFIX):
        return resource.removesuffix(CLASS_DEVICES_SUFFIX)
    return None


def requested_resource(resource: str) -> str | None:
    """`nvidia.com/gpu` for the quota resource `requests.nvidia.com/gpu`, else None."""
    return resource.removeprefix(REQUESTS_PREFIX) if resource.startswith(REQUESTS_PREFIX) else None


def parse_resource_quota(obj: str, manifest: Fields, default_namespace: str = "") -> ResourceQuota:
    spec, status = manifest.map("spec"), manifest.map("status")
    scopes = list(spec.str_list("scopes"))
    scopes += [e.str("scopeName", required=True) for e in spec.map("scopeSelector").maps("matchExpressions")]
    return ResourceQuota(
        meta=parse_meta(obj, manifest, namespaced=True, default_namespace=default_namespace),
        hard=spec.quantity_map("hard"),
        used=status.quantity_map("used") if status.has("used") else None,
        scopes=tuple(scopes),
    )


def parse_namespace(obj: str, manifest: Fields) -> Namespace:
    return Namespace(parse_meta(obj, manifest, namespaced=False))
