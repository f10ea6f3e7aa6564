"""Group-level differential test: draq decides which gangs run and where; the real kube-scheduler then
places the released pods with no test-side pinning.

For every admitted group every member must be bound on the node draq planned. For every group draq
keeps waiting, the test releases it without draq (removing the gate by hand, one group at a time) and
checks that the scheduler cannot bind all of its members at once either. Trials come from
`e2e/gang_trials.py`, seeded from DRAQ_DIFF_SEED (fixed by default, so in CI; printed).

With DRAQ_ALPHA_GANGS=1 (`make e2e-alpha`) the same trials run once more on a second control plane
with native gang scheduling on (gates GenericWorkload, and GangScheduling before 1.37; the alpha DRA
gates too when DRAQ_ALPHA_DRA=1): every member names its group's native gang with the field of the gang
API the release serves (`spec.workloadRef` to a v1alpha1 Workload on 1.35, `spec.schedulingGroup` to a
v1alpha2 PodGroup on 1.36 or a v1beta1 PodGroup on 1.37), as the webhook sets it there; draq creates the
gang object when it releases a group, and the test creates it itself when it releases a waiting group by
hand. DRAQ_GANG_VERSIONS (e.g. `1.36,1.37`, `make e2e-gangs`) runs that second part once per release
listed, each on its own control plane; by default on DRAQ_KUBERNETES_VERSION's release.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from admission.core.labels import GATE
from admission.core.native_gangs import GANG_APIS, GangApi, gang_name, gang_object
from admission.localcluster import build
from admission.localcluster.controlplane import ControlPlane, gang_api
from admission.localcluster.nodesim import NodeSimulator
from e2e import gang_trials
from e2e.gang_trials import (
    MAX_MEMBERS,
    MIN_MEMBERS,
    RACK_LABEL,
    TAINT,
    TRIAL_LABEL,
    ZONE_LABEL,
    Trial,
    TrialGroup,
)
from e2e.scenarios import seed_from_environment
from e2e.test_operator import RunningOperator, apply, crds, pod_group, queues, settings
from e2e.waiting import until

__all__ = ["crds"]
TRIALS = int(os.environ.get("DRAQ_GANG_TRIALS", "10"))
SETTLE = 25.0  # seconds the scheduler gets to bind a released group
# A member waiting at the gang's Permit shows no condition: once another member is found unschedulable,
# the rest get this long to be tried (each try at Permit activates the group's unschedulable members).
NATIVE_GRACE = 3.0


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0", "false")


@dataclass
class Outcome:
    admitted: int
    waiting: int
    problems: list[str]


def build_nodes(api: Any, nodesim: NodeSimulator, trial: Trial) -> None:
    core = client.CoreV1Api(api)
    for node in trial.nodes:
        nodesim.add_node(node.name, "h100")
        spec: dict[str, Any] = {"taints": [TAINT]} if node.tainted else {}
        labels = {TRIAL_LABEL: trial.id, ZONE_LABEL: node.zone, RACK_LABEL: node.rack}
        core.patch_node(node.name, {"metadata": {"labels": labels},
                                    "spec": spec})
        status = core.read_node_status(node.name).status
        allocatable = {**status.allocatable, "cpu": node.cpu}
        core.patch_node_status(node.name, {"status": {"allocatable": allocatable,
                                                      "capacity": {**status.capacity, "cpu": node.cpu}}})


def place_fillers(control_plane: ControlPlane, api: Any, trial: Trial, namespace: str) -> None:
    core = client.CoreV1Api(api)
    fillers = [n for n in trial.nodes if n.filler_gpus]
    made = [gang_trials.filler(node, namespace) for node in fillers]
    if made:
        apply(control_plane, *(claim for claim, _ in made))
        apply(control_plane, *(pod for _, pod in made))
    for node in fillers:
        assert not control_plane.exited_components(), control_plane.exited_components()
        until(f"filler on {node.name} running", lambda n=node: core.read_namespaced_pod(f"{n.name}-filler", namespace),
              accept=lambda p: p.status.phase == "Running" or control_plane.exited_components(), timeout=60)
        assert not control_plane.exited_components(), control_plane.exited_components()


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


def unschedulable(pod: Any) -> bool:
    return any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
               for c in pod.status.conditions or [])


def settled(pods: list[Any]) -> bool:
    """Every member bound, or found unschedulable by the scheduler."""
    return all(p.spec.node_name or unschedulable(p) for p in pods)


def describe(pods: list[Any]) -> str:
    """Each member's node, remaining gates and the scheduler's last word, for a disagreement's message."""
    def one(pod: Any) -> str:
        gates = [g.name for g in pod.spec.scheduling_gates or []]
        said = [f"{c.reason}: {c.message}" for c in pod.status.conditions or [] if c.type == "PodScheduled"
                and c.status == "False"]
        return f"{pod.metadata.name} on {pod.spec.node_name or '-'}" + (f" gated {gates}" if gates else "") + (
            f" ({said[0]})" if said else "")
    return "; ".join(one(p) for p in pods)


