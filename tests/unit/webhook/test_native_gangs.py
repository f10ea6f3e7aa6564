"""Native gangs: with the Workload API served, the mutating webhook makes each pod a member of its
group's gang (`spec.workloadRef`), named after the group; without it, or when off, nothing changes."""

from __future__ import annotations

from typing import Any

from admission.core.labels import GROUP_LABEL, QUEUE_LABEL
from admission.core.native_gangs import POD_GROUP, referenced_workload, workload, workload_name, workload_ref
from admission.core.review import GatingPolicy, mutate
from admission.core.review.envelope import parse_review, render_response

from .builders import POD, apply_patch, cluster, decode_patch, job_owner, pod, review


def mutated(obj: dict[str, Any], native: bool) -> dict[str, Any]:
    decision = mutate(parse_review(review(POD, obj)), cluster(), GatingPolicy(native_gangs=native))
    assert decision.allowed
    result: dict[str, Any] = apply_patch(obj, decode_patch(render_response("u", decision)))
    return result


def test_a_pod_joins_its_groups_native_gang() -> None:
    result = mutated(pod("w-0", labels={QUEUE_LABEL: "gpu", GROUP_LABEL: "trainer"}), native=True)
    assert result["spec"]["workloadRef"] == {"name": "trainer", "podGroup": POD_GROUP}
    assert referenced_workload(result) == "trainer"


def test_a_job_pod_joins_the_gang_named_after_its_job() -> None:
    original = pod("j-abc", labels={QUEUE_LABEL: "gpu"}, owner=job_owner("train"))
    assert mutated(original, native=True)["spec"]["workloadRef"]["name"] == "train"


def test_off_or_a_pod_with_its_own_workload_is_left_alone() -> None:
    assert "workloadRef" not in mutated(pod("w-0", labels={QUEUE_LABEL: "gpu"}), native=False)["spec"]
    own = pod("w-0", labels={QUEUE_LABEL: "gpu"})
    own["spec"]["workloadRef"] = {"name": "mine", "podGroup": "workers"}
    assert mutated(own, native=True)["spec"]["workloadRef"] == {"name": "mine", "podGroup": "workers"}


def test_workload_names_are_dns_subdomains_and_stable() -> None:
    assert workload_name("trainer.v2") == "trainer.v2"
    odd = workload_name("Big_Run")
    assert odd.startswith("big-run-") and len(odd) == len("big-run-") + 10 and odd == workload_name("Big_Run")
    assert workload_name("_") .startswith("group-")
    assert workload_ref("Big_Run")["name"] == odd


def test_the_workload_is_a_gang_of_the_groups_minimum() -> None:
    made = workload("team", "trainer", 4)
    assert made["apiVersion"] == "scheduling.k8s.io/v1alpha1" and made["metadata"]["namespace"] == "team"
    assert made["spec"]["podGroups"] == [{"name": POD_GROUP, "policy": {"gang": {"minCount": 4}}}]


def test_a_pod_that_uses_a_claim_by_name_is_left_out_of_the_gang() -> None:
    # A claim named by several members is allocated for the first; the gang's other members are then
    # refused while it "is in the process of being allocated", so the gang would never bind.
    shared = pod("w-0", labels={QUEUE_LABEL: "gpu", GROUP_LABEL: "trainer"})
    shared["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "team-gpus"}]
    assert "workloadRef" not in mutated(shared, native=True)["spec"]
    own = pod("w-1", labels={QUEUE_LABEL: "gpu", GROUP_LABEL: "trainer"})
    own["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    assert mutated(own, native=True)["spec"]["workloadRef"]["name"] == "trainer"
