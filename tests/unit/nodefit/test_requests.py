"""Pod requests as the scheduler counts them: each case small enough to check by hand."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from admission.core.models import Pod
from admission.core.nodefit import (
    NodeUsage,
    container_requests,
    is_scalar_resource,
    pod_amounts,
    pod_requests,
    scheduler_amounts,
)
from tests.support.builders import container, model, pod, with_spec


def parsed(**spec: Any) -> Pod:
    result = model(with_spec(pod("p"), **spec))
    assert isinstance(result, Pod)
    return result


def amounts(**spec: Any) -> dict[str, int]:
    return scheduler_amounts(pod_requests(parsed(**spec)))


def test_regular_containers_are_summed() -> None:
    assert amounts(containers=[container("a", requests={"cpu": "1", "memory": "1Gi"}),
                               container("b", requests={"cpu": "500m"})]) == {"cpu": 1500, "memory": 2**30}


def test_a_limit_without_request_is_the_request() -> None:
    # cpu: request 1 given; memory: only a limit, so the request is the limit.
    (only,) = parsed(containers=[container(requests={"cpu": "1"}, limits={"cpu": "2", "memory": "2Gi"})]).containers
    assert container_requests(only) == {"cpu": Fraction(1), "memory": Fraction(2 * 2**30)}


def test_init_containers_count_by_their_peak() -> None:
    # Upstream's example: init 2 cpu/1G and 2 cpu/3G, containers 2 cpu/1G + 1 cpu/1G -> 3 cpu, 3G.
    spec = {"initContainers": [container("i1", requests={"cpu": "2", "memory": "1G"}),
                               container("i2", requests={"cpu": "2", "memory": "3G"})],
            "containers": [container("c1", requests={"cpu": "2", "memory": "1G"}),
                           container("c2", requests={"cpu": "1", "memory": "1G"})]}
    assert amounts(**spec) == {"cpu": 3000, "memory": 3 * 10**9}


def test_sidecars_run_next_to_the_containers_and_the_later_init_containers() -> None:
    # sidecar 1 cpu started first; then init 4 cpu runs next to it (peak 5); containers 2 cpu + sidecar 1 = 3.
    spec = {"initContainers": [container("proxy", requests={"cpu": "1"}, restart_policy="Always"),
                               container("setup", requests={"cpu": "4"})],
            "containers": [container(requests={"cpu": "2"})]}
    assert amounts(**spec) == {"cpu": 5000}
    # an init container before the sidecar runs alone: its 4 beats the 2 + 1 running after it.
    spec["initContainers"] = list(reversed(spec["initContainers"]))
    assert amounts(**spec) == {"cpu": 4000}
    spec["initContainers"] = [container("setup", requests={"cpu": "2"}),
                              container("proxy", requests={"cpu": "1"}, restart_policy="Always")]
    assert amounts(**spec) == {"cpu": 3000}


def test_overhead_is_added() -> None:
    assert amounts(containers=[container(requests={"cpu": "1"})], overhead={"cpu": "250m", "memory": "100Mi"}) == {
        "cpu": 1250, "memory": 100 * 2**20}


def test_pod_level_requests_replace_cpu_and_memory_only() -> None:
    spec = {"containers": [container(requests={"cpu": "1", "memory": "1Gi", "example.com/gpu": "1"})],
            "resources": {"requests": {"cpu": "3"}}}
    assert amounts(**spec) == {"cpu": 3000, "memory": 2**30, "example.com/gpu": 1}


def test_pod_level_requests_default_from_containers_then_from_pod_limits() -> None:
    # memory: containers request 1Gi, so the pod-level request is 1Gi (not the 4Gi limit); cpu: no
    # container asks for it, so the pod-level request is the pod-level limit 2.
    spec = {"containers": [container(requests={"memory": "1Gi"})],
            "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}
    assert amounts(**spec) == {"cpu": 2000, "memory": 2**30}


def test_scheduler_units_round_up_and_skip_what_it_does_not_track() -> None:
    values = {"cpu": Fraction(1, 3000), "memory": Fraction(1, 2), "ephemeral-storage": Fraction(10),
              "nvidia.com/gpu": Fraction(2), "hugepages-2Mi": Fraction(4), "pods": Fraction(1), "storage": Fraction(5),
              "example.com/zero": Fraction(0)}
    assert scheduler_amounts(values) == {"cpu": 1, "memory": 1, "ephemeral-storage": 10, "nvidia.com/gpu": 2,
                                         "hugepages-2Mi": 4}


def test_scalar_resource_names() -> None:
    assert is_scalar_resource("nvidia.com/gpu")
    assert is_scalar_resource("deviceclass.resource.kubernetes.io/gpu")
    assert is_scalar_resource("hugepages-1Gi") and is_scalar_resource("attachable-volumes-csi-x")
    assert not is_scalar_resource("cpu") and not is_scalar_resource("storage")
    assert not is_scalar_resource("requests.nvidia.com/gpu")


def test_pod_amounts_are_the_scheduler_amounts_counted_or_not() -> None:
    bound = model(pod("bound", node="n1", requests={"cpu": "1500m", "memory": "1Gi"},
                      init_requests={"cpu": "2"}))
    other = model(pod("other", requests={"cpu": "250m"}))
    assert isinstance(bound, Pod) and isinstance(other, Pod)
    NodeUsage.of_pods([bound])  # counts the bound pod and keeps its amounts
    for one in (bound, other):
        assert pod_amounts(one) == scheduler_amounts(pod_requests(one))
    assert pod_amounts(bound)["cpu"] == 2000 and pod_amounts(other)["cpu"] == 250
