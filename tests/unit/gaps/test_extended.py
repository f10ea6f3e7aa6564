"""Extended resources: requests no unit counts, the scheduler's DRA claims for them (KEP 5004), and
nodes that offer the same hardware through a device plugin and through ResourceSlices."""

from __future__ import annotations

from admission.core.gaps import GapKind
from tests.support.builders import (
    DRIVER,
    claim,
    device_class,
    exactly,
    gpu,
    holding,
    node,
    pod,
    quota_unit,
    resource_slice,
)
from tests.unit.gaps.world import TEAM, admitted_group, base, gaps_of, report, running_pod, sizes

GI = 1024**3
EXTENDED_CLAIM = {"resource.kubernetes.io/extended-resource-claim": "true"}


def test_queue_pods_requesting_a_resource_no_unit_counts() -> None:
    result = report(*base(), pod("w-0", TEAM, queue="lq", group="w", gated=True, requests={"example.com/fpga": "2"}),
                    pod("w-1", TEAM, queue="lq", group="w", gated=True, requests={"example.com/fpga": "1"}),
                    pod("other", "ops", requests={"example.com/fpga": "4"}))
    (gap,) = gaps_of(result, GapKind.UNCOUNTED_EXTENDED)
    assert (gap.measure, gap.size, gap.namespace, gap.cluster_queue) == ("example.com/fpga", 3, TEAM, "cq")
    assert gap.objects == ("Pod team/w-0", "Pod team/w-1")
    assert "which no QuotaUnit counts" in gap.message


def test_resources_a_unit_lists_or_whose_class_a_unit_counts_are_counted() -> None:
    result = report(*base(), pod("a", TEAM, queue="lq", group="a", gated=True, requests={"nvidia.com/gpu": "2"}),
                    pod("b", TEAM, queue="lq", group="b", gated=True,
                        requests={"deviceclass.resource.kubernetes.io/gpu": "1", "cpu": "4"}))
    assert gaps_of(result, GapKind.UNCOUNTED_EXTENDED) == []


def test_a_scheduler_claim_of_a_class_the_unit_does_not_count_escapes_the_unit() -> None:
    # Class gpu-er serves nvidia.com/gpu through DRA; unit gpus lists nvidia.com/gpu but counts class gpu only.
    scheduler_claim = claim("p-0-extended-resources-x7k", exactly("container-0-request-0", "gpu-er", 2),
                            namespace=TEAM, annotations=EXTENDED_CLAIM, reserved_for=["p-0"],
                            allocation=holding(f"{DRIVER}/n1/gpu-0", f"{DRIVER}/n1/gpu-1",
                                               request="container-0-request-0"))
    result = report(*base(), device_class("gpu-er", extended_resource="nvidia.com/gpu"),
                    admitted_group("g", {}, ["p-0"]),
                    running_pod("p-0", queue="lq", group="g", requests={"nvidia.com/gpu": "2"}), scheduler_claim)
    (gap,) = result.gaps
    assert (gap.kind, gap.measure, gap.size, gap.cluster_queue) == (GapKind.EXTENDED_VIA_DRA, "gpus", 2, "cq")
    assert gap.objects == ("ResourceClaim team/p-0-extended-resources-x7k", "Pod team/p-0")
    assert "nvidia.com/gpu as class gpu-er" in gap.message


def test_a_scheduler_claim_of_a_counted_class_is_no_gap() -> None:
    scheduler_claim = claim("p-0-extended-resources-x7k", exactly("container-0-request-0", "gpu", 1),
                            namespace=TEAM, annotations=EXTENDED_CLAIM, reserved_for=["p-0"],
                            allocation=holding(f"{DRIVER}/n1/gpu-0", request="container-0-request-0"))
    result = report(*base(), admitted_group("g", {"gpus": "1", "gpu-memory": "80Gi"}, ["p-0"]),
                    running_pod("p-0", queue="lq", group="g", requests={"deviceclass.resource.kubernetes.io/gpu": "1"}),
                    scheduler_claim)
    assert result.gaps == ()


def test_a_node_with_a_device_plugin_and_slices_is_double_offered() -> None:
    # n2: 4 nvidia.com/gpu from a device plugin, 8 GPUs in its own ResourceSlice: 4 GPUs counted twice.
    result = report(*base(), node("n2", allocatable={"nvidia.com/gpu": "4", "cpu": "96"}),
                    resource_slice("n2", *(gpu(f"gpu-{i}") for i in range(8))))
    (gap,) = result.gaps
    assert (gap.kind, gap.measure, gap.size, gap.node) == (GapKind.DOUBLE_OFFERED, "gpus", 4, "n2")
    assert gap.objects == ("Node n2", "ResourceSlice n2-gpu.example.com")
    assert "node n2 offers nvidia.com/gpu 4 through a device plugin (gpus 4) and 8 devices (gpus 8)" in gap.message


def test_double_offered_capacity_in_a_unit_that_weighs_the_plugin_resource() -> None:
    memory = quota_unit("gpu-memory", capacity={"deviceClassNames": ["gpu"], "name": "memory"},
                        extendedResources=[{"name": "nvidia.com/gpu", "countsAs": "80Gi"}])
    result = report(device_class("gpu"), memory, node("n2", allocatable={"nvidia.com/gpu": "4"}),
                    resource_slice("n2", *(gpu(f"gpu-{i}") for i in range(8))))
    assert sizes(result, GapKind.DOUBLE_OFFERED) == {"gpu-memory": 4 * 80 * GI}


def test_a_class_serving_a_node_plugin_resource_without_a_unit_is_double_offered_in_devices() -> None:
    result = report(device_class("gpu", extended_resource="example.com/gpu"),
                    node("n3", allocatable={"example.com/gpu": "2"}),
                    resource_slice("n3", *(gpu(f"gpu-{i}") for i in range(4))))
    (gap,) = result.gaps
    assert (gap.kind, gap.measure, gap.size, gap.node) == (GapKind.DOUBLE_OFFERED, "example.com/gpu", 2, "n3")


def test_plugin_only_and_dra_only_nodes_are_not_double_offered() -> None:
    result = report(*base(), node("n2", allocatable={"nvidia.com/gpu": "8"}),
                    node("n3", allocatable={"nvidia.com/gpu": "8"}),
                    resource_slice("n3", gpu("gpu-0"), driver="other.example.com"))
    assert gaps_of(result, GapKind.DOUBLE_OFFERED) == []
