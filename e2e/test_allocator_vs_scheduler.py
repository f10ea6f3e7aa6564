"""draq's allocator and the real kube-scheduler agree on random but realistic DRA scenarios.

Each trial is a fresh node with its own pool (so trials do not interfere), some devices already
held by other claims, and one pod with one to three claims pinned to that node. draq answers from
the objects as the API server stored them; the scheduler answers by binding the pod, marking it
Unschedulable, or failing with an error. Any disagreement is printed as a reproducible case
(seed and trial index, plus every manifest).
"""

from __future__ import annotations

import os
from typing import Any

from admission.core.allocator.api import Allocator, Outcome, Snapshot, Status
from admission.core.features import KNOWN_GATES, gates_for
from admission.core.models import ClaimSpec, DeviceClass, ObjectMeta, Pod, ResourceClaim, parse_objects
from admission.core.nodefit.extended import extended_claim_name, extended_requests, extended_resource_class
from admission.localcluster import build
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e import scenarios, trials

SEED = scenarios.seed_from_environment()
# 200 by default: on 1.37, with every newer shape on, a trial takes about twice as long as on 1.35, and
# CI's warm run has 30 minutes; DRAQ_DIFF_TRIALS asks for more.
TRIALS = int(os.environ.get("DRAQ_DIFF_TRIALS", "200"))
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
BATCH = 50


def cluster_gates(plane: ControlPlane) -> Any:
    version = build.resolve_version(plane.version).lstrip("v")
    return gates_for(version, {g: on for g, on in plane.gates().items() if g in KNOWN_GATES})


def scenario_features(plane: ControlPlane) -> scenarios.Features:
    """With the gates on (alpha before 1.36, beta or GA by default since), scenarios also use device taints,
    distinctAttribute constraints, (1.35+ slice layout) partitions and extended resources served by
    DRA devices, (1.37) capacity policies in fractions of a unit and, with the alpha gates, compatibility
    groups on partitions' counter sets and slices that skip node operations. Admin-access requests are used always
    (the namespace allows them)."""
    gates = cluster_gates(plane)
    return scenarios.Features(partitions=gates.partitionable_devices and gates.minor >= 35,
                              taints=gates.device_taints, distinct=gates.consumable_capacity,
                              extended=gates.extended_resource,
                              fractional=gates.fractional_capacity_range and gates.consumable_capacity,
                              compatibility=gates.compatibility_groups and gates.partitionable_devices,
                              skip_operations=gates.optional_node_operations)


def draq_answer(objects: list[dict[str, Any]], trial: scenarios.Trial, gates: Any) -> Outcome:
    models = parse_objects(objects)
    snapshot = Snapshot.from_models(models)
    names = {c["metadata"]["name"] for c in trial.claims}
    claims = sorted((m for m in models if isinstance(m, ResourceClaim) and m.name in names),
                    key=lambda c: [x["metadata"]["name"] for x in trial.claims].index(c.name))
    extended = extended_claim(trial, [m for m in models if isinstance(m, DeviceClass)])
    return Allocator(snapshot, gates).allocate(trial.node_name, claims if extended is None else [*claims, extended])


def extended_claim(trial: scenarios.Trial, classes: list[DeviceClass]) -> ResourceClaim | None:
    """The claim the scheduler makes for the pod's extended resources that DRA devices serve (no simulated
    node lists them in its allocatable), allocated after the pod's own claims."""
    [pod] = [m for m in parse_objects([trial.pod]) if isinstance(m, Pod)]
    requests = extended_requests(pod.containers, lambda name: extended_resource_class(name, classes))
    if not requests:
        return None
    return ResourceClaim(meta=ObjectMeta(name=extended_claim_name(pod.name), namespace=pod.namespace),
                         spec=ClaimSpec(tuple(request for _, request in requests)))


def _shape(note: str) -> str:
    """A trial's note without its names and counts, for the tally of shapes."""
    if "missing DeviceClass" in note:
        return "a missing DeviceClass"
    if "extended resource through DRA" in note:
        return "an extended resource through DRA " + note.rsplit(" (", 1)[1].rstrip(")").join("()")
    return note.split(": ", 1)[1]


def agrees(outcome: Outcome, verdict: trials.Verdict) -> bool:
    if outcome.gave_up:
        return True  # the scheduler's own filter timeout may answer either way
    if outcome.missing_class:
        # The allocator's error; the scheduler checks classes first and reports the pod unschedulable.
        return verdict.outcome == "unschedulable" and f"device class {outcome.missing_class} does not exist" \
            in verdict.message
    expected = {Status.ALLOCATED: "bound", Status.UNFIT: "unschedulable",
                Status.NODE_ERROR: "unschedulable", Status.ERROR: "error"}[outcome.status]
    return expected == verdict.outcome


def test_draq_and_the_scheduler_agree_on_random_scenarios(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str) -> None:
    trials.create_cluster_objects(api, scenarios.device_classes())
    control_plane.kubectl("label", "namespace", namespace, f"{ADMIN_ACCESS_LABEL}=true")
    gates = cluster_gates(control_plane)
    features = scenario_features(control_plane)
    disagreements: list[str] = []
    tally: dict[str, int] = {}
    shapes: dict[str, int] = {}
    unanswered: list[str] = []
    for start in range(0, TRIALS, BATCH):
        batch = [scenarios.trial(SEED, i, features) for i in range(start, min(start + BATCH, TRIALS))]
        for trial in batch:
            trials.submit(api, namespace, trial)
        nodesim.adopt(t.node_name for t in batch)
        verdicts = trials.await_verdicts(api, namespace, [t.pod["metadata"]["name"] for t in batch])
        for trial in batch:
            verdict = verdicts[trial.pod["metadata"]["name"]]
            outcome = draq_answer(trials.stored_objects(api, namespace, trial), trial, gates)
            tally[verdict.outcome] = tally.get(verdict.outcome, 0) + 1
            for note in {_shape(n) for n in trial.notes}:
                shapes[note] = shapes.get(note, 0) + 1
            if verdict.outcome == "pending":
                unanswered.append(f"seed {SEED} trial {trial.index}: {verdict.message}")
            if not agrees(outcome, verdict):
                disagreements.append(
                    f"seed {SEED} trial {trial.index}: scheduler {verdict.outcome} ({verdict.message}); "
                    f"draq {outcome.status.value} ({outcome.message})\n{trial.describe()}")
    print(f"\n{TRIALS} trials, seed {SEED} ({features}), scheduler verdicts: {tally}, trials with: {shapes}")
    assert not unanswered, "some pods got no verdict from the scheduler in time:\n" + "\n".join(unanswered)
    assert tally.get("bound", 0) > TRIALS // 10 and tally.get("unschedulable", 0) > TRIALS // 10, tally
    headlines = "\n".join(d.splitlines()[0] for d in disagreements)
    assert not disagreements, f"{len(disagreements)} disagreements:\n{headlines}\nfirst in full:\n{disagreements[0]}"
