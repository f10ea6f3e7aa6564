"""A pod's resource requests as the scheduler counts them (k8s.io/component-helpers/resource PodRequests).

- A container's requests default to its limits where a limit is set and the request is not (the API
  server stores pods so; applying it again to a stored pod changes nothing).
- Regular containers and sidecars (init containers with `restartPolicy: Always`) run together and
  are summed. Init containers run one after another, each next to the sidecars started before it;
  the pod needs the larger of that peak and the sum.
- Pod-level `spec.resources` (PodLevelResources, on by default since 1.34) replaces the container
  figure for cpu, memory and hugepages; pod-level requests are defaulted as the API server does.
- `spec.overhead` is added on top.

`scheduler_amounts` turns exact requests into the integers the scheduler compares: cpu in
millicores, everything else in whole units, both rounded up; only resources the scheduler tracks
(cpu, memory, ephemeral-storage, extended and other scalar resources) are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from admission.core.models import Container, Pod
from admission.core.quantity import Quantity

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"
_NATIVE_DOMAIN = "kubernetes.io/"
_ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"
_QUOTA_PREFIX = "requests."

Requests = dict[str, Fraction]


def container_requests(container: Container) -> Requests:
    """The container's requests, defaulted from its limits (the API server's defaulting)."""
    values = {name: q.value for name, q in container.limits.items()}
    values.update({name: q.value for name, q in container.requests.items()})
    return values


def containers_requests(pod: Pod) -> Requests:
    """Regular containers and sidecars summed, against the peak of the init phase (no pod-level, no overhead)."""
    total: Requests = {}
    for container in pod.containers:
        _add(total, container_requests(container))
    sidecars: Requests = {}
    init_peak: Requests = {}
    for container in pod.init_containers:
        own = container_requests(container)
        if container.is_sidecar:
            _add(total, own)
            _add(sidecars, own)
            _maximum(init_peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, own)
            _maximum(init_peak, running)
    _maximum(total, init_peak)
    return total


def pod_requests(pod: Pod) -> Requests:
    """The pod's requests: containers (with sidecars and init containers), pod-level resources, overhead."""
    total = containers_requests(pod)
    pod_level = pod_level_requests(pod, total)
    if pod_level:
        total.update(pod_level)
    _add(total, {name: q.value for name, q in pod.overhead.items()})
    return total


def pod_level_requests(pod: Pod, containers: Mapping[str, Fraction] | None = None) -> Requests:
    """Pod-level requests of the resources pod-level resources may set, defaulted as the API server does:
    a missing request takes the containers' figure (cpu, memory) when containers ask for it, else the
    pod-level limit."""
    spec = pod.resources
    requests = {name: q.value for name, q in spec.requests.items() if is_pod_level_resource(name)}
    if spec.limits:
        aggregate = containers_requests(pod) if containers is None else containers
        for name, value in aggregate.items():
            if name not in requests and is_pod_level_resource(name) and not name.startswith(HUGEPAGES_PREFIX):
                requests[name] = value
        for name, quantity in spec.limits.items():
            if name not in requests and is_pod_level_resource(name):
                requests[name] = quantity.value
    return requests


def is_pod_level_resource(name: str) -> bool:
    return name in (CPU, MEMORY) or name.startswith(HUGEPAGES_PREFIX)


def is_extended_resource(name: str) -> bool:
    """A resource named `domain/name` outside `kubernetes.io` (device plugins, DRA-backed extended resources)."""
    return "/" in name and _NATIVE_DOMAIN not in name and not name.startswith(_QUOTA_PREFIX)


def is_scalar_resource(name: str) -> bool:
    """Resources the scheduler keeps as plain counters: extended, hugepages, `*kubernetes.io/*`, volume limits."""
    return (is_extended_resource(name) or name.startswith(HUGEPAGES_PREFIX) or _NATIVE_DOMAIN in name
            or name.startswith(_ATTACHABLE_VOLUMES_PREFIX))


def scheduler_amounts(values: Mapping[str, Fraction]) -> dict[str, int]:
    """The positive amounts the scheduler compares: cpu in millicores, the rest in units, rounded up."""
    amounts: dict[str, int] = {}
    for name, value in values.items():
        if name == CPU:
            amount = _ceil(value * 1000)
        elif name in (MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(name):
            amount = _ceil(value)
        else:
            continue
        if amount > 0:
            amounts[name] = amount
    return amounts


def allocatable_amounts(allocatable: Mapping[str, Quantity]) -> dict[str, int]:
    """A node's allocatable in scheduler units, with `pods` (how many pods it may run)."""
    amounts = scheduler_amounts({name: q.value for name, q in allocatable.items()})
    if PODS in allocatable:
        amounts[PODS] = _ceil(allocatable[PODS].value)
    return amounts


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def _add(total: Requests, more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + value


def _maximum(total: Requests, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if value > total.get(name, Fraction(0)):
            total[name] = value
