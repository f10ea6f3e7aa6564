"""draq's allocator and the real kube-scheduler agree on random but realistic DRA scenarios.

Each trial is a fresh node with its own pool (so trials do not interfere), some devices already
held by other claims, and one pod with one to three claims pinned to that node. draq answers from
the objects as the API server stored them; the scheduler answers by binding the pod, marking it
Unschedulable, or failing with an error. Any disagreement is printed as a reproducible case
(seed and trial index, plus every manifest).
"""

from __future__ import annotations

import os
import time
from typing import Any

from admission.core.allocator.api import Allocator, Outcome, Snapshot, Status
from admission.core.features import KNOWN_GATES, gates_for
from admission.core.models import ClaimSpec, DeviceClass, ObjectMeta, Pod, ResourceClaim, parse_objects
from admission.core.nodefit.extended import extended_claim_name, extended_requests, extended_resource_class
from admission.localcluster import build
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e import scenarios, trials
from e2e.binding_driver import BindingConditionDriver

SEED = scenarios.seed_from_environment()
# 200 by default: on 1.37, with every newer shape on, a trial takes about twice as long as on 1.35, and
# CI's warm run has 30 minutes; DRAQ_DIFF_TRIALS asks for more.
TRIALS = int(os.environ.get("DRAQ_DIFF_TRIALS", "200"))
# The index of the first trial (batches start there): DRAQ_DIFF_FIRST=150 DRAQ_DIFF_TRIALS=50 runs the last
# batch of a default run alone, with the same scenarios.
FIRST = int(os.environ.get("DRAQ_DIFF_FIRST", "0"))
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
BATCH = 50


def cluster_gates(plane: ControlPlane) -> Any:
    version = build.resolve_version(plane.version).lstrip("v")
    return gates_for(version, {g: on for g, on in plane.gates().items() if g in KNOWN_GATES})


def scenario_features(plane: ControlPlane) -> scenarios.Features:
    """With the gates on (alpha before 1.36, beta or GA by default since), scenarios also use device taints,
    distinctAttribute constraints, (1.35+ slice layout) partitions and extended resources served by
    DRA devices, (1.37) capacity policies in fractions of a unit and, with the alpha gates, compatibility
    groups on partitions' counter sets, slices that skip node operations and requests deriving attributes for
    their constraints; from 1.36 (beta, on by default)
    devices with binding conditions, which a driver stand-in attaches. Admin-access requests are used always
    (the namespace allows them)."""
    gates = cluster_gates(plane)
    return scenarios.Features(partitions=gates.partitionable_devices and gates.minor >= 35,
                              taints=gates.device_taints, distinct=gates.consumable_capacity,
                              extended=gates.extended_resource,
                              fractional=gates.fractional_capacity_range and gates.consumable_capacity,
                              compatibility=gates.compatibility_groups and gates.partitionable_devices,
                              skip_operations=gates.optional_node_operations,
                              derived="DRADerivedAttributes" in gates.enabled,
                              binding=gates.binding_conditions and gates.minor >= 36)


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


def attached_devices(results: dict[str, list[dict[str, Any]]]) -> dict[str, frozenset[str]]:
    """Per claim, its allocated devices (`driver/pool/device`) that have binding conditions."""
    return {claim: frozenset(f"{r['driver']}/{r['pool']}/{r['device']}" for r in rs if r.get("bindingConditions"))
            for claim, rs in results.items()}


def draq_results(outcome: Outcome, trial: scenarios.Trial, namespace: str) -> dict[str, list[dict[str, Any]]]:
    """draq's results for the pod's own claims, in the fields `attached_devices` reads."""
    found = {}
    for claim in trial.claims:
        name = claim["metadata"]["name"]
        allocation = outcome.allocations.get(f"{namespace}/{name}")
        found[name] = [{"driver": r.driver, "pool": r.pool, "device": r.device,
                        "bindingConditions": list(r.binding_conditions)}
                       for r in (allocation.results if allocation else ())]
    return found


def compare_attached(api: Any, namespace: str, trial: scenarios.Trial, outcome: Outcome) -> tuple[str | None, bool]:
    """For a pod the scheduler bound: a disagreement if draq and the scheduler differ in which claims hold
    devices with binding conditions (pools with them are tried last), and whether they chose the same ones."""
    names = [c["metadata"]["name"] for c in trial.claims]
    scheduler = attached_devices(trials.allocated_results(api, namespace, names))
    mine = attached_devices(draq_results(outcome, trial, namespace))
    if {c: bool(d) for c, d in scheduler.items()} != {c: bool(d) for c, d in mine.items()}:
        return f"devices with binding conditions: scheduler {scheduler}, draq {mine}", False
    return None, scheduler == mine


def _shape(note: str) -> str:
    """A trial's note without its names and counts, for the tally of shapes."""
    if "missing DeviceClass" in note:
        return "a missing DeviceClass"
    if "extended resource through DRA" in note:
        return "an extended resource through DRA " + note.rsplit(" (", 1)[1].rstrip(")").join("()")
    return note.split(": ", 1)[1]


