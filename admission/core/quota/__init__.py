"""Quota: units, queues, what a pod group is charged, queue accounting and reconciliation.

Pure: manifests and models in, charges and decisions out.
"""

from admission.core.nodefit.extended import extended_resource_class
from admission.core.quota.accounting import AccountingError, Admission, QueueState, QuotaFit, UnitStatus
from admission.core.quota.amounts import NONE, Amounts, format_amount
from admission.core.quota.cel_programs import DraCel, device_selected
from admission.core.quota.charging import (
    ChargeLine,
    ChargeResult,
    GroupObjects,
    Inventory,
    Placement,
    SelectionFilter,
    charge_group,
    extended_claim_id,
    extended_claims,
    extended_resource_claim_spec,
)
from admission.core.quota.device_values import CelCompiler, CompiledUnit, compile_unit, device_value
from admission.core.quota.podgroup import (
    Phase,
    Plan,
    PlannedClaim,
    PodGroup,
    Slot,
    charge_status,
    parse_pod_group,
    reconciliation_status,
    suspended_status,
)
from admission.core.quota.problems import Unchargeable
from admission.core.quota.queues import (
    ClusterQueue,
    LocalQueue,
    QueueingStrategy,
    QueueQuota,
    parse_cluster_queue,
    parse_local_queue,
)
from admission.core.quota.reconcile import Difference, Reconciliation, reconcile
from admission.core.quota.seal import (
    SEAL_FIELD,
    SEAL_KEY_BYTES,
    SealCheck,
    UnsealedRecord,
    check_seal,
    merged_status,
    parse_sealed_pod_group,
    seal_record,
)
from admission.core.quota.status import (
    CounterSets,
    cluster_queue_active,
    cluster_queue_status,
    invalid_queue_active,
    invalid_unit_event,
    local_queue_status,
    pool_counter_sets,
    quota_unit_ready,
    quota_unit_status,
)
from admission.core.quota.units import Counting, ExtendedResource, QuotaUnit, parse_quota_unit
from admission.core.quota.unreadable import Unreadable, unreadable

__all__ = [
    "NONE",
    "SEAL_FIELD",
    "SEAL_KEY_BYTES",
    "AccountingError",
    "Admission",
    "Amounts",
    "CelCompiler",
    "ChargeLine",
    "ChargeResult",
    "ClusterQueue",
    "CompiledUnit",
    "CounterSets",
    "Counting",
    "Difference",
    "DraCel",
    "ExtendedResource",
    "GroupObjects",
    "Inventory",
    "LocalQueue",
    "Phase",
    "Placement",
    "Plan",
    "PlannedClaim",
    "PodGroup",
    "QueueQuota",
    "QueueState",
    "QueueingStrategy",
    "QuotaFit",
    "QuotaUnit",
    "Reconciliation",
    "SealCheck",
    "SelectionFilter",
    "Slot",
    "Unchargeable",
    "UnitStatus",
    "Unreadable",
    "UnsealedRecord",
    "charge_group",
    "charge_status",
    "check_seal",
    "cluster_queue_active",
    "cluster_queue_status",
    "compile_unit",
    "device_selected",
    "device_value",
    "extended_claim_id",
    "extended_claims",
    "extended_resource_claim_spec",
    "extended_resource_class",
    "format_amount",
    "invalid_queue_active",
    "invalid_unit_event",
    "local_queue_status",
    "merged_status",
    "parse_cluster_queue",
    "parse_local_queue",
    "parse_pod_group",
    "parse_quota_unit",
    "parse_sealed_pod_group",
    "pool_counter_sets",
    "quota_unit_ready",
    "quota_unit_status",
    "reconcile",
    "reconciliation_status",
    "seal_record",
    "suspended_status",
    "unreadable",
]
