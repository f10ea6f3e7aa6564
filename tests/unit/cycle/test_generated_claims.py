"""Claims the claim controller made from a member's template (owned by the pod) are the member's own: six
members of one template on one node ask for the same devices, so the order in which the scheduler takes
them does not matter and the group is admitted (not held back as "different device requests")."""

from __future__ import annotations

from admission.core.cycle import Admit
from tests.support.builders import Manifest, claim, exactly, pod
from tests.unit.cycle.cycle_builders import NS, cycle, gpu_node, gpu_queue, gpu_template


def generated(member: str) -> Manifest:
    made = claim(f"{member}-gpu-x7k2p", exactly("gpus", count=1), namespace=NS)
    made["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": member, "uid": f"uid-{member}",
                                            "controller": True, "blockOwnerDeletion": True}]
    return made


def test_six_members_with_generated_claims_on_one_node_are_admitted() -> None:
    names = [f"g-{i}" for i in range(6)]
    members = [pod(n, NS, queue="lq", group="g", group_min=6, gated=True, templates={"gpu": "one-gpu"},
                   claim_statuses={"gpu": f"{n}-gpu-x7k2p"}) for n in names]
    objects = [*gpu_node("node-a", 8), gpu_template("one-gpu", 1), *members, *(generated(n) for n in names)]
    admitted = cycle(objects, [gpu_queue("main", 8)]).decision(f"{NS}/g")
    assert isinstance(admitted, Admit), admitted
    assert set(admitted.placement.nodes.values()) == {"node-a"} and len(admitted.placement.nodes) == 6
