"""Core units count pod requests as the scheduler and ResourceQuota do: sidecars, overhead, pod-level resources."""

from __future__ import annotations

from fractions import Fraction

from tests.support.builders import container, pod, with_spec
from tests.unit.quota.charging_harness import NS, charge


def test_sidecars_and_overhead_are_charged() -> None:
    # containers 1 + sidecar 500m + overhead 250m = 1750m; the 1-cpu init container runs next to the sidecar
    # (1.5 cpu), below that.
    manifest = with_spec(pod("p0", NS), containers=[container(requests={"cpu": "1"})],
                         initContainers=[container("proxy", requests={"cpu": "500m"}, restart_policy="Always"),
                                         container("setup", requests={"cpu": "1"})],
                         overhead={"cpu": "250m"})
    assert charge([manifest]).total.get("cpu") == Fraction(7, 4)


def test_pod_level_requests_are_charged_instead_of_the_containers() -> None:
    manifest = with_spec(pod("p0", NS), containers=[container(requests={"cpu": "1"})], resources={
        "requests": {"cpu": "3"}})
    assert charge([manifest]).total.get("cpu") == 3
