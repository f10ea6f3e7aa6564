"""`draq simulate`'s core: cycles repeated with groups finishing, on small clusters one can check by hand."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from admission.core.cycle import WaitReason
from admission.core.features import gates_for
from admission.core.simulate import (
    Fate,
    SimulationSettings,
    declared_run_times,
    format_duration,
    parse_duration,
    render_table,
    simulate,
)
from admission.core.simulate.inputs import load, merged
from tests.support import builders as b

START = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
GATES = gates_for(None)


def cluster(nodes: int = 1, gpus: int = 8, quota: int = 16) -> list[dict[str, Any]]:
    """`nodes` nodes of `gpus` GPUs, one ClusterQueue `cq` (quota `quota` GPUs) and LocalQueue `lq`."""
    objects: list[dict[str, Any]] = [b.device_class("gpu"), b.namespace("default", {"draq.io/managed": "true"}),
                                     b.quota_unit("gpus", devices={"deviceClassNames": ["gpu"]}),
                                     b.cluster_queue("cq", b.quota("gpus", quota)), b.local_queue("lq", "cq")]
    for n in range(nodes):
        objects.append(b.node(f"node-{n}"))
        objects.append(b.resource_slice(f"node-{n}", *(b.gpu(f"gpu-{i}") for i in range(gpus))))
    return objects


def gang(name: str, members: int, gpus: int, *, created: str = b.CREATED, run_time: str | None = None,
         ) -> list[dict[str, Any]]:
    """A group of `members` pods of `gpus` GPUs each (one template), as submitted (no gate yet)."""
    pods = []
    for i in range(members):
        pod = b.pod(f"{name}-{i}", queue="lq", group=name, group_min=members, templates={"gpus": f"{name}-gpus"},
                    created=created)
        if run_time is not None:
            pod["metadata"]["annotations"] = {"draq.io/run-time": run_time}
        pods.append(pod)
    return [b.template(f"{name}-gpus", b.exactly("gpu", "gpu", gpus)), *pods]


def run(objects: list[dict[str, Any]], default_run_time: float | None = 3600.0, **settings: Any) -> Any:
    loaded = load(objects, GATES)
    return simulate(loaded.cluster, SimulationSettings(GATES, START, default_run_time, loaded.run_times, **settings))


def test_two_groups_compete_for_quota_the_first_runs_then_the_second() -> None:
    # Quota 8 GPUs, 16 on the nodes: each group needs 8, so only one fits the quota at a time.
    objects = [*cluster(nodes=2, quota=8), *gang("first", 2, 4, created="2026-01-01T00:00:00Z"),
               *gang("second", 2, 4, created="2026-01-01T00:00:01Z")]
    result = run(objects, default_run_time=600)
    first, second = result.outcome("default/first"), result.outcome("default/second")
    assert (first.fate, first.cycle, first.admitted_after, first.finished_after) == (Fate.ADMITTED, 1, 0.0, 600.0)
    assert (second.fate, second.cycle, second.admitted_after) == (Fate.ADMITTED, 2, 600.0)
    assert second.waited_cycles == 1
    assert first.charge.describe() == "gpus 8"
    assert [o.group for o in result.admitted] == ["default/first", "default/second"]
    assert result.stopped == "every group was admitted"


def test_a_group_that_finishes_frees_devices_for_the_next() -> None:
    # One node of 8 GPUs, quota plenty: a 6-GPU group and an 4-GPU group cannot share the node.
    objects = [*cluster(nodes=1, quota=100), *gang("big", 1, 6, created="2026-01-01T00:00:00Z", run_time="90m"),
               *gang("next", 1, 4, created="2026-01-01T00:00:01Z")]
    result = run(objects)
    big, nxt = result.outcome("default/big"), result.outcome("default/next")
    assert big.finished_after == 5400.0, "declared run time 90m"
    assert (nxt.cycle, nxt.admitted_after) == (2, 5400.0)
    assert nxt.nodes == (("next-0", "node-0"),)
    (claim,) = nxt.claims
    assert claim.claim == "next-0/gpus" and len(claim.devices) == 4
    assert all(device.startswith("gpu.example.com/node-0/gpu-") for _, device in claim.devices)


def test_a_group_that_can_never_be_placed_is_reported_with_why() -> None:
    objects = [*cluster(nodes=2, quota=100), *gang("giant", 1, 12)]
    result = run(objects)
    giant = result.outcome("default/giant")
    assert giant.fate is Fate.WAITING
    assert giant.reason == WaitReason.NEVER_FITS.value
    assert "wants 12" in giant.message
    assert result.stopped.startswith("nothing runs: 1 group(s) can never be admitted")
    assert "default/giant: NeverAdmissible:" in "\n".join(render_table(result))


def test_running_groups_in_the_snapshot_finish_after_what_is_left_of_their_run_time() -> None:
    # `held` was admitted 20 minutes before the snapshot with a run time of 30 minutes: 10 minutes left.
    admitted_at = (START - dt.timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"phase": "Admitted", "clusterQueue": "cq", "admittedAt": admitted_at,
              "charge": [{"unit": "gpus", "amount": "8"}],
              "plan": {"pods": [{"name": "held-0", "node": "node-0"}],
                       "claims": [{"name": "held-0/gpus", "devices": [
                           {"request": "gpu", "device": f"gpu.example.com/node-0/gpu-{i}"} for i in range(8)]}]}}
    held = gang("held", 1, 8, run_time="30m")
    group = b.pod_group("held", 1, "lq", status=status)
    objects = [*cluster(nodes=1, quota=8), *held, group, *gang("later", 1, 2, created="2026-01-01T00:00:05Z")]
    result = run(objects)
    assert result.outcome("default/held").fate is Fate.HELD
    assert result.outcome("default/held").finished_after == 600.0
    later = result.outcome("default/later")
    assert (later.cycle, later.admitted_after) == (2, 600.0)


def test_removing_the_node_of_a_held_group_ends_it_and_frees_its_quota() -> None:
    status = {"phase": "Running", "clusterQueue": "cq", "charge": [{"unit": "gpus", "amount": "8"}],
              "plan": {"pods": [{"name": "held-0", "node": "node-0"}]}}
    held = [*gang("held", 1, 8)[:1], {**b.pod("held-0", queue="lq", group="held", group_min=1, node="node-0",
                                               phase="Running", templates={"gpus": "held-gpus"})}]
    objects = [*cluster(nodes=2, quota=8), *held, b.pod_group("held", 1, "lq", status=status),
               *gang("next", 1, 8, created="2026-01-01T00:00:05Z")]
    simulated = load(objects, GATES).cluster
    settings = SimulationSettings(GATES, START, None)
    assert simulate(simulated, settings).outcome("default/next").reason == WaitReason.QUOTA.value
    smaller, ended = simulated.without_nodes(["node-0"], drain=False)
    assert ended == ("default/held",)
    assert simulate(smaller, settings).outcome("default/next").nodes == (("next-0", "node-1"),)


def test_with_runs_that_never_end_the_queue_stops_at_what_fits() -> None:
    objects = [*cluster(nodes=1, quota=100), *(x for n in range(3) for x in gang(f"g{n}", 1, 4))]
    result = run(objects, default_run_time=None)
    assert [o.group for o in result.admitted] == ["default/g0", "default/g1"]
    assert [o.group for o in result.waiting] == ["default/g2"]
    assert result.cycles == 1


def test_a_job_becomes_a_gang_of_its_parallelism_and_a_pod_group_annotation_declares_its_run_time() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "default", "annotations": {"draq.io/run-time": "2h"}},
           "spec": {"parallelism": 2, "completions": 2, "template": {
               "metadata": {"labels": {"draq.io/queue": "lq"}},
               "spec": {"containers": [{"name": "main", "resources": {"claims": [{"name": "gpus"}]}}],
                        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "train-gpus"}]}}}}
    objects = [*cluster(nodes=1, quota=100), b.template("train-gpus", b.exactly("gpu", "gpu", 4)), job]
    loaded = load(objects, GATES)
    (group,) = loaded.cluster.groups()
    assert group.key == "default/train" and group.min_member == 2 and len(group.gated) == 2
    assert loaded.run_times == {"default/train": 7200.0}
    result = simulate(loaded.cluster, SimulationSettings(GATES, START, 60.0, loaded.run_times))
    assert result.outcome("default/train").finished_after == 7200.0


def test_added_workloads_and_quota_changes_on_top_of_a_snapshot() -> None:
    base = load(cluster(nodes=1, quota=4), GATES, submitted=False)
    added = load(gang("extra", 1, 8), GATES, namespace_labels=base.cluster.namespace_labels)
    simulated = merged(base, added).cluster
    settings = SimulationSettings(GATES, START, None)
    assert simulate(simulated, settings).outcome("default/extra").reason == WaitReason.NEVER_FITS.value  # 8 > 4
    raised = simulated.with_quota("cq", "gpus", "8")
    assert simulate(raised, settings).outcome("default/extra").fate is Fate.ADMITTED


def test_a_removed_node_takes_its_devices_and_running_groups_with_it() -> None:
    simulated = load([*cluster(nodes=2, quota=100), *gang("a", 2, 8)], GATES).cluster
    settings = SimulationSettings(GATES, START, None)
    assert simulate(simulated, settings).outcome("default/a").fate is Fate.ADMITTED
    smaller, ended = simulated.without_nodes(["node-1"], drain=False)
    assert ended == ()
    waiting = simulate(smaller, settings).outcome("default/a")
    assert waiting.fate is Fate.WAITING and waiting.reason == WaitReason.NEVER_FITS.value  # one node is too few
    drained, _ = simulated.without_nodes(["node-1"], drain=True)
    assert simulate(drained, settings).outcome("default/a").fate is Fate.WAITING


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90.0), ("30m", 1800.0), ("1h30m", 5400.0), ("2d", 172800.0),
                                               ("45", 45.0), ("never", None)])
def test_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_a_bad_duration_is_refused_and_durations_print_back() -> None:
    with pytest.raises(Exception, match="not a duration"):
        parse_duration("soon")
    assert format_duration(5400) == "1h30m" and format_duration(0) == "0s"
    pod = b.pod("x", queue="lq", group="g")
    pod["metadata"]["annotations"] = {"draq.io/run-time": "1h"}
    other = b.pod("y", queue="lq", group="g")
    other["metadata"]["annotations"] = {"draq.io/run-time": "2h"}
    assert declared_run_times([pod, other]) == {"default/g": 7200.0}
