"""`draq simulate` against the operator on the real control plane: from the starting snapshot it predicts
which groups are admitted in which wave (the first cycle, then after each group finishes) and on which
nodes and devices; the operator, with the real scheduler binding the pods, must do the same.

Groups finish in the order the simulation says (their declared run times differ): the test completes
the pods of the group the simulation finishes next, then waits for the operator's next admissions.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

from kubernetes import client

from admission.cli.main import main
from admission.core.labels import QUEUE_LABEL
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.test_closed_loop import member, template
from e2e.test_operator import GPU_CLASS, RunningOperator, apply, crds, pod_group, priority_class, queues, settings
from e2e.waiting import until

__all__ = ["crds"]

HOLDS_QUOTA = ("Admitted", "Running")


def predicted(control_plane: ControlPlane) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["simulate", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json", "--quiet"])
    assert status == 0, out.getvalue()
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def real_plan(api: Any, namespace: str, group: str) -> tuple[dict[str, str], dict[str, list[str]]] | None:
    """The nodes and the devices per claim the operator planned for `group`, once it is admitted."""
    record = pod_group(api, namespace, group) or {}
    status = record.get("status") or {}
    if status.get("phase") not in HOLDS_QUOTA:
        return None
    plan = status.get("plan") or {}
    return ({p["name"]: p["node"] for p in plan.get("pods") or []},
            {c["name"]: sorted(d["device"] for d in c.get("devices") or []) for c in plan.get("claims") or []})


def admitted_now(api: Any, namespace: str) -> set[str]:
    records: Any = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "draq.io", "v1alpha1", namespace, "podgroups")
    return {r["metadata"]["name"] for r in records["items"] if (r.get("status") or {}).get("phase") in HOLDS_QUOTA}


Group = tuple[str, str, int, int, int, str]  # name, LocalQueue, priority, members, GPUs per member, run time


def submit(control_plane: ControlPlane, namespace: str, groups: tuple[Group, ...]) -> None:
    """PodGroups (queue, run time) with their gated members, created in the order given; a priority above 0
    is given to the members by a PriorityClass of the namespace's."""
    for name, queue, priority, size, gpus, run_time in groups:
        group = {"apiVersion": "draq.io/v1alpha1", "kind": "PodGroup",
                 "metadata": {"name": name, "namespace": namespace, "annotations": {"draq.io/run-time": run_time}},
                 "spec": {"minMember": size, "queue": queue}}
        pods = [member(namespace, name, f"{name}-{i}", size, gpus) for i in range(size)]
        for pod in pods:
            pod["metadata"]["labels"][QUEUE_LABEL] = queue
            if priority:
                pod["spec"]["priorityClassName"] = priority_class(control_plane, f"{namespace}-{priority}", priority)
        apply(control_plane, group, template(namespace, name, gpus), *pods)


def test_the_operator_admits_what_the_simulation_predicted_in_the_same_waves_on_the_same_nodes(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        crds: None) -> None:
    # 2 nodes × 8 GPUs and a quota of 16 GPUs: groups wait for quota and for devices.
    for i in range(2):
        nodesim.add_node(f"sim-{unique}-{i}", "h100")
    queues(control_plane, namespace, unique, gpus=16)
    submit(control_plane, namespace, (("a", "lq", 0, 2, 4, "1m"), ("b", "lq", 0, 1, 8, "3m"),
                                      ("c", "lq", 0, 2, 2, "90s"), ("d", "lq", 0, 1, 6, "4m"),
                                      ("e", "lq", 0, 3, 4, "5m")))
    compare(control_plane, api, nodesim, namespace)