def remove(core: Any, namespace: str, pods: list[Any]) -> None:
    """Delete a group's members, those still pending first: deleting a bound one frees room another member
    could then be bound into while it is being deleted (with the alpha DRA gates on, a claim deallocated
    under the scheduler's binding makes kube-scheduler 1.35 crash)."""
    pending = [p.metadata.name for p in pods if not p.spec.node_name]
    for names in (pending, [p.metadata.name for p in pods if p.spec.node_name]):
        for name in names:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        until("pods gone", lambda m=names: [p for p in core.list_namespaced_pod(namespace).items
                                           if p.metadata.name in m], accept=lambda ps: not ps, timeout=60)


def release_by_hand(core: Any, namespace: str, members: list[str]) -> None:
    for name in members:
        pod = core.read_namespaced_pod(name, namespace)
        gates = [g.name for g in pod.spec.scheduling_gates or []]
        if GATE in gates:
            index = gates.index(GATE)
            core.patch_namespaced_pod(name, namespace, [{"op": "remove", "path": f"/spec/schedulingGates/{index}"}])


def scheduler_verdict(core: Any, namespace: str, group: TrialGroup, native: GangApi | None) -> list[Any]:
    """The members once the scheduler has bound them all or cannot (within SETTLE seconds)."""
    deadline = time.monotonic() + SETTLE
    refused_at: float | None = None
    pods = verdicts(core, namespace, group.members)
    while not settled(pods) and time.monotonic() < deadline:
        if native is not None and any(unschedulable(p) for p in pods):
            # A native gang binds all members or none: one member found unschedulable holds the others
            # at Permit until the gang's timeout; none of them is bound meanwhile.
            refused_at = refused_at or time.monotonic()
            if time.monotonic() - refused_at > NATIVE_GRACE:
                break
        time.sleep(0.5)
        pods = verdicts(core, namespace, group.members)
    return pods


def gang_made(api: Any, native: GangApi, namespace: str, group: str) -> bool:
    try:
        client.CustomObjectsApi(api).get_namespaced_custom_object(
            "scheduling.k8s.io", native.version, namespace, native.plural, gang_name(group))
    except client.ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


