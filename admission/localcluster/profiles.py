"""The GPU node profiles live in the pure core (`admission.core.simulate.profiles`), where `draq simulate`
reads them too. This module only passes the names on for the end-to-end tests that import them from the kit;
new code imports the core module."""

from admission.core.simulate.profiles import (
    AMD,
    NVIDIA,
    PCIE_ROOT,
    PROFILES,
    GpuProfile,
    Partition,
    device_classes,
    inventory,
    node_manifest,
    node_status,
    resource_slices,
)

__all__ = ["AMD", "NVIDIA", "PCIE_ROOT", "PROFILES", "GpuProfile", "Partition", "device_classes", "inventory",
           "node_manifest", "node_status", "resource_slices"]
