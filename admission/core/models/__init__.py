"""Typed, immutable models of the Kubernetes objects DRA allocation works on (resource.k8s.io/v1)."""

from admission.core.models.device_class import DeviceClass, OpaqueConfig
from admission.core.models.label_selector import LabelRequirement, LabelSelector, parse_label_selector
from admission.core.models.meta import ObjectMeta
from admission.core.models.node import Node
from admission.core.models.node_selector import (
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    node_name_selector,
)
from admission.core.models.parse import Model, is_supported, parse_object, parse_objects
from admission.core.models.pod import (
    Container,
    Pod,
    PodResourceClaim,
    PodResourceClaimStatus,
    ResourceRequirements,
)
from admission.core.models.resource_claim import (
    ALL,
    EXACT_COUNT,
    AllocatedConfig,
    AllocationResult,
    ClaimConfig,
    ClaimSpec,
    ConsumerReference,
    DeviceAllocation,
    DeviceConstraint,
    DeviceRequest,
    DeviceSelection,
    DeviceToleration,
    ResourceClaim,
    ResourceClaimTemplate,
)
from admission.core.models.resource_quota import (
    CLAIM_COUNT,
    Namespace,
    ResourceQuota,
    class_devices_resource,
    device_class_of,
    requested_resource,
)
from admission.core.models.resource_slice import (
    AttributeValue,
    CapacityRange,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceTaint,
    RequestPolicy,
    ResourceSlice,
    ScalarValue,
    qualified_name,
    qualify,
)
from admission.core.models.taint import Taint, Toleration

__all__ = [
    "ALL", "CLAIM_COUNT", "EXACT_COUNT", "AllocatedConfig", "AllocationResult", "AttributeValue", "CapacityRange",
    "ClaimConfig", "ClaimSpec", "ConsumerReference", "Container", "CounterConsumption", "CounterSet", "Device",
    "DeviceAllocation", "DeviceCapacity", "DeviceClass", "DeviceConstraint", "DeviceRequest", "DeviceSelection",
    "DeviceTaint", "DeviceToleration", "LabelRequirement", "LabelSelector", "Model", "Namespace", "Node",
    "NodeSelector", "NodeSelectorRequirement", "NodeSelectorTerm", "ObjectMeta", "OpaqueConfig", "Pod",
    "PodResourceClaim", "PodResourceClaimStatus", "RequestPolicy", "ResourceClaim", "ResourceClaimTemplate",
    "ResourceQuota", "ResourceRequirements", "ResourceSlice", "ScalarValue", "Taint", "Toleration",
    "class_devices_resource", "device_class_of", "is_supported", "node_name_selector", "parse_label_selector",
    "parse_object", "parse_objects", "qualified_name", "qualify", "requested_resource",
]
