"""Group-level differential test: draq decides which gangs run and where; the real kube-scheduler then
places the released pods with no test-side pinning.

For every admitted group every member must be bound on the node draq planned. For every group draq
keeps waiting, the test releases it without draq (removing the gate by hand, one group at a time) and
checks that the scheduler cannot bind all of its members at once either. Trials come from
`tests/e2e/gang_trials.py`, seeded from DRAQ_DIFF_SEED (fixed by default; printed).
"""

from __future__ import annotations

import os
import time
from typing import Any

from kubernetes import client

from admission.core.labels import GATE
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from tests.e2e import gang_trials
from tests.e2e.gang_trials import TAINT, TRIAL_LABEL, ZONE_LABEL, Trial
from tests.e2e.scenarios import seed_from_environment
from tests.e2e.test_operator import RunningOperator, apply, crds, pod_group, queues, settings
from tests.e2e.waiting import until

__all__ = ["crds"]
TRIALS = int(os.environ.get("DRAQ_GANG_TRIALS", "3"))
SETTLE = 25.0  # seconds the scheduler gets to bind a released group


def build_nodes(api: Any, nodesim: NodeSimulator, trial: Trial) -> None:
    core = client.CoreV1Api(api)
    for node in trial.nodes:
        nodesim.add_node(node.name, "h100")
        spec: dict[str, Any] = {"taints": [TAINT]} if node.tainted else {}
        core.patch_node(node.name, {"metadata": {"labels": {TRIAL_LABEL: trial.id, ZONE_LABEL: node.zone}},
                                    "spec": spec})
        status = core.read_node_status(node.name).status
        allocatable = {**status.allocatable, "cpu": node.cpu}
        core.patch_node_status(node.name, {"status": {"allocatable": allocatable,
                                                      "capacity": {**status.capacity, "cpu": node.cpu}}})


def place_fillers(control_plane: ControlPlane, api: Any, trial: Trial, namespace: str) -> None:
    core = client.CoreV1Api(api)
    fillers = [n for n in trial.nodes if n.filler_gpus]
    for node in fillers:
        apply(control_plane, *gang_trials.filler(node, namespace))
    for node in fillers:
        until(f"filler on {node.name} running", lambda n=node: core.read_namespaced_pod(f"{n.name}-filler", namespace),
              accept=lambda p: p.status.phase == "Running", timeout=60)


def decided(api: Any, namespace: str, group: str) -> dict[str, Any] | None:
    """The group's record once draq has admitted it or said why it waits (beyond missing members)."""
    record = pod_group(api, namespace, group)
    status = (record or {}).get("status") or {}
    if status.get("phase") in ("Admitted", "Running"):
        return record
    conditions = status.get("conditions") or []
    if any(c.get("reason") not in (None, "Incomplete") for c in conditions):
        return record
    return None


def verdicts(core: Any, namespace: str, members: list[str]) -> list[Any]:
    return [core.read_namespaced_pod(m, namespace) for m in members]


def settled(pods: list[Any]) -> bool:
    """Every member bound, or found unschedulable by the scheduler."""
    def done(pod: Any) -> bool:
        conditions = pod.status.conditions or []
        return bool(pod.spec.node_name) or any(
            c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable" for c in conditions)
    return all(done(p) for p in pods)


def release_by_hand(core: Any, namespace: str, members: list[str]) -> None:
    for name in members:
        pod = core.read_namespaced_pod(name, namespace)
        gates = [g.name for g in pod.spec.scheduling_gates or []]
        if GATE in gates:
            index = gates.index(GATE)
            core.patch_namespaced_pod(name, namespace, [{"op": "remove", "path": f"/spec/schedulingGates/{index}"}])


def run_trial(control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, trial: Trial, namespace: str,
              unique: str) -> list[str]:
    core = client.CoreV1Api(api)
    build_nodes(api, nodesim, trial)
    place_fillers(control_plane, api, trial, namespace)
    running = RunningOperator(settings(control_plane, namespace, lease=f"draq-{trial.id}")).start()
    problems: list[str] = []
    try:
        for group in trial.groups:
            apply(control_plane, *group.manifests(namespace, trial.id))
        records = {g.name: until(f"draq's decision on {g.name}", lambda g=g: decided(api, namespace, g.name),
                                 timeout=90) for g in trial.groups}
        admitted = [g for g in trial.groups if records[g.name]["status"].get("phase") in ("Admitted", "Running")]
        for group in admitted:
            planned = {p["name"]: p["node"] for p in records[group.name]["status"]["plan"]["pods"]}
            members = [f"{group.name}-{i}" for i in range(group.size)]
            try:
                pods = until(f"{group.name} bound", lambda m=members: verdicts(core, namespace, m),
                             accept=lambda ps: all(p.spec.node_name for p in ps), timeout=60)
            except AssertionError:
                problems.append(f"{group.name}: admitted by draq but not all bound by the scheduler")
                continue
            off = {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name != planned[p.metadata.name]}
            if off:
                problems.append(f"{group.name}: bound off the plan {off} (planned {planned})")
    finally:
        running.stop()
    assert running.error is None, running.error
    waiting = [g for g in trial.groups if g.name not in {a.name for a in admitted}]
    for group in waiting:
        members = [f"{group.name}-{i}" for i in range(group.size)]
        release_by_hand(core, namespace, members)
        deadline = time.monotonic() + SETTLE
        pods = verdicts(core, namespace, members)
        while not settled(pods) and time.monotonic() < deadline:
            time.sleep(0.5)
            pods = verdicts(core, namespace, members)
        if all(p.spec.node_name for p in pods):
            reason = (records[group.name]["status"].get("conditions") or [{}])[0].get("message", "")
            problems.append(f"{group.name}: draq keeps it waiting ({reason}) but the scheduler bound every member")
        for name in members:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        until(f"{group.name}'s pods gone", lambda m=members: [
            p for p in core.list_namespaced_pod(namespace).items if p.metadata.name in m], accept=lambda ps: not ps,
            timeout=60)
    print(f"trial {trial.id} (seed {trial.seed}): {len(admitted)} admitted, {len(waiting)} waiting, "
          f"{len(problems)} disagreements")
    return problems


def test_the_scheduler_binds_exactly_the_groups_draq_admits_where_draq_planned(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        crds: None) -> None:
    seed = seed_from_environment()
    queues(control_plane, namespace, unique, gpus=10_000)  # quota is never the limit here
    problems: list[str] = []
    for index in range(TRIALS):
        trial = gang_trials.generate(seed * 1000 + index)
        problems += run_trial(control_plane, api, nodesim, trial, namespace, unique)
    print(f"\ngroup-level differential: {TRIALS} trials from seed {seed}, {len(problems)} disagreements")
    assert problems == [], "\n".join(problems)
