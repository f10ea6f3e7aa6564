"""ClusterQueue and LocalQueue models, parsed from their manifests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

from admission.core.models._fields import Fields
from admission.core.models.label_selector import LabelSelector, read_label_selector
from admission.core.quantity import Quantity
from admission.core.quota.policies import PreemptionPolicy, parse_fair_sharing_weight, parse_preemption
from admission.core.quota.units import check_kind


class QueueingStrategy(StrEnum):
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


@dataclass(frozen=True, slots=True)
class QueueQuota:
    """Quota of one unit in one ClusterQueue (Kueue semantics).

    `borrowing_limit` None: may borrow without limit from the cohort. `lending_limit` None: all of
    the unused nominal quota may be lent.
    """

    unit: str
    nominal: Quantity
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    quotas: tuple[QueueQuota, ...] = ()
    cohort: str | None = None
    # None (no spec.namespaceSelector): serves no namespace; the empty selector serves every one.
    namespace_selector: LabelSelector | None = None
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    # How long an admitted group may take until every member is bound; None: the operator's default.
    bind_timeout_seconds: int | None = None
    preemption: PreemptionPolicy = field(default_factory=PreemptionPolicy)
    fair_sharing_weight: Fraction = Fraction(1)
    max_priority: int | None = None  # groups of a higher priority wait (None: no cap)
    topology: str | None = None  # spec.topologyName: the Topology its groups' required/preferred levels name

    def serves(self, namespace_labels: Mapping[str, str]) -> bool:
        """Whether a namespace with these labels may use the queue (closed by default)."""
        return self.namespace_selector is not None and self.namespace_selector.matches(namespace_labels)

    def quota(self, unit: str) -> QueueQuota | None:
        return next((q for q in self.quotas if q.unit == unit), None)


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    max_priority: int | None = None  # groups of a higher priority wait (None: no cap beyond the ClusterQueue's)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_cluster_queue(manifest: Mapping[str, Any]) -> ClusterQueue:
    fields = check_kind(manifest, "ClusterQueue")
    spec = fields.map("spec")
    cohort = spec.opt_str("cohort") or None
    quotas: list[QueueQuota] = []
    for entry in spec.maps("quotas"):
        quota = _unit_quota(entry, cohort)
        if any(q.unit == quota.unit for q in quotas):
            raise entry.fail("unit", f"duplicate quota for unit {quota.unit}")
        quotas.append(quota)
    strategy = spec.str("queueingStrategy") or QueueingStrategy.BEST_EFFORT_FIFO.value
    if strategy not in {s.value for s in QueueingStrategy}:
        raise spec.fail("queueingStrategy", f"unknown strategy {strategy!r}; expected BestEffortFIFO or "
                        "StrictFIFO")
    timeout = spec.int("bindTimeoutSeconds") if spec.has("bindTimeoutSeconds") else None
    if timeout is not None and timeout < 10:
        raise spec.fail("bindTimeoutSeconds", f"{timeout} is too short: at least 10 seconds")
    return ClusterQueue(
        name=fields.map("metadata").str("name", required=True), quotas=tuple(quotas), cohort=cohort,
        namespace_selector=read_label_selector(spec.map("namespaceSelector")) if spec.has("namespaceSelector")
        else None,
        strategy=QueueingStrategy(strategy), bind_timeout_seconds=timeout,
        preemption=parse_preemption(spec), fair_sharing_weight=parse_fair_sharing_weight(spec),
        max_priority=spec.int("maxPriority") if spec.has("maxPriority") else None,
        topology=spec.opt_str("topologyName") or None)


def _unit_quota(entry: Fields, cohort: str | None) -> QueueQuota:
    unit = entry.str("unit", required=True)
    nominal = _non_negative(entry, "nominal")
    borrowing = _non_negative(entry, "borrowingLimit") if entry.has("borrowingLimit") else None
    lending = _non_negative(entry, "lendingLimit") if entry.has("lendingLimit") else None
    for key, limit in (("borrowingLimit", borrowing), ("lendingLimit", lending)):
        if limit is not None and cohort is None:
            raise entry.fail(key, "needs spec.cohort: without a cohort there is no one to borrow from "
                             "or lend to")
    if lending is not None and lending > nominal:
        raise entry.fail("lendingLimit", f"{lending} exceeds nominal {nominal}")
    return QueueQuota(unit, nominal, borrowing, lending)


def _non_negative(entry: Fields, key: str) -> Quantity:
    value = entry.quantity(key)
    if value.sign() < 0:
        raise entry.fail(key, f"must not be negative, got {value}")
    return value


def parse_local_queue(manifest: Mapping[str, Any], default_namespace: str = "default") -> LocalQueue:
    fields = check_kind(manifest, "LocalQueue")
    meta, spec = fields.map("metadata"), fields.map("spec")
    return LocalQueue(namespace=meta.str("namespace") or default_namespace,
                      name=meta.str("name", required=True),
                      cluster_queue=spec.str("clusterQueue", required=True),
                      max_priority=spec.int("maxPriority") if spec.has("maxPriority") else None)


