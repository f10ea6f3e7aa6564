"""What the decisions read from the cluster, and their settings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from admission.core.labels import DEFAULT_DRAQ_USER
from admission.core.leadership import DEFAULT_LEASE_NAME
from admission.core.review.envelope import JsonObject
from admission.core.workloads import DEFAULT_FRAMEWORKS, enabled_kinds

DEFAULT_WORKLOAD_KINDS = frozenset(k.kind for k in enabled_kinds(DEFAULT_FRAMEWORKS))


class Lookups(Protocol):
    """The few objects the decisions read; the webhook shell serves them from a list+watch cache."""

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None: ...

    def local_queue(self, namespace: str, name: str) -> JsonObject | None: ...

    def cluster_queue(self, name: str) -> JsonObject | None: ...

    def quota_unit(self, name: str) -> JsonObject | None: ...

    def owner(self, kind: str, namespace: str, name: str) -> JsonObject | None:
        """A workload object a pod's owner chain names (a Job, a JobSet, ...): None when it is not known."""
        ...

    def quota_units(self) -> Iterable[JsonObject]: ...

    def device_class(self, name: str) -> JsonObject | None: ...

    def lease(self, namespace: str, name: str) -> JsonObject | None:
        """draq's leader Lease, as the API server has it now (never from a cache): None when it is not
        known yet, and the decision names it as missing so the shell reads it."""
        ...


@dataclass(frozen=True, slots=True)
class GatingPolicy:
    """Settings of the decisions."""

    # The only user allowed to remove the gate and to relabel admitted pods.
    draq_user: str = DEFAULT_DRAQ_USER
    # Make groups native gangs (`spec.workloadRef`) where the cluster serves the Workload API.
    native_gangs: bool = False
    # draq's leader Lease: PodGroup status written by draq must carry its current epoch.
    lease_namespace: str = "draq-system"
    lease_name: str = DEFAULT_LEASE_NAME
    # The workload kinds whose owner chains group pods (the enabled integrations' kinds).
    workload_kinds: frozenset[str] = DEFAULT_WORKLOAD_KINDS


DEFAULT_POLICY = GatingPolicy()
