"""What the decisions read from the cluster, and their settings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from admission.core.labels import DEFAULT_DRAQ_USER, DEVICE_POLICIES, REQUIRE_QUEUE
from admission.core.leadership import DEFAULT_LEASE_NAME
from admission.core.native_gangs import GangApi
from admission.core.review.envelope import JsonObject
from admission.core.workloads import DEFAULT_FRAMEWORKS, enabled_kinds

DEFAULT_WORKLOAD_KINDS = frozenset(k.kind for k in enabled_kinds(DEFAULT_FRAMEWORKS))

EXEMPTIBLE_OWNER_KINDS = frozenset({"DaemonSet", "StatefulSet", "ReplicaSet", "Job"})
"""Controller kinds an exemption may name: the webhook can read each of them to verify a pod's owner."""
DEFAULT_MAX_PENDING_GROUPS = 1000


class Lookups(Protocol):
    """The few objects the decisions read; the webhook shell serves them from a list+watch cache."""

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None: ...

    def local_queue(self, namespace: str, name: str) -> JsonObject | None: ...

    def cluster_queue(self, name: str) -> JsonObject | None: ...

    def quota_unit(self, name: str) -> JsonObject | None: ...

    def topology(self, name: str) -> JsonObject | None: ...

    def quota_units(self) -> Iterable[JsonObject]: ...

    def device_class(self, name: str) -> JsonObject | None: ...

    def owner(self, kind: str, namespace: str, name: str) -> JsonObject | None:
        """An object a pod's owner chain names (a Job, a JobSet, a DaemonSet, ...) with its `metadata.uid` and
        `ownerReferences`; None when it is not known yet (the decision names it as missing so the shell reads
        it) or does not exist."""
        ...

    def pod_group(self, namespace: str, name: str) -> JsonObject | None: ...

    def claim_template(self, namespace: str, name: str) -> JsonObject | None:
        """A ResourceClaimTemplate a workload's pods name; None when it is not known yet (the decision names
        it as missing so the shell reads it) or does not exist."""
        ...

    def pending_groups(self, namespace: str, local_queue: str) -> int:
        """How many groups of the LocalQueue wait for admission, as far as the lookups know."""
        ...

    def lease(self, namespace: str, name: str) -> JsonObject | None:
        """draq's leader Lease, as the API server has it now (never from a cache): None when it is not
        known yet, and the decision names it as missing so the shell reads it."""
        ...


@dataclass(frozen=True, slots=True)
class GatingPolicy:
    """Settings of the decisions."""

    # The only user allowed to remove the gate and to relabel admitted pods.
    draq_user: str = DEFAULT_DRAQ_USER
    # The gang API the cluster serves (`native_gangs.chosen` of discovery), None where it serves none.
    gang_api: GangApi | None = None
    # Make groups native gangs (the served API's pod field); needs `gang_api`.
    native_gangs: bool = False
    # draq's leader Lease: PodGroup status written by draq must carry its current epoch.
    lease_namespace: str = "draq-system"
    lease_name: str = DEFAULT_LEASE_NAME
    # The workload kinds whose owner chains group pods (the enabled integrations' kinds).
    workload_kinds: frozenset[str] = DEFAULT_WORKLOAD_KINDS
    # Managed namespaces without the label draq.io/device-policy: may pods that use devices run
    # outside every queue (`allow`), or must they name one (`require-queue`)?
    default_device_policy: str = REQUIRE_QUEUE
    # Controller kinds whose pods are left out of queues, once the owner is read and its uid matches.
    exempt_owner_kinds: frozenset[str] = frozenset()
    # The most groups a LocalQueue may hold pending when it sets no spec.maxPendingGroups; 0: no cap.
    max_pending_groups: int = DEFAULT_MAX_PENDING_GROUPS

    def __post_init__(self) -> None:
        if self.default_device_policy not in DEVICE_POLICIES:
            raise ValueError(f"default device policy {self.default_device_policy!r}: use one of "
                             f"{', '.join(DEVICE_POLICIES)}")
        unknown = sorted(self.exempt_owner_kinds - EXEMPTIBLE_OWNER_KINDS)
        if unknown:
            raise ValueError(f"exempt owner kinds {', '.join(unknown)}: draq can verify only "
                             f"{', '.join(sorted(EXEMPTIBLE_OWNER_KINDS))}")
        if self.native_gangs and self.gang_api is None:
            raise ValueError("native gangs on, but no gang API given: discover the served one first")
        if self.max_pending_groups < 0:
            raise ValueError(f"max pending groups {self.max_pending_groups}: use 0 (no cap) or more")


DEFAULT_POLICY = GatingPolicy()
