"""How allocation can fail beyond "does not fit"."""

from __future__ import annotations

from admission.core.errors import DraqError


class AllocationError(DraqError):
    """A hard error: the scheduler aborts the pod's attempt on every node (CEL errors, bad requests...)."""


class MissingDeviceClass(AllocationError):
    """A request names a DeviceClass that does not exist: the pod is unschedulable until it does."""

    def __init__(self, message: str, class_name: str) -> None:
        super().__init__(message)
        self.class_name = class_name


class NodeAllocationError(DraqError):
    """This node cannot be used (invalid resource pools); other nodes may still work."""


INVALID_POOLS = "invalid resource pools were encountered"
