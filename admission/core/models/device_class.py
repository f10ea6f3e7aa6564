"""resource.k8s.io/v1 DeviceClass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from admission.core.models._fields import Fields
from admission.core.models.meta import ObjectMeta, parse_meta


@dataclass(frozen=True, slots=True)
class OpaqueConfig:
    """Opaque driver parameters: copied into allocation results, never used for selection."""

    driver: str
    parameters: Any

    def to_manifest(self) -> dict[str, Any]:
        return {"opaque": {"driver": self.driver, "parameters": self.parameters}}


@dataclass(frozen=True, slots=True)
class DeviceClass:
    meta: ObjectMeta
    # One entry per selector; None for a selector without `cel` (an error once it is used).
    selectors: tuple[str | None, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()
    extended_resource_name: str | None = None

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def creation_timestamp(self) -> str:
        return self.meta.creation_timestamp


def parse_selectors(fields: Fields, key: str = "selectors") -> tuple[str | None, ...]:
    selectors: list[str | None] = []
    for selector in fields.maps(key):
        cel = selector.map("cel")
        selectors.append(cel.str("expression", required=True) if selector.has("cel") else None)
    return tuple(selectors)


def parse_opaque(fields: Fields) -> OpaqueConfig:
    if not fields.has("opaque"):
        raise fields.fail("opaque", "is required (the only supported configuration type)")
    opaque = fields.map("opaque")
    if not opaque.has("parameters"):
        raise opaque.fail("parameters", "is required")
    return OpaqueConfig(driver=opaque.str("driver", required=True), parameters=opaque.raw("parameters"))


def parse_device_class(obj: str, manifest: Fields) -> DeviceClass:
    spec = manifest.map("spec")
    return DeviceClass(
        meta=parse_meta(obj, manifest, namespaced=False),
        selectors=parse_selectors(spec),
        config=tuple(parse_opaque(c) for c in spec.maps("config")),
        extended_resource_name=spec.opt_str("extendedResourceName"),
    )
