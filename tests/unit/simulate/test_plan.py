"""The node plan: the fewest added nodes of given profiles that let the waiting groups run."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from admission.core.cycle import WaitReason
from admission.core.features import gates_for
from admission.core.models import Model, parse_object
from admission.core.simulate import SimulationSettings
from admission.core.simulate.inputs import load
from admission.core.simulate.plan import plan_nodes
from tests.support import builders as b
from tests.unit.simulate.test_simulate import cluster, gang

START = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
GATES = gates_for(None)
SETTINGS = SimulationSettings(GATES, START, None)


def maker(sizes: dict[str, int]) -> Any:
    """Profiles by GPU count: `small` nodes of 4 GPUs, `big` of 8, and so on."""
    def make(profile: str, index: int) -> Sequence[Model]:
        name = f"add-{profile}-{index}"
        return [parse_object(b.node(name)),
                parse_object(b.resource_slice(name, *(b.gpu(f"gpu-{i}") for i in range(sizes[profile]))))]
    return make


def test_three_waiting_groups_of_eight_need_exactly_three_nodes_of_eight() -> None:
    # Cluster of one 8-GPU node already used by `running`; three more groups of 8 GPUs each wait.
    objects = [*cluster(nodes=1, quota=100), *gang("running", 1, 8),
               *(x for n in range(3) for x in gang(f"w{n}", 1, 8, created=f"2026-01-01T00:00:0{n + 1}Z"))]
    simulated = load(objects, GATES).cluster
    plan = plan_nodes(simulated, SETTINGS, ["big"], maker({"big": 8}))
    assert dict(plan.counts) == {"big": 3}
    assert set(plan.admitted) == {"default/w0", "default/w1", "default/w2"} and not plan.unplannable
    used = {o.nodes[0][1] for o in plan.result.admitted}
    assert used == {"node-0", "add-big-0", "add-big-1", "add-big-2"}


def test_the_smaller_profile_needs_twice_as_many_and_the_bigger_one_wins() -> None:
    objects = [*cluster(nodes=0, quota=100), *(x for n in range(2) for x in gang(f"w{n}", 2, 4))]
    simulated = load(objects, GATES).cluster
    assert dict(plan_nodes(simulated, SETTINGS, ["small"], maker({"small": 4})).counts) == {"small": 4}
    both = plan_nodes(simulated, SETTINGS, ["small", "big"], maker({"small": 4, "big": 8}))
    assert dict(both.counts) == {"small": 0, "big": 2}
    assert both.total == 2


def test_a_request_larger_than_any_profile_and_a_quota_wait_are_reported_not_planned_for() -> None:
    # Quota 24: `fits` takes 8; `huge` (16 GPUs in one pod) fits the quota but no 8-GPU node; `over-quota`
    # (24) does not fit what is left of the quota, whatever the nodes.
    objects = [*cluster(nodes=0, quota=24), *gang("fits", 1, 8), *gang("huge", 1, 16),
               *gang("over-quota", 3, 8, created="2026-01-01T00:00:09Z")]
    simulated = load(objects, GATES).cluster
    plan = plan_nodes(simulated, SETTINGS, ["big"], maker({"big": 8}))
    assert dict(plan.counts) == {"big": 1}
    assert plan.admitted == ("default/fits",)
    reasons = {o.group: o.reason for o in plan.unplannable}
    assert reasons == {"default/huge": WaitReason.DEVICES.value, "default/over-quota": WaitReason.QUOTA.value}
    text = "\n".join(plan.lines())
    assert "add 1 × big (1 node(s))" in text and "default/huge: DevicesUnavailable:" in text


def test_named_targets_count_the_groups_ahead_of_them_in_the_queue() -> None:
    objects = [*cluster(nodes=0, quota=100), *gang("a", 1, 8), *gang("b", 1, 8)]
    simulated = load(objects, GATES).cluster
    first = plan_nodes(simulated, SETTINGS, ["big"], maker({"big": 8}), targets=["default/a"])
    assert dict(first.counts) == {"big": 1} and first.admitted == ("default/a",)
    # `a` is ahead of `b` (same time, key order) and takes the first node added.
    second = plan_nodes(simulated, SETTINGS, ["big"], maker({"big": 8}), targets=["default/b"])
    assert dict(second.counts) == {"big": 2} and second.admitted == ("default/b",)


def test_a_horizon_lets_running_groups_finish_first_and_fewer_nodes_are_needed() -> None:
    # One 8-GPU node: `first` (30 min) runs, `second` waits. At once it needs a node; within an hour, none.
    objects = [*cluster(nodes=1, quota=100), *gang("first", 1, 8, run_time="30m"),
               *gang("second", 1, 8, created="2026-01-01T00:00:05Z", run_time="30m")]
    simulated = load(objects, GATES).cluster
    settings = SimulationSettings(GATES, START, None, load(objects, GATES).run_times)
    assert dict(plan_nodes(simulated, settings, ["big"], maker({"big": 8})).counts) == {"big": 1}
    assert plan_nodes(simulated, settings, ["big"], maker({"big": 8}), within=3600).targets == (), \
        "no group waits beyond the hour"
    later = plan_nodes(simulated, settings, ["big"], maker({"big": 8}), targets=["default/second"], within=3600)
    assert dict(later.counts) == {"big": 0} and later.admitted == ("default/second",)
    assert later.result.outcome("default/second").admitted_after == 1800.0