def _derives(manifest: dict[str, Any]) -> bool:
    """A ResourceClaim as the API server stored it with derived attributes (it drops them with the gate off)."""
    if manifest.get("kind") != "ResourceClaim":
        return False
    requests = manifest.get("spec", {}).get("devices", {}).get("requests") or []
    return any(s.get("derivedAttributes") for r in requests
               for s in [r.get("exactly") or {}, *r.get("firstAvailable", [])])


TIMED_OUT = "timed out trying to allocate devices"  # the scheduler's DRA filter timeout (an error, retried)


def agrees(outcome: Outcome, verdict: trials.Verdict) -> bool:
    if outcome.gave_up:
        # draq stopped its search (its own budget, or the scheduler's estimated timeout): it does not know, as
        # the scheduler does not when it times out; the scheduler may also answer, after a longer search.
        return True
    if verdict.outcome == "error" and TIMED_OUT in verdict.message:
        return False  # a search draq finished, where the scheduler's ran out of time
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
    attached_trials = same_devices = derived_stored = 0
    gave_up: dict[str, int] = {}  # the scheduler's verdicts where draq's search gave up
    final: dict[str, str] = {}  # pod -> the scheduler's verdict
    started, cpu = time.monotonic(), time.process_time()
    with BindingConditionDriver(api, namespace).start() as driver:
        for start in range(FIRST, FIRST + TRIALS, BATCH):
            batch = [scenarios.trial(SEED, i, features) for i in range(start, min(start + BATCH, FIRST + TRIALS))]
            for trial in batch:
                driver.expect_failures(trial.attach_fails_once)
                trials.submit(api, namespace, trial)
            nodesim.adopt(t.node_name for t in batch)
            verdicts = trials.await_verdicts(api, namespace, [t.pod["metadata"]["name"] for t in batch],
                                             busy=driver.busy, progress=lambda: driver.last_answer,
                                             settled=lambda pod: trials.remove_pods(api, namespace, [pod]))
            for trial in batch:
                verdict = verdicts[trial.pod["metadata"]["name"]]
                stored = trials.stored_objects(api, namespace, trial)
                derived_stored += any(_derives(o) for o in stored)
                outcome = draq_answer(stored, trial, gates)
                if outcome.gave_up:
                    said = "timed out" if TIMED_OUT in verdict.message else verdict.outcome
                    gave_up[said] = gave_up.get(said, 0) + 1
                tally[verdict.outcome] = tally.get(verdict.outcome, 0) + 1
                final[trial.pod["metadata"]["name"]] = verdict.outcome
                for note in {_shape(n) for n in trial.notes}:
                    shapes[note] = shapes.get(note, 0) + 1
                if verdict.outcome == "pending":
                    unanswered.append(f"seed {SEED} trial {trial.index}: {verdict.message}\n"
                                      f"{trials.claim_states(api, namespace, trial.pod['metadata']['name'])}")
                problem = None if agrees(outcome, verdict) else "outcome"
                if problem is None and verdict.outcome == "bound" and trial.needs_attach:
                    attached_trials += 1
                    problem, same = compare_attached(api, namespace, trial, outcome)
                    same_devices += same
                if problem is not None:
                    disagreements.append(
                        f"seed {SEED} trial {trial.index}: scheduler {verdict.outcome} ({verdict.message}); "
                        f"draq {outcome.status.value} ({outcome.message}) [{problem}]\n{trial.describe()}")
            # Bound pods are deleted once their claims' allocations have been compared; the others went as
            # soon as their verdict settled.
            trials.remove_pods(api, namespace, [t.pod["metadata"]["name"] for t in batch])
        failed = dict(driver.failed)
        unrecovered = [f"{pod}: attach of {sorted(devices)} failed, then {final.get(pod)}, attached "
                       f"{sorted(driver.attached.get(pod, set()))}" for pod, devices in failed.items()
                       if final.get(pod) != "bound" or not driver.attached.get(pod)]
    elapsed = time.monotonic() - started
    print(f"\n{TRIALS} trials in {elapsed:.0f} s ({elapsed / TRIALS:.2f} s a trial; the test's own CPU time "
          f"{time.process_time() - cpu:.0f} s)")
    print(f"{TRIALS} trials, seed {SEED} ({features}), scheduler verdicts: {tally}, trials with: {shapes}; "
          f"{attached_trials} bound trials with devices with binding conditions ({same_devices} with the same ones "
          f"as draq); {derived_stored} trials whose stored claims derive attributes; draq gave up on "
          f"{sum(gave_up.values())} (scheduler: {gave_up}); "
          f"{len(failed)} pods had a failed attach and were allocated again "
          f"({sum(devices <= driver.attached.get(pod, set()) for pod, devices in failed.items())} on the same devices)")
    # Disagreements are named beside pods without a verdict: one failure must not hide the other.
    headlines = "\n".join(d.splitlines()[0] for d in disagreements)
    assert not unanswered, ("some pods got no verdict from the scheduler in time:\n" + "\n".join(unanswered)
                            + f"\nand {len(disagreements)} disagreements:\n{headlines}")
    assert tally.get("bound", 0) > TRIALS // 10 and tally.get("unschedulable", 0) > TRIALS // 10, tally
    assert not disagreements, f"{len(disagreements)} disagreements:\n{headlines}\nfirst in full:\n{disagreements[0]}"
    assert not unrecovered, "pods whose failed attach was not followed by a working one:\n" + "\n".join(unrecovered)
