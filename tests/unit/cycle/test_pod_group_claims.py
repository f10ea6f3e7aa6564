"""PodGroup-level resource claims (1.36 alpha, 1.37 beta; gate DRAWorkloadResourceClaims): a claim the
PodGroup makes once for all its members is planned once and charged once per group, never per member;
where the modelled release has the gate off, the group waits saying so."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from admission.core.cycle import Admit, Wait, WaitReason, run_cycle
from admission.core.cycle.pod_group_claims import parse_pod_group_claims, with_pod_group_claims
from admission.core.features import gates_for
from admission.core.models import PodResourceClaim
from tests.support.builders import Manifest
from tests.unit.cycle.cycle_builders import NS, cycle_input, gpu_node, gpu_queue, gpu_template, member


def scheduling_pod_group(claims: list[dict[str, Any]], generated: dict[str, str] | None = None) -> Manifest:
    status = {"resourceClaimStatuses": [{"name": k, "resourceClaimName": v} for k, v in (generated or {}).items()]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "trainers", "namespace": NS},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}, "resourceClaims": claims}, "status": status}


SHARED = {"name": "gpu", "resourceClaimTemplateName": "four-gpus"}


def members(entry: dict[str, str]) -> list[Manifest]:
    pods = [member(f"t-{i}", "t", group_min=3, template="four-gpus") for i in range(3)]
    for pod in pods:
        pod["spec"]["resourceClaims"] = [dict(entry)]
        pod["spec"]["schedulingGroup"] = {"podGroupName": "trainers"}
    return pods


def decided(entry: dict[str, str], release: str = "1.37", gate: bool = True, nodes: int = 2) -> Any:
    objects = [*(m for i in range(nodes) for m in gpu_node(f"node-{i}")), gpu_template("four-gpus", 4),
               *members(entry)]
    given = cycle_input(objects, [gpu_queue("main", 8)])
    claims = {f"{NS}/trainers": parse_pod_group_claims(scheduling_pod_group([SHARED]))}
    groups = tuple(with_pod_group_claims(g, claims) for g in given.groups)
    gates = gates_for(release, {"DRAWorkloadResourceClaims": True} if gate else None)
    return run_cycle(replace(given, groups=groups, gates=gates)).decision(f"{NS}/t")


def test_the_claims_of_a_pod_group_are_read_with_their_generated_claims() -> None:
    (claim,) = parse_pod_group_claims(scheduling_pod_group([SHARED, {"name": "bad"}], {"gpu": "trainers-gpu-x1"}))
    assert claim.pod_group == "trainers" and claim.generated == "trainers-gpu-x1"
    assert claim.entry == PodResourceClaim("gpu", None, "four-gpus")


def test_a_pod_group_level_claim_is_planned_once_and_charged_once() -> None:
    admitted = decided(SHARED)
    assert isinstance(admitted, Admit), admitted
    # Three members, one claim of 4 GPUs: 4 charged (per member it would be 12, above the quota of 8).
    assert admitted.charge.get("gpus") == 4
    claims = [c for c in admitted.plan.claims]
    assert len(claims) == 1 and claims[0].name == "podgroup trainers/gpu", claims
    # Every member goes where the shared devices are.
    assert len({node for _, node in admitted.plan.nodes}) == 1


def test_an_entry_that_differs_in_any_field_is_the_members_own() -> None:
    own = decided({"name": "gpus", "resourceClaimTemplateName": "four-gpus"})
    # Each member's own 4 GPUs: 12 in all, more than the queue's 8.
    assert isinstance(own, Wait), own


def test_with_the_gate_off_the_group_waits_saying_why() -> None:
    waiting = decided(SHARED, gate=False)
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.UNSUPPORTED
    assert "'gpu' of PodGroup team/trainers" in waiting.message
    assert "DRAWorkloadResourceClaims feature gate, off by default in Kubernetes 1.37" in waiting.message
    assert "--feature-gates DRAWorkloadResourceClaims=true" in waiting.message