def test_two_queues_of_a_cohort_borrowing_and_a_higher_priority_agree_with_the_operator(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        crds: None) -> None:
    # Two ClusterQueues of 8 GPUs each in one cohort (they lend each other what they do not use), taking
    # turns at equal priority; a later group of higher priority goes first.
    for i in range(2):
        nodesim.add_node(f"coh-{unique}-{i}", "h100")
    unit, cohort = f"gpus-{unique}", f"cohort-{unique}"
    objects: list[dict[str, Any]] = [{"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": unit},
                                      "spec": {"devices": {"deviceClassNames": [GPU_CLASS]}}}]
    for side in ("x", "y"):
        objects.append({"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue",
                        "metadata": {"name": f"cq-{side}-{unique}"},
                        "spec": {"namespaceSelector": {}, "cohort": cohort, "quotas": [{"unit": unit, "nominal": 8}]}})
        objects.append({"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue",
                        "metadata": {"name": f"l{side}", "namespace": namespace},
                        "spec": {"clusterQueue": f"cq-{side}-{unique}"}})
    apply(control_plane, *objects)
    submit(control_plane, namespace, (("x1", "lx", 0, 2, 4, "70s"), ("y1", "ly", 0, 1, 8, "150s"),
                                      ("x2", "lx", 0, 1, 8, "3m"), ("y2", "ly", 0, 2, 2, "100s"),
                                      ("x3", "lx", 5, 1, 6, "4m"), ("y3", "ly", 0, 3, 4, "5m")))
    compare(control_plane, api, nodesim, namespace)


def compare(control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str) -> None:
    """Predict from the live snapshot, then run the operator and check every wave against the prediction."""
    simulation = predicted(control_plane)["simulation"]
    outcomes = {o["group"].split("/", 1)[1]: o for o in simulation["groups"] if o["group"].startswith(f"{namespace}/")}
    assert all(o["fate"] == "Admitted" for o in outcomes.values()), outcomes
    waves: dict[int, list[str]] = {}
    for name, o in outcomes.items():
        waves.setdefault(o["cycle"], []).append(name)
    assert len(waves) >= 3, f"the scenario must make groups wait for others to finish: {waves}"
    ends = [o["finishedAfterSeconds"] for o in outcomes.values()]
    assert len(set(ends)) == len(ends), f"one group finishes at a time, as the test finishes them: {ends}"
    print("predicted waves:", [sorted(names) for _, names in sorted(waves.items())])

    running = RunningOperator(settings(control_plane, namespace)).start()
    try:
        admitted: set[str] = set()  # admitted and not finished
        finished: set[str] = set()
        for cycle in sorted(waves):
            expected = set(waves[cycle])
            wanted = admitted | expected
            until(f"cycle {cycle}: {sorted(expected)} admitted", lambda: admitted_now(api, namespace),
                  accept=lambda now, wanted=wanted: now >= wanted, timeout=90)  # type: ignore[misc]
            assert admitted_now(api, namespace) - admitted == expected, "no other group is admitted in this wave"
            for name in sorted(expected):
                nodes = {p["pod"]: p["node"] for p in outcomes[name]["nodes"]}
                devices = {c["name"]: sorted(d["device"] for d in c["devices"]) for c in outcomes[name]["claims"]}
                assert real_plan(api, namespace, name) == (nodes, devices), f"group {name} on the predicted nodes " \
                    "with the predicted devices"
            admitted = wanted
            # Finish the groups the simulation ends before the next wave (all of them after the last), in its order.
            later = [c for c in sorted(waves) if c > cycle]
            start_next = outcomes[waves[later[0]][0]]["admittedAfterSeconds"] if later else float("inf")
            ending = sorted((o["finishedAfterSeconds"], name) for name, o in outcomes.items()
                            if name in admitted and o["finishedAfterSeconds"] is not None
                            and o["finishedAfterSeconds"] <= start_next)
            assert ending, f"the simulation admits wave {later[0] if later else '-'} only after a group finishes"
            for _, name in ending:
                finish(api, nodesim, namespace, name, outcomes[name])
                admitted.discard(name)
                finished.add(name)
        assert finished == set(outcomes) and not admitted
    finally:
        running.stop()
    assert running.error is None, running.error


def finish(api: Any, nodesim: NodeSimulator, namespace: str, group: str, outcome: dict[str, Any]) -> None:
    core = client.CoreV1Api(api)
    members = [p["pod"] for p in outcome["nodes"]]
    until(f"every member of {group} running", lambda: [core.read_namespaced_pod(m, namespace) for m in members],
          accept=lambda pods: all(p.spec and p.spec.node_name and p.status and p.status.phase == "Running"
                                     for p in pods), timeout=90)
    for name in members:
        nodesim.complete(namespace, name)
    until(f"{group} finished", lambda: pod_group(api, namespace, group),
          accept=lambda g: (g.get("status") or {}).get("phase") == "Finished", timeout=60)
