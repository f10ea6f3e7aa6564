"""Turn manifests (plain dicts) into typed models, dispatching on apiVersion and kind."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from admission.core.errors import InvalidInput
from admission.core.models._fields import Fields
from admission.core.models.device_class import DeviceClass, parse_device_class
from admission.core.models.device_taint_rule import TAINT_RULE_API, DeviceTaintRule, parse_device_taint_rule
from admission.core.models.meta import object_label
from admission.core.models.node import Node, parse_node
from admission.core.models.pod import Pod, parse_pod
from admission.core.models.resource_claim import (
    ResourceClaim,
    ResourceClaimTemplate,
    parse_resource_claim,
    parse_resource_claim_template,
)
from admission.core.models.resource_quota import Namespace, ResourceQuota, parse_namespace, parse_resource_quota
from admission.core.models.resource_slice import ResourceSlice, parse_resource_slice

Model = (Node | DeviceClass | ResourceSlice | ResourceClaim | ResourceClaimTemplate | Pod | ResourceQuota | Namespace
         | DeviceTaintRule)

RESOURCE_API = "resource.k8s.io/v1"
_NAMESPACED: dict[tuple[str, str], Callable[[str, Fields, str], Model]] = {
    (RESOURCE_API, "ResourceClaim"): parse_resource_claim,
    (RESOURCE_API, "ResourceClaimTemplate"): parse_resource_claim_template,
    ("v1", "Pod"): parse_pod,
    ("v1", "ResourceQuota"): parse_resource_quota,
}
_CLUSTER: dict[tuple[str, str], Callable[[str, Fields], Model]] = {
    ("v1", "Node"): parse_node,
    (RESOURCE_API, "DeviceClass"): parse_device_class,
    (RESOURCE_API, "ResourceSlice"): parse_resource_slice,
    ("v1", "Namespace"): parse_namespace,
    (TAINT_RULE_API, "DeviceTaintRule"): parse_device_taint_rule,
}
SUPPORTED_KINDS = tuple(sorted(f"{api} {kind}" for api, kind in (*_NAMESPACED, *_CLUSTER)))


def is_supported(manifest: Mapping[str, Any]) -> bool:
    key = (manifest.get("apiVersion"), manifest.get("kind"))
    return key in _NAMESPACED or key in _CLUSTER


def parse_object(manifest: Mapping[str, Any], default_namespace: str = "") -> Model:
    """One manifest to its model; raises InvalidInput naming the object, field and reason."""
    if not isinstance(manifest, Mapping):
        raise InvalidInput("manifest", "", f"expected a mapping, got {type(manifest).__name__}")
    api, kind = manifest.get("apiVersion"), manifest.get("kind")
    label = object_label(str(kind or "object"), manifest)
    if not isinstance(api, str) or not api:
        raise InvalidInput(label, "apiVersion", "is required")
    if not isinstance(kind, str) or not kind:
        raise InvalidInput(label, "kind", "is required")
    fields = Fields(label, manifest)
    if (api, kind) in _NAMESPACED:
        return _NAMESPACED[(api, kind)](label, fields, default_namespace)
    if (api, kind) in _CLUSTER:
        return _CLUSTER[(api, kind)](label, fields)
    raise InvalidInput(label, "apiVersion/kind", f"unsupported object {api} {kind}; supported: "
                       + ", ".join(SUPPORTED_KINDS))


def parse_objects(manifests: Iterable[Mapping[str, Any]], default_namespace: str = "",
                  skip_unsupported: bool = False) -> list[Model]:
    """Each manifest in order; `List` objects are flattened; unsupported kinds skipped if asked."""
    models: list[Model] = []
    for manifest in manifests:
        if manifest is None:
            continue
        if isinstance(manifest, Mapping) and str(manifest.get("kind", "")).endswith("List") \
                and isinstance(manifest.get("items"), list):
            models.extend(parse_objects(manifest["items"], default_namespace, skip_unsupported))
            continue
        if skip_unsupported and isinstance(manifest, Mapping) and not is_supported(manifest):
            continue
        models.append(parse_object(manifest, default_namespace))
    return models
