"""A pod's effective resource requests, as the scheduler and ResourceQuota count them."""

from __future__ import annotations

from fractions import Fraction

from admission.core.models import Container, Pod


def pod_requests(pod: Pod) -> dict[str, Fraction]:
    """Per resource: the larger of the app containers' sum and the biggest init container.

    A container without a request but with a limit requests its limit (the API server's default).
    """
    total: dict[str, Fraction] = {}
    for container in pod.containers:
        for name, value in _requests(container).items():
            total[name] = total.get(name, Fraction(0)) + value
    for container in pod.init_containers:
        for name, value in _requests(container).items():
            total[name] = max(total.get(name, Fraction(0)), value)
    return total


def _requests(container: Container) -> dict[str, Fraction]:
    values = {name: q.value for name, q in container.limits.items()}
    values.update({name: q.value for name, q in container.requests.items()})
    return values
