"""Node filters end to end on one pod and one node: the first failing filter, in the scheduler's words."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from admission.core.models import Node, Pod
from admission.core.nodefit import NodeFacts, NodeFitIndex, NodeUsage, PodFit, resource_reasons, static_reason
from tests.support.builders import (
    NAMESPACE,
    container,
    device_class,
    model,
    models,
    node,
    node_affinity,
    pod,
    requirement,
    taint,
    toleration,
    with_spec,
)

ALLOCATABLE = {"cpu": "4", "memory": "8Gi", "pods": "3", "nvidia.com/gpu": "2"}


def node_facts(name: str = "n1", labels: dict[str, str] | None = None, *, allocatable: dict[str, str] | None = None,
               **spec: Any) -> NodeFacts:
    parsed = model(with_spec(node(name, labels, allocatable=allocatable), **spec))
    assert isinstance(parsed, Node)
    return NodeFacts.of(parsed)


def pod_fit(requests: dict[str, str] | None = None, **spec: Any) -> PodFit:
    manifest = with_spec(pod("p"), **spec)
    if requests is not None:
        manifest = with_spec(manifest, containers=[container(requests=requests)])
    parsed = model(manifest)
    assert isinstance(parsed, Pod)
    return PodFit.of(parsed)


def test_a_plain_pod_fits_a_plain_node() -> None:
    assert static_reason(pod_fit(), node_facts()) is None


def test_cordoned_node_needs_the_unschedulable_toleration() -> None:
    cordoned = node_facts(unschedulable=True)
    assert static_reason(pod_fit(), cordoned) == "node(s) were unschedulable"
    tolerant = pod_fit(tolerations=[toleration("node.kubernetes.io/unschedulable", operator="Exists",
                                               effect="NoSchedule")])
    assert static_reason(tolerant, cordoned) is None


def test_untolerated_taint_is_named() -> None:
    tainted = node_facts(taints=[taint("spot", effect="PreferNoSchedule"), taint("gpu", "true")])
    assert static_reason(pod_fit(), tainted) == "node(s) had untolerated taint {gpu: true}"
    assert static_reason(pod_fit(tolerations=[toleration("gpu", "true")]), tainted) is None


def test_selector_and_affinity_mismatch() -> None:
    zone_a = node_facts(labels={"zone": "a"})
    assert static_reason(pod_fit(nodeSelector={"zone": "b"}), zone_a) == \
        "node(s) didn't match Pod's node affinity/selector"
    assert static_reason(pod_fit(affinity=node_affinity([requirement("zone", "In", "b")])), zone_a) == \
        "node(s) didn't match Pod's node affinity/selector"
    assert static_reason(pod_fit(affinity=node_affinity([requirement("zone", "In", "a")])), zone_a) is None


def test_filters_report_in_the_schedulers_order() -> None:
    everything_wrong = node_facts(labels={"zone": "a"}, unschedulable=True, taints=[taint("gpu", "true")])
    assert static_reason(pod_fit(nodeSelector={"zone": "b"}), everything_wrong) == "node(s) were unschedulable"


def test_resources_next_to_what_is_used() -> None:
    facts = node_facts(allocatable=ALLOCATABLE)
    fit = pod_fit({"cpu": "3", "memory": "4Gi", "nvidia.com/gpu": "1"})
    assert resource_reasons(fit, facts, {}) == []
    used = {"cpu": 1500, "memory": 4 * 2**30, "nvidia.com/gpu": 2, "pods": 2}
    # cpu: 3000 > 4000 - 1500; memory: 4Gi fits exactly in 8Gi - 4Gi; gpu: 1 > 2 - 2; pods: 2 + 1 <= 3.
    assert resource_reasons(fit, facts, used) == ["Insufficient cpu", "Insufficient nvidia.com/gpu"]
    assert resource_reasons(pod_fit(), facts, {"pods": 3}) == ["Too many pods"]


def test_a_resource_the_node_does_not_list_is_zero() -> None:
    facts = node_facts(allocatable={"cpu": "4", "pods": "10"})
    assert resource_reasons(pod_fit({"example.com/fpga": "1", "ephemeral-storage": "1Gi"}), facts, {}) == [
        "Insufficient ephemeral-storage", "Insufficient example.com/fpga"]


def test_nodes_listing_no_allocatable_are_not_resource_checked_nor_pods_without_a_pods_figure() -> None:
    assert resource_reasons(pod_fit({"cpu": "1000"}), node_facts(), {"pods": 500}) == []
    assert resource_reasons(pod_fit(), node_facts(allocatable={"cpu": "1"}), {"pods": 500}) == []


def test_skipped_resources_are_not_checked() -> None:
    facts = node_facts(allocatable={"cpu": "4"})
    assert resource_reasons(pod_fit({"example.com/gpu": "1"}), facts, {}, skipped=("example.com/gpu",)) == []


def test_usage_of_bound_pods_leaves_out_terminated_and_unbound_pods() -> None:
    bound = [with_spec(pod(f"p{i}", node="n1", phase=phase), containers=[container(requests={"cpu": "1"})])
             for i, phase in enumerate(["Running", "Pending", "Succeeded", "Failed"])]
    unbound = with_spec(pod("q"), containers=[container(requests={"cpu": "8"})])
    usage = NodeUsage.of_pods(p for p in models(*bound, unbound) if isinstance(p, Pod))
    assert usage.on("n1") == {"cpu": 2000, "pods": 2}
    assert usage.on("n2") == {}
    more = usage.plus("n1", {"cpu": 500, "memory": 1})
    assert more.on("n1") == {"cpu": 2500, "memory": 1, "pods": 3}
    assert usage.on("n1") == {"cpu": 2000, "pods": 2}  # unchanged: usages are values


def test_index_reasons_and_dra_served_extended_resources() -> None:
    objects = models(node("plugin", allocatable={"cpu": "4", "example.com/gpu": "4"}),
                     node("dra", allocatable={"cpu": "4"}),
                     device_class("gpu", extended_resource="example.com/gpu"),
                     with_spec(pod("busy", node="plugin"), containers=[container(requests={"cpu": "4"})]))
    index = NodeFitIndex(*(tuple(m for m in objects if isinstance(m, kind)) for kind in (Node, Pod)),
                         [m for m in objects if not isinstance(m, Node | Pod)])
    fit = pod_fit({"cpu": "1", "example.com/gpu": "1"})
    assert index.reasons(fit, "plugin") == ["Insufficient cpu"]
    # Without DRAExtendedResource the resource must be in allocatable; with it, DRA devices would serve it.
    assert index.reasons(fit, "dra") == ["Insufficient example.com/gpu"]
    assert index.dra_served(fit, index.nodes["dra"]) == ("example.com/gpu",)
    assert index.dra_served(fit, index.nodes["plugin"]) == ()
    assert index.reasons(fit, "dra", extended_resource=True) == []  # left to the allocator
    assert index.dra_classes["example.com/gpu"].name == "gpu"
    implicit = pod_fit({"deviceclass.resource.kubernetes.io/gpu": "1"})
    assert index.dra_served(implicit, index.nodes["dra"]) == ("deviceclass.resource.kubernetes.io/gpu",)


def test_static_filter_answers_once_per_kind_of_pod() -> None:
    objects = models(with_spec(node("a"), taints=[taint("gpu", "true")]), node("b"), with_spec(node("c"),
                                                                                                unschedulable=True))
    index = NodeFitIndex([m for m in objects if isinstance(m, Node)])
    nodes, rejected = index.static_filter(pod_fit())
    assert nodes == ("b",)
    assert rejected == {"a": "node(s) had untolerated taint {gpu: true}", "c": "node(s) were unschedulable"}
    assert index.static_filter(pod_fit()) is index.static_filter(pod_fit())
    assert index.static_filter(pod_fit(tolerations=[toleration("gpu", "true")]))[0] == ("a", "b")


def test_usage_is_recounted_for_changed_pods_and_reused_for_the_same_ones() -> None:
    def bound(cpu: str) -> Pod:
        parsed = model(with_spec(pod("web", node="n1", phase="Running"), containers=[container(requests={"cpu": cpu})]))
        assert isinstance(parsed, Pod)
        return parsed

    same = bound("1")
    assert NodeUsage.of_pods([same]).on("n1") == {"cpu": 1000, "pods": 1}
    assert NodeUsage.of_pods([same]).on("n1") == {"cpu": 1000, "pods": 1}
    assert NodeUsage.of_pods([bound("3")]).on("n1") == {"cpu": 3000, "pods": 1}


def test_minus_all_is_minus_pod_by_pod() -> None:
    rng = random.Random(7)
    for _ in range(50):
        base = {f"n{i}": {"cpu": rng.randint(0, 4000), "memory": rng.randint(0, 8), "pods": rng.randint(0, 5)}
                for i in range(3)}
        usage = NodeUsage(base).plus("n0", {"cpu": 500})
        pods = [(f"n{rng.randint(0, 3)}", {"cpu": rng.randint(0, 2000), "memory": rng.randint(0, 4)})
                for _ in range(rng.randint(0, 12))]
        one_by_one = usage
        for name, requests in pods:
            one_by_one = one_by_one.minus(name, requests)
        at_once = usage.minus_all(pods)
        assert all(at_once.on(f"n{i}") == one_by_one.on(f"n{i}") for i in range(4))
        assert usage.on("n1") == base["n1"]  # the usage it was made from is unchanged


_POD_STATES = st.tuples(st.sampled_from([None, "n0", "n1", "n2"]), st.sampled_from(["Running", "Pending", "Succeeded"]),
                        st.sampled_from(["1", "2", "500m"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 7), st.none() | _POD_STATES), min_size=1, max_size=4),
                min_size=1, max_size=12),
       st.booleans())
def test_updated_usage_is_the_usage_summed_afresh(steps: list[list[tuple[int, Any]]], keys_given: bool) -> None:
    """Random changes (a pod added, moved, finished, resized or deleted): the usage kept by node, pod by pod,
    is the one summed over every pod, and the usages it was made from are unchanged."""
    def bound(index: int, node_name: str | None, phase: str, cpu: str) -> Pod:
        parsed = model(pod(f"p{index}", node=node_name, phase=phase, requests={"cpu": cpu}))
        assert isinstance(parsed, Pod)
        return parsed

    nodes = ("n0", "n1", "n2")
    pods: dict[str, Pod] = {}
    usage = NodeUsage.of_pods(pods.values())
    history: list[tuple[NodeUsage, dict[str, dict[str, int]]]] = []
    for step in steps:
        after = dict(pods)
        for index, state in step:
            key = f"{NAMESPACE}/p{index}"
            if state is None:
                after.pop(key, None)
            else:
                after[key] = bound(index, *state)
        changed = {key for key in pods.keys() | after.keys() if pods.get(key) is not after.get(key)}
        usage = usage.updated(pods, after, changed if keys_given else None)
        fresh = NodeUsage.of_pods(after.values())
        assert {n: dict(usage.on(n)) for n in nodes} == {n: dict(fresh.on(n)) for n in nodes}
        history.append((usage, {n: dict(usage.on(n)) for n in nodes}))
        pods = after
    for earlier, seen in history:
        assert {n: dict(earlier.on(n)) for n in nodes} == seen
