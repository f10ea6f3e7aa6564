"""The public Python API of the pure core, pinned: a name added to or dropped from a package's `__all__`
is a deliberate change, made here too. Every listed name must exist."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "admission.core.allocator": [
        "AllocationError", "Allocator", "DEFAULT_BUDGET", "Explanation", "GangMember", "GangPlan", "INVALID_POOLS",
        "KnownUnfit", "MissingDeviceClass", "NodeAllocationError", "NodeView", "Outcome", "PoolView",
        "RequestExplanation", "Snapshot", "SnapshotIndex", "Status", "Usage", "allocation_to_manifest", "explain",
        "explain_best", "members_for", "place_gang", "pod_claims",
    ],
    "admission.core.cycle": [
        "Admit", "ChargeCorrection", "CycleInput", "CycleResult", "DEFAULT_BIND_TIMEOUT", "Evict", "Extend",
        "GroupDecision", "GroupEvent", "GroupView", "LateWait", "PendingCounts", "PhaseChange", "Requeue",
        "TERMINAL_PHASES", "Wait", "WaitReason", "admitted_event", "admitted_status", "charge_corrected_event",
        "charge_corrections", "charging_inventory", "collect_groups", "due_for_requeue", "evicted_status",
        "is_managed", "late_members", "late_wait_event", "next_phase", "overdue", "pending_counts", "pending_status",
        "phase_change", "plan_status", "planned_allocation", "promised_allocations", "promised_devices",
        "rebuild_state", "recorded_plan", "requeue", "run_cycle", "unreleased_members",
    ],
    "admission.core.quota": [
        "AccountingError", "Admission", "Amounts", "CelCompiler", "ChargeLine", "ChargeResult", "ClusterQueue",
        "CompiledUnit", "CounterSets", "Counting", "Difference", "DraCel", "ExtendedResource", "GroupObjects",
        "Inventory", "LocalQueue", "NONE", "Phase", "Plan", "PlannedClaim", "PodGroup", "QueueState",
        "QueueingStrategy", "QuotaFit", "QuotaUnit", "Reconciliation", "RecordedPlan", "SelectionFilter",
        "Unchargeable", "UnitQuota", "UnitStatus", "charge_group", "charge_status", "cluster_queue_active",
        "cluster_queue_status", "compile_unit", "device_selected", "device_value", "extended_claim_id",
        "extended_claims",
        "extended_resource_claim_spec", "extended_resource_class", "format_amount", "local_queue_status",
        "parse_cluster_queue", "parse_local_queue", "parse_pod_group", "parse_quota_unit", "pool_counter_sets",
        "quota_unit_ready", "quota_unit_status", "reconcile", "reconciliation_status",
    ],
    "admission.core.models": [
        "ALL", "AllocatedConfig", "AllocationResult", "AttributeValue", "CLAIM_COUNT", "CapacityRange", "ClaimConfig",
        "ClaimSpec", "ConsumerReference", "Container", "CounterConsumption", "CounterSet", "Device",
        "DeviceAllocation", "DeviceCapacity", "DeviceClass", "DeviceConstraint", "DeviceRequest", "DeviceSelection",
        "DeviceTaint", "DeviceToleration", "EXACT_COUNT", "LabelRequirement", "LabelSelector", "Model", "Namespace",
        "Node", "NodeSelector", "NodeSelectorRequirement", "NodeSelectorTerm", "ObjectMeta", "OpaqueConfig", "Pod",
        "PodResourceClaim", "PodResourceClaimStatus", "RequestPolicy", "ResourceClaim", "ResourceClaimTemplate",
        "ResourceQuota", "ResourceRequirements", "ResourceSlice", "ScalarValue", "Taint", "Toleration",
        "class_devices_resource", "device_class_of", "is_supported", "node_name_selector", "parse_label_selector",
        "parse_object", "parse_objects", "qualified_name", "qualify", "requested_resource",
    ],
    "admission.core.gaps": [
        "Account", "Gap", "GapInput", "GapKind", "GapReport", "MEANING", "NativeAccount", "SUPPORTED", "find_gaps",
        "parse_kind", "read_objects", "render_text",
    ],
    "admission.core.review": [
        "GatingPolicy", "Lookups", "QueueChoice", "job_group_min", "label_value", "mutate", "namespace_is_managed",
        "pod_queue", "validate",
    ],
    "admission.core.telemetry": [
        "AllocatedDevice", "GROUP_PHASES", "GapFigures", "GroupFigures", "PodQueue", "QueueFigure", "QueueInfo",
        "ReviewOutcome", "allocated_devices", "device_uuid", "gap_figures", "group_figures", "loop_stall",
        "loop_unready", "pod_queues", "published_devices", "queue_figures", "queue_infos", "release_latency",
        "review_outcome",
    ],
    "admission.core.views": [
        "QueueReport", "QueueUsage", "UnitUsage", "Why", "group_of_pod", "queue_report", "render_queues", "why",
    ],
    "admission.core.simulate": [
        "ClaimDevices", "DEFAULT_RUN_TIME", "Fate", "GroupOutcome", "Loaded", "NodeMaker", "NodePlan", "Progress",
        "ProgressHook", "RUN_TIME_ANNOTATION", "SimulationResult", "SimulationSettings", "SimulatedCluster",
        "declared_run_times", "format_duration", "job_pods", "load", "merged", "parse_duration", "plan_nodes",
        "render_table", "run_time", "simulate", "submit",
    ],
    "admission.core.preemption": [
        "Holding", "NoVictims", "PREEMPTED", "Preempt", "PreemptionPlan", "Preemptor", "SearchInput", "Victims",
        "candidates", "find_victims", "holdings", "may_preempt", "plan_preemptions", "preempted_status",
        "victims_of", "without_devices", "without_pods",
    ],
    "admission.core.cel": [
        "AttributeValue", "CelCompileError", "CelError", "CelRuntimeError", "DeviceLike", "Expression", "Program",
        "compile_expression", "compile_selector",
    ],
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_public_names_are_pinned(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(PUBLIC[package])
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


def test_vocabulary_is_defined_once() -> None:
    labels = importlib.import_module("admission.core.labels")
    assert labels.GATE == "draq.io/admission"
    assert f"{labels.API_GROUP}/{labels.API_GROUP_VERSION}" == labels.API_VERSION == "draq.io/v1alpha1"
    assert labels.GROUP_LABELS == (labels.QUEUE_LABEL, labels.GROUP_LABEL, labels.GROUP_MIN_LABEL)
