"""QuotaUnit, ClusterQueue, LocalQueue and PodGroup manifests: parsed, or refused naming the field."""

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from admission.core.errors import InvalidInput
from admission.core.quota import (
    Amounts,
    Counting,
    DraCel,
    Phase,
    QueueingStrategy,
    charge_status,
    compile_unit,
    device_selected,
    parse_cluster_queue,
    parse_local_queue,
    parse_pod_group,
    parse_quota_unit,
)
from admission.core.quota.policies import BorrowWithinCohort, PreemptionPolicy, Reclaim, WithinQueue
from tests.support.builders import (
    claim,
    cluster_queue,
    device,
    device_class,
    draq_object,
    exactly,
    models,
    pod_group,
    quota,
    quota_unit,
    resource_slice,
)

H100 = 'device.attributes["gpu.example.com"].model == "H100"'
EXAMPLES = Path(__file__).parents[3] / "examples" / "queues.yaml"


def unit(spec: dict[str, Any], name: str = "u") -> Any:
    return parse_quota_unit(quota_unit(name, spec))


def test_every_way_of_counting_parses() -> None:
    classes = {"deviceClassNames": ["gpu"]}
    assert unit({"devices": classes}).counting is Counting.DEVICES
    capacity = unit({"capacity": {**classes, "name": "gpu.example.com/memory"}})
    assert capacity.capacity == "gpu.example.com/memory"
    counters = unit({"counters": {**classes, "counter": "memory", "counterSet": "gpu-0"}})
    assert (counters.counter, counters.counter_set) == ("memory", "gpu-0")
    assert unit({"weight": {**classes, "expression": "1"}}).expression == "1"
    assert unit({"core": {"resource": "cpu"}}).resource == "cpu"


def test_extended_resources_default_to_counting_one() -> None:
    parsed = unit({"devices": {"deviceClassNames": ["gpu"]},
                   "extendedResources": [{"name": "nvidia.com/gpu"}, {"name": "x.io/y", "countsAs": "80Gi"}]})
    assert parsed.extended("nvidia.com/gpu").counts_as == 1  # type: ignore[union-attr]
    assert parsed.extended("x.io/y").counts_as == 80 * 2**30  # type: ignore[union-attr]
    assert parsed.describe() == "devices of gpu + nvidia.com/gpu, x.io/y"


@pytest.mark.parametrize(("spec", "field", "reason"), [
    ({}, "spec", "set exactly one way of counting"),
    ({"devices": {"deviceClassNames": ["g"]}, "core": {"resource": "cpu"}}, "spec", "found: devices, core"),
    ({"devices": {"deviceClassNames": []}}, "spec.devices.deviceClassNames", "at least one DeviceClass"),
    ({"capacity": {"deviceClassNames": ["g"]}}, "spec.capacity.name", "is required"),
    ({"core": {"resource": "cpu"}, "extendedResources": [{"name": "a/b"}]}, "spec.extendedResources",
     "counts pod requests directly"),
    ({"devices": {"deviceClassNames": ["g"]}, "extendedResources": [{"name": "a/b", "countsAs": "-1"}]},
     "spec.extendedResources[0].countsAs", "must not be negative"),
    ({"devices": {"deviceClassNames": ["g"]}, "extendedResources": [{"name": "a/b"}, {"name": "a/b"}]},
     "spec.extendedResources[1].name", "duplicate"),
])
def test_bad_units_name_the_field(spec: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason) as err:
        unit(spec, "bad")
    assert err.value.obj == "QuotaUnit bad" and err.value.field == field


def test_cel_that_does_not_compile_names_the_unit_and_field() -> None:
    bad = unit({"devices": {"deviceClassNames": ["gpu"], "selector": "device.attributes["}}, "gpus")
    with pytest.raises(InvalidInput, match="does not compile") as err:
        compile_unit(bad, DraCel())
    assert (err.value.obj, err.value.field) == ("QuotaUnit gpus", "spec.devices.selector")
    text = unit({"weight": {"deviceClassNames": ["gpu"], "expression": '"heavy"'}}, "w")
    with pytest.raises(InvalidInput, match="a weight must be a number") as err:
        compile_unit(text, DraCel())
    assert err.value.field == "spec.weight.expression"


def test_real_cel_selects_and_weighs_devices() -> None:
    weight = 'device.attributes["gpu.example.com"].model == "H100" ? 1.0 : 0.5'
    compiled = compile_unit(unit({"weight": {"deviceClassNames": ["gpu"], "expression": weight,
                                             "selector": 'device.driver == "gpu.example.com"'}}), DraCel())
    slice_, klass, claim_ = models(resource_slice("n", device("a", {"model": "A100"}), name="s", pool="p"),
                                   device_class("gpu"), claim("c", exactly("r", selector=H100), namespace="n"))
    a100 = slice_.devices[0]
    assert compiled.select is not None and compiled.select(a100)
    assert compiled.weigh is not None and compiled.weigh(a100) == 0.5
    selection = claim_.requests[0].exactly
    assert device_selected(a100, klass, selection) is False


def test_cluster_queue_parses_with_defaults() -> None:
    cq = parse_cluster_queue(cluster_queue("q", quota("gpus", 16, borrowing=4, lending="8"), quota("mem", "1Ti"),
                                           cohort="pool"))
    assert cq.strategy is QueueingStrategy.BEST_EFFORT_FIFO
    assert cq.quota("gpus").borrowing_limit.value == 4  # type: ignore[union-attr]
    assert cq.quota("mem").nominal.value == 2**40  # type: ignore[union-attr]
    assert cq.namespace_selector.matches({"any": "thing"})
    assert cq.preemption == PreemptionPolicy() and not cq.preemption.enabled
    assert cq.fair_sharing_weight == 1