def away_from_claims(api: Any, namespace: str, pods: list[Any]) -> str:
    """Members bound on a node their allocated claim's devices are not reachable from (kube-scheduler 1.36
    gives a pending allocation to the other members of a native gang without keeping them to its nodes):
    such a binding cannot run, so it is not counted as the scheduler binding the group."""
    custom = client.CustomObjectsApi(api)
    away = []
    for pod in pods:
        for entry in pod.spec.resource_claims or []:
            if not entry.resource_claim_name:
                continue
            claim = custom.get_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims",
                                                        entry.resource_claim_name)
            names = node_names(((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector"))
            if names is not None and pod.spec.node_name not in names:
                away.append(f"{pod.metadata.name} on {pod.spec.node_name}, its claim {entry.resource_claim_name} "
                            f"on {sorted(names)}")
    return "; ".join(away)


def node_names(selector: dict[str, Any] | None) -> set[str] | None:
    """The node names an allocation's node selector allows by `metadata.name` (None: not restricted so)."""
    names: set[str] = set()
    for term in (selector or {}).get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                names.update(field.get("values") or [])
    return names or None


def run_trial(control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, trial: Trial, namespace: str,
              native: GangApi | None) -> Outcome:
    core = client.CoreV1Api(api)
    build_nodes(api, nodesim, trial)
    place_fillers(control_plane, api, trial, namespace)
    running = RunningOperator(settings(control_plane, namespace, lease=f"draq-{trial.id}")).start()
    problems: list[str] = []
    try:
        for group in trial.groups:
            apply(control_plane, *group.manifests(namespace, trial.id, native=native))
        records = {g.name: until(f"draq's decision on {g.name}", lambda g=g: decided(api, namespace, g.name),
                                 timeout=90) for g in trial.groups}
        admitted = [g for g in trial.groups if records[g.name]["status"].get("phase") in ("Admitted", "Running")]
        for group in admitted:
            planned = {p["name"]: p["node"] for p in records[group.name]["status"]["plan"]["pods"]}
            try:
                pods = until(f"{group.name} bound", lambda m=group.members: verdicts(core, namespace, m),
                             accept=lambda ps: all(p.spec.node_name for p in ps), timeout=60)
            except AssertionError:
                problems.append(f"{group.name}: admitted by draq but not all bound by the scheduler: "
                                f"{describe(verdicts(core, namespace, group.members))} (planned {planned})")
                continue
            off = {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name != planned[p.metadata.name]}
            if off:
                problems.append(f"{group.name}: bound off the plan {off} (planned {planned})")
            if native is not None and not gang_made(api, native, namespace, group.name):
                problems.append(f"{group.name}: bound, but draq made no {native.kind} for it")
    finally:
        running.stop()
    assert running.error is None, running.error
    waiting = [g for g in trial.groups if g.name not in {a.name for a in admitted}]
    for group in waiting:
        if native is not None:  # what draq would create on release
            apply(control_plane, gang_object(native, namespace, group.name, group.size))
        release_by_hand(core, namespace, group.members)
        pods = scheduler_verdict(core, namespace, group, native)
        if all(p.spec.node_name for p in pods) and not away_from_claims(api, namespace, pods):
            reason = (records[group.name]["status"].get("conditions") or [{}])[0].get("message", "")
            problems.append(f"{group.name}: draq keeps it waiting ({reason}) but the scheduler bound every member")
        elif all(p.spec.node_name for p in pods):
            print(f"{group.name}: bound whole by the scheduler, but {away_from_claims(api, namespace, pods)}")
        if native is not None:  # the gang first, as draq evicts (Writer.remove_gang says why)
            client.CustomObjectsApi(api).delete_namespaced_custom_object(
                "scheduling.k8s.io", native.version, namespace, native.plural, gang_name(group.name))
            time.sleep(1)  # for the scheduler's informer to see it gone; nothing to observe it by
        remove(core, namespace, verdicts(core, namespace, group.members))
    print(f"trial {trial.id} (seed {trial.seed}): {len(admitted)} admitted "
          f"(members {[(g.size, g.placement, g.shape) for g in admitted]}), "
          f"{len(waiting)} waiting (members {[(g.size, g.placement, g.shape) for g in waiting]}), "
          f"{len(problems)} disagreements; "
          f"GPUs held on its nodes before {[n.filler_gpus for n in trial.nodes]}")
    return Outcome(len(admitted), len(waiting), problems)


def differential(control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
                 native: GangApi | None) -> None:
    seed = seed_from_environment()
    started = time.monotonic()
    queues(control_plane, namespace, unique, gpus=10_000)  # quota is never the limit here
    outcomes = [run_trial(control_plane, api, nodesim, gang_trials.generate(seed * 1000 + index), namespace, native)
                for index in range(TRIALS)]
    problems = [p for o in outcomes for p in o.problems]
    admitted, waiting = sum(o.admitted for o in outcomes), sum(o.waiting for o in outcomes)
    label = f" (native gangs, {native.describe()}, Kubernetes {control_plane.minor()})" if native else ""
    print(f"\ngroup-level differential{label}: {TRIALS} trials from seed {seed}, "
          f"{admitted + waiting} groups of {MIN_MEMBERS}-{MAX_MEMBERS} members ({admitted} admitted, "
          f"{waiting} waiting), {len(problems)} disagreements, {time.monotonic() - started:.0f} s")
    assert problems == [], "\n".join(problems)


def test_the_scheduler_binds_exactly_the_groups_draq_admits_where_draq_planned(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str, unique: str,
        crds: None) -> None:
    differential(control_plane, api, nodesim, namespace, unique, native=None)


@dataclass
class GangCluster:
    control_plane: ControlPlane
    api: Any
    nodesim: NodeSimulator
    gang_api: GangApi


def gang_versions() -> list[str | None]:
    """The releases the native-gang part runs on: DRAQ_GANG_VERSIONS, else DRAQ_KUBERNETES_VERSION's."""
    listed = [v.strip() for v in os.environ.get("DRAQ_GANG_VERSIONS", "").split(",") if v.strip()]
    return list(listed) if listed else [os.environ.get("DRAQ_KUBERNETES_VERSION") or None]


@pytest.fixture(scope="module", params=gang_versions(), ids=lambda v: v or "default")
def gang_cluster(request: pytest.FixtureRequest) -> Iterator[GangCluster]:
    """A second control plane with native gang scheduling on (and the alpha DRA gates with DRAQ_ALPHA_DRA)."""
    if not _flag("DRAQ_ALPHA_GANGS"):
        pytest.skip("native gang scheduling is alpha: set DRAQ_ALPHA_GANGS=1 (make e2e-alpha does)")
    version = request.param
    if build.resolve_version(version).lstrip("v").startswith("1.34"):
        pytest.skip("native gang scheduling needs Kubernetes 1.35 or later")
    from e2e.test_webhook import REPO

    work_dir = Path(tempfile.mkdtemp(prefix="draq-e2e-gangs-"))
    plane = ControlPlane(work_dir, version=version, alpha_dra=_flag("DRAQ_ALPHA_DRA"), alpha_gangs=True)
    failed_before = request.session.testsfailed
    plane.start()
    try:
        api = plane.client()
        plane.kubectl("apply", "-f", str(REPO / "crds"))
        plane.kubectl("wait", "--for=condition=Established", "crd/localqueues.draq.io", "crd/podgroups.draq.io",
                      "crd/clusterqueues.draq.io", "crd/quotaunits.draq.io", "--timeout=60s")
        with NodeSimulator(api) as sim:
            sim.apply_device_classes()
            served = gang_api(plane.minor())
            yield GangCluster(plane, api, sim, next(g for g in GANG_APIS if g.version == served))
    finally:
        plane.stop()
        if request.session.testsfailed > failed_before:
            print(f"\nnative-gang control-plane logs kept in {plane.logs_dir}")
        else:
            shutil.rmtree(work_dir, ignore_errors=True)


def test_with_native_gangs_too(gang_cluster: GangCluster, unique: str) -> None:
    plane = gang_cluster.control_plane
    namespace = f"gd-{unique}"
    plane.kubectl("create", "namespace", namespace)
    plane.wait_for_service_account(namespace)
    differential(plane, gang_cluster.api, gang_cluster.nodesim, namespace, unique, native=gang_cluster.gang_api)
