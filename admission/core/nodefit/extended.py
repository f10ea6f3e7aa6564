"""Extended resources backed by DRA (KEP 5004, DRAExtendedResource).

A DeviceClass serves the extended resource named in its `spec.extendedResourceName` and, always, the
implicit `deviceclass.resource.kubernetes.io/<class>`. On a node whose allocatable does not list a
resource a class serves, the scheduler does not count it against the node: it makes one claim for
the pod, one ExactCount request per (container, resource), and allocates it with the pod's other
claims. Quota charging builds the same claim (`admission.core.quota`). Only regular containers are
mapped (init containers' extended resources are not).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from admission.core.errors import DraqError
from admission.core.models import Container, DeviceClass, DeviceRequest, DeviceSelection
from admission.core.quantity import Quantity

IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
EXTENDED_CLAIM_ENTRY = "#extended-resources"


class NotWholeDevices(DraqError):
    """A container asks for a DRA-backed extended resource in an amount that is not a whole number of devices."""

    def __init__(self, container: str, resource: str, quantity: Quantity) -> None:
        super().__init__(f"container {container}: {resource} {quantity} is not a whole number of devices")


def extended_claim_name(pod_name: str) -> str:
    """`<pod>/#extended-resources`: the name draq gives the claim before the scheduler creates it (a `/`
    cannot occur in a real claim's name)."""
    return f"{pod_name}/{EXTENDED_CLAIM_ENTRY}"


def extended_resource_class(resource: str, classes: Iterable[DeviceClass]) -> DeviceClass | None:
    """The DeviceClass serving an extended resource by DRA.

    The newest class naming it in extendedResourceName (equal age: the first name), else the class
    named by the implicit `deviceclass.resource.kubernetes.io/<class>`.
    """
    classes = tuple(classes)
    explicit = [c for c in classes if c.extended_resource_name == resource]
    if explicit:
        newest = max(c.creation_timestamp for c in explicit)
        return min((c for c in explicit if c.creation_timestamp == newest), key=lambda c: c.name)
    if resource.startswith(IMPLICIT_EXTENDED_PREFIX):
        name = resource.removeprefix(IMPLICIT_EXTENDED_PREFIX)
        return next((c for c in classes if c.name == name), None)
    return None


def served_resources(classes: Iterable[DeviceClass]) -> dict[str, DeviceClass]:
    """Every extended resource name some DeviceClass serves, with the class that serves it."""
    classes = tuple(classes)
    names = {IMPLICIT_EXTENDED_PREFIX + c.name for c in classes}
    names.update(c.extended_resource_name for c in classes if c.extended_resource_name)
    return {name: found for name in sorted(names) if (found := extended_resource_class(name, classes)) is not None}


def extended_requests(containers: Sequence[Container], class_of: Callable[[str], DeviceClass | None],
                      only: Collection[str] | None = None, first_index: int = 0) -> list[tuple[str, DeviceRequest]]:
    """The requests of the claim for the containers' DRA-backed extended resources, with the resource each
    serves: one per (container, served resource), named as the scheduler names them,
    `container-<i>-request-<j>` with i the container's index among the pod's init and regular containers
    (`first_index` is that of the first one given) and j the resource's among the container's requests by
    name. With `only`, just the requests for those resources. Raises NotWholeDevices."""
    requests = []
    for index, container in enumerate(containers, start=first_index):
        wanted = {**container.limits, **container.requests}
        for position, resource in enumerate(sorted(wanted)):
            device_class = class_of(resource)
            if device_class is None or (only is not None and resource not in only):
                continue
            quantity = wanted[resource]
            if quantity.value.denominator != 1 or quantity.value < 0:
                raise NotWholeDevices(container.name, resource, quantity)
            if quantity.value == 0:
                continue
            name = f"container-{index}-request-{position}"
            selection = DeviceSelection(name, device_class.name, count=quantity.value.numerator)
            requests.append((resource, DeviceRequest(name, exactly=selection)))
    return requests