def test_cluster_queue_policies_parse() -> None:
    spec = {"cohort": "pool", "fairSharing": {"weight": "1500m"},
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority",
                           "borrowWithinCohort": "LowerPriority", "minimumRunSeconds": 300}}
    cq = parse_cluster_queue(draq_object("ClusterQueue", "q", spec))
    assert cq.preemption == PreemptionPolicy(WithinQueue.LOWER_PRIORITY, Reclaim.LOWER_PRIORITY,
                                             BorrowWithinCohort.LOWER_PRIORITY, 300)
    assert cq.preemption.enabled and cq.fair_sharing_weight == Fraction(3, 2)


@pytest.mark.parametrize(("spec", "field", "reason"), [
    ({"quotas": [{"unit": "g", "nominal": -1}]}, "spec.quotas[0].nominal", "must not be negative"),
    ({"quotas": [{"unit": "g", "nominal": "lots"}]}, "spec.quotas[0].nominal", "is not a quantity"),
    ({"quotas": [{"unit": "g", "nominal": 1, "borrowingLimit": 1}]}, "spec.quotas[0].borrowingLimit",
     "needs spec.cohort"),
    ({"cohort": "c", "quotas": [{"unit": "g", "nominal": 1, "lendingLimit": 2}]}, "spec.quotas[0].lendingLimit",
     "exceeds nominal"),
    ({"quotas": [{"unit": "g", "nominal": 1}, {"unit": "g", "nominal": 2}]}, "spec.quotas[1].unit", "duplicate"),
    ({"queueingStrategy": "LIFO"}, "spec.queueingStrategy", "unknown strategy"),
    ({"preemption": {"withinClusterQueue": "Any"}}, "spec.preemption.withinClusterQueue", "unknown policy"),
    ({"preemption": {"reclaimWithinCohort": "Any"}}, "spec.preemption.reclaimWithinCohort", "needs spec.cohort"),
    ({"preemption": {"borrowWithinCohort": "Any"}}, "spec.preemption.borrowWithinCohort", "unknown policy"),
    ({"preemption": {"minimumRunSeconds": 10**9}}, "spec.preemption.minimumRunSeconds", "out of range"),
    ({"fairSharing": {"weight": "-0.5"}}, "spec.fairSharing.weight", "must not be negative"),
    ({"namespaceSelector": {"matchExpressions": [{"key": "k", "operator": "In"}]}},
     "spec.namespaceSelector.matchExpressions[0].values", "operator In needs at least one value"),
    ({"namespaceSelector": {"matchExpressions": [{"key": "k", "operator": "Bogus", "values": ["v"]}]}},
     "spec.namespaceSelector.matchExpressions[0].operator", "unknown operator 'Bogus'"),
])
def test_bad_cluster_queues_name_the_field(spec: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason) as err:
        parse_cluster_queue(draq_object("ClusterQueue", "bad", spec))
    assert err.value.obj == "ClusterQueue bad" and err.value.field == field


def test_namespace_selector_matches_labels_and_expressions() -> None:
    cq = parse_cluster_queue(cluster_queue("q", namespace_selector={
        "matchLabels": {"team": "a"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}))
    assert cq.namespace_selector.matches({"team": "a"})
    assert not cq.namespace_selector.matches({"team": "a", "tier": "x"})
    assert not cq.namespace_selector.matches({"team": "b"})


def test_wrong_kind_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"expected draq\.io/v1alpha1 LocalQueue"):
        parse_local_queue(cluster_queue("q"))


def test_pod_group_round_trips_its_recorded_charge() -> None:
    charge = Amounts.of({"gpus": 8, "gpu-memory": 640 * 2**30, "weight": Fraction(5, 2)})
    group = parse_pod_group(pod_group("g", 4, "training", namespace="research", status={
        "phase": "Admitted", "clusterQueue": "research", "charge": charge_status(charge, Amounts.of({"gpus": 2})),
        "plan": {"pods": [{"name": "p0", "node": "node-a"}],
                 "claims": [{"name": "c", "devices": [{"request": "gpu", "device": "d/p/gpu-0"}]}]}}))
    assert group.charge == charge and group.borrowed == Amounts.of({"gpus": 2})
    assert group.phase is Phase.ADMITTED and group.holds_quota
    assert group.plan.nodes == (("p0", "node-a"),)
    assert charge_status(charge)[0] == {"unit": "gpu-memory", "amount": "640Gi"}


def test_pod_group_errors_name_the_field() -> None:
    with pytest.raises(InvalidInput) as err:
        parse_pod_group(pod_group("g", 0, "q", namespace="ns"))
    assert err.value.field == "spec.minMember"
    with pytest.raises(InvalidInput, match="unknown phase") as err:
        parse_pod_group(pod_group("g", 1, "q", status={"phase": "Odd"}))


def test_the_example_parses_and_its_units_compile() -> None:
    documents = [d for d in yaml.safe_load_all(EXAMPLES.read_text()) if d]
    parsers = {"QuotaUnit": parse_quota_unit, "ClusterQueue": parse_cluster_queue,
               "LocalQueue": parse_local_queue, "PodGroup": parse_pod_group}
    parsed = [parsers[d["kind"]](d) for d in documents if d["kind"] in parsers]
    assert len(parsed) == 9
    for parsed_unit in (p for p in parsed if hasattr(p, "counting")):
        compile_unit(parsed_unit, DraCel())  # type: ignore[arg-type]
