"""The public Python API of the pure core, pinned: a name added to or dropped from a package's `__all__`
is a deliberate change, made here too. Every listed name must exist."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "admission.core.allocator": [
        "AllocationError", "Allocator", "DEFAULT_BUDGET", "Explanation", "GangMember", "GangPlacement",
        "INVALID_POOLS", "KnownUnfit", "MissingDeviceClass", "NodeAllocationError", "NodeView", "Outcome", "PoolView",
        "RequestExplanation", "Snapshot", "SnapshotInventory", "Status", "Usage", "allocation_to_manifest", "explain",
        "explain_best", "members_for", "place_gang", "pod_claims", "Domain", "DomainPlacement", "devices_needed",
        "domains_used", "place_beside", "place_in_topology", "topology_domains", "DomainFigure", "domain_figures",
        "levels_out_of_order", "gang_shape"
    ],
    "admission.core.cycle": [
        "ADMITTED_CONDITION", "ALLOCATOR", "Admit", "CHARGING", "Changes", "ChargeCorrection", "CycleInput",
        "CycleResult", "CycleStats", "DEFAULT_BIND_TIMEOUT", "DEFAULT_SAFETY_SECONDS", "Evict", "Extend",
        "GroupDecision", "GroupEvent", "GroupView", "LATE_CONDITION", "LateWait", "NODE_NAME_FIELD", "POD_CONDITION",
        "PREEMPTED", "Parking", "PendingCounts", "PhaseChange", "Preempt", "Preemptions", "Requeue", "STEPS",
        "StepTimer", "TERMINAL_PHASES", "Wait", "WaitReason", "admitted_condition", "admitted_event", "admitted_status",
        "backoff_seconds", "charge_corrected_event", "charge_corrections", "charging_inventory", "condition_patch",
        "current_condition", "claim_frees_room", "collect_groups", "cycle_input", "decide", "due_for_requeue",
        "evicted_status", "extended_status", "format_time", "is_managed", "late_admitted_event", "late_members",
        "late_wait_event", "next_phase", "node_frees_room", "overdue", "parse_pod_group_claims", "parse_time",
        "pending_counts", "pending_status", "phase_change", "pin_requirement", "pinned_affinity", "plan_status",
        "pod_frees_room", "planned_allocation", "preempted_message", "preempted_status", "promised_allocations",
        "promised_devices", "promised_pods", "rebuild_state", "recorded_plan", "requeue", "resized_event",
        "run_cycle", "slots_given_up_event", "unit_failures_of", "unknown_owner_event", "unreadable_owner",
        "unreleased_members", "victims_of", "waiting_condition", "with_owners", "with_pod_group_claims"
    ],
    "admission.core.quota": [
        "AccountingError", "Admission", "Amounts", "CelCompiler", "ChargeLine", "ChargeResult", "ClusterQueue",
        "CompiledUnit", "CounterSets", "Counting", "Difference", "DraCel", "ExtendedResource", "GroupObjects",
        "Inventory", "LocalQueue", "NONE", "Phase", "SEAL_FIELD", "SEAL_KEY_BYTES", "SealCheck", "UnsealedRecord",
        "check_seal", "merged_status", "parse_sealed_pod_group", "seal_record",
        "Placement", "Plan", "PlannedClaim", "PodGroup", "QueueQuota",
        "QueueState", "QueueingStrategy", "QuotaFit", "QuotaUnit", "Reconciliation", "SelectionFilter", "Slot",
        "Unchargeable", "UnitStatus", "Unreadable", "charge_group", "charge_status", "cluster_queue_active",
        "cluster_queue_status", "compile_unit", "device_selected", "device_value", "extended_claim_id",
        "extended_claims", "extended_resource_claim_spec", "extended_resource_class", "format_amount",
        "invalid_queue_active", "invalid_unit_event", "local_queue_status", "parse_cluster_queue",
        "parse_local_queue", "parse_pod_group", "parse_quota_unit", "pool_counter_sets", "quota_unit_ready",
        "quota_unit_status", "reconcile", "reconciliation_status", "suspended_status", "unreadable"
    ],
    "admission.core.models": [
        "ALL", "AllocatedConfig", "AllocationResult", "AttributeValue", "CLAIM_COUNT", "CapacityRange", "ClaimConfig",
        "ClaimSpec", "ConsumerReference", "Container", "CounterConsumption", "CounterSet", "DeclaredShape", "Device",
        "DerivedAttribute", "DeviceAllocation", "DeviceCapacity", "DeviceClass", "DeviceConstraint", "DeviceRequest",
        "DeviceSelection",
        "DeviceTaint", "DeviceToleration", "EXACT_COUNT", "LabelRequirement", "LabelSelector", "Model", "Namespace",
        "Node", "NodeSelector", "NodeSelectorRequirement", "NodeSelectorTerm", "ObjectMeta", "ObjectRef",
        "OpaqueConfig", "Pod", "PodGroupClaim", "PodResourceClaim", "PodResourceClaimStatus", "RequestPolicy",
        "ResourceClaim", "Role",
        "ResourceClaimTemplate", "ResourceQuota", "ResourceRequirements", "ResourceSlice", "ScalarValue", "Taint",
        "Toleration", "apply_taint_rules", "class_devices_resource", "device_class_of", "is_supported",
        "node_name_selector", "parse_label_selector", "parse_object", "parse_objects", "qualified_name", "qualify",
        "requested_resource", "TOPOLOGY_PREFERRED_ANNOTATION", "TOPOLOGY_REQUIRED_ANNOTATION", "Topology",
        "TopologyLevel", "TopologyMode", "TopologyRequest", "annotated_request", "parse_topology",
        "parse_topology_request"
    ],
    "admission.core.gaps": [
        "Account", "Gap", "GapInput", "GapKind", "GapReport", "MEANING", "NativeAccount", "SUPPORTED", "find_gaps",
        "parse_kind", "read_objects", "render_text"
    ],
    "admission.core.review": [
        "AdmissionRequest", "Decision", "EXEMPTIBLE_OWNER_KINDS", "GatingPolicy", "JsonObject", "Lookups",
        "MalformedReview", "ObjectRef", "QueueChoice", "TOTALLED_WORKLOADS", "device_use", "label_value",
        "malformed_response", "mutate", "namespace_is_managed", "parse_review", "pending_cap", "pod_queue",
        "render_response", "request_uid", "started_group", "uid_from_prefix", "validate"
    ],
    "admission.core.telemetry": [
        "AllocatedDevice", "GROUP_PHASES", "GapFigures", "GroupFigures", "LocalQueueFigure", "PodQueue", "QueueFigure",
        "QueueInfo", "ReviewOutcome", "allocated_devices", "device_uuid", "gap_figures", "group_figures",
        "local_queue_figures", "loop_stall",
        "loop_unready", "pod_queues", "published_devices", "queue_figures", "queue_infos", "release_latency",
        "review_outcome"
    ],
    "admission.core.workloads": [
        "BY_KIND", "DEFAULT_FRAMEWORKS", "FRAMEWORKS", "KINDS", "LWS_GROUP_INDEX_LABEL", "LWS_NAME_LABEL", "REQUIRES",
        "Grouping", "Membership", "Owners", "RoleSpec",
        "WorkloadKind", "controller_of", "declared_shape", "enabled_kinds", "job_size", "membership", "walk_key",
        "with_required",
    ],
    "admission.core.doctor": [
        "DRAQ_CRDS", "REQUIRED_RIGHTS", "WEBHOOK_CONFIGURATIONS", "Check", "ClusterFacts", "DoctorReport", "Finding",
        "Right", "ServiceHealth", "diagnose", "last_cycle_from_metrics", "render_report", "service_of",
    ],
    "admission.core.views": [
        "QueueReport", "QueueUsage", "TopologyReport", "UnitUsage", "Why", "group_of_pod", "queue_report",
        "render_queues", "render_topology", "topology_report", "why"
    ],
    "admission.core.simulate": [
        "ClaimDevices", "DEFAULT_RUN_TIME", "Fate", "GpuProfile", "GroupOutcome", "Loaded", "NodeMaker", "NodesToAdd",
        "PROFILES", "Progress", "ProgressHook", "RUN_TIME_ANNOTATION", "SimulatedCluster", "SimulationResult",
        "SimulationSettings", "declared_run_times", "device_classes", "format_duration", "job_pods", "load", "merged",
        "node_manifest", "parse_duration", "plan_nodes", "render_table", "resource_slices", "run_time", "simulate",
        "submit", "DomainsToAdd", "plan_domains", "BLOCK_LABEL", "CLIQUE_ATTRIBUTE", "CLIQUE_LABEL", "RACK_LABEL",
        "RACK_PROFILES", "Location", "RackNode", "RackProfile", "rack_nodes"
    ],
    "admission.core.cycle.preemption": [
        "Holding", "NoVictims", "PREEMPTED", "Preemptor", "SearchInput", "Victims", "candidates", "find_victims",
        "holdings", "may_preempt", "nodes_after", "plan_preemptions", "preempted_message", "preempted_status",
        "victims_of",
        "without_devices", "without_pods"
    ],
    "admission.core.cel": [
        "AttributeValue", "CelCompileError", "CelError", "CelRuntimeError", "DerivedProgram", "DeviceLike",
        "Expression", "Program", "compile_derived", "compile_expression", "compile_selector"
    ],
    "admission.core.nodefit": [
        "AFFINITY_MISMATCH", "AFFINITY_UNMET", "ANTI_AFFINITY_UNMET", "EXISTING_ANTI_AFFINITY", "ExistingAntiAffinity",
        "NODE_NAME_MISMATCH", "NodeFacts", "SPREAD_LABEL_MISSING", "SPREAD_UNMET",
        "NodeFitIndex", "NodeUsage", "PodFit", "TOO_MANY_PODS", "UNSCHEDULABLE", "allocatable_amounts",
        "container_requests", "insufficient", "is_extended_resource", "is_scalar_resource", "matches_node_affinity",
        "matches_node_selector", "pod_amounts", "pod_requests", "resource_reasons", "scheduler_amounts",
        "static_reason", "tolerates_unschedulable", "untolerated", "untolerated_taint"
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
