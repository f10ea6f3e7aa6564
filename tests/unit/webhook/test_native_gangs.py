"""Native gangs: where the cluster serves a gang API, the mutating webhook makes each pod a member of its
group's gang with that API's pod field (`spec.workloadRef` on v1alpha1, `spec.schedulingGroup` on
v1alpha2 and v1beta1), named after the group; when off, nothing changes. A pod that names a gang of an API
the cluster does not serve is refused with the reason."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.labels import GROUP_LABEL, QUEUE_LABEL
from admission.core.native_gangs import (
    POD_GROUP,
    V1ALPHA1,
    V1ALPHA2,
    V1BETA1,
    GangApi,
    chosen,
    discovery_note,
    gang_api_of,
    gang_name,
    gang_object,
    pod_reference,
    referenced_gang,
)
from admission.core.review import GatingPolicy, mutate
from admission.core.review.envelope import parse_review, render_response

from .builders import POD, apply_patch, cluster, decode_patch, job_owner, pod, review


def decide(obj: dict[str, Any], served: GangApi | None, native: bool = True) -> Any:
    policy = GatingPolicy(gang_api=served, native_gangs=native and served is not None)
    return mutate(parse_review(review(POD, obj)), cluster(), policy)


def mutated(obj: dict[str, Any], served: GangApi | None, native: bool = True) -> dict[str, Any]:
    decision = decide(obj, served, native)
    assert decision.allowed, decision
    result: dict[str, Any] = apply_patch(obj, decode_patch(render_response("u", decision)))
    return result


def test_a_pod_joins_its_groups_native_gang() -> None:
    result = mutated(pod("w-0", labels={QUEUE_LABEL: "gpu", GROUP_LABEL: "trainer"}), V1ALPHA1)
    assert result["spec"]["workloadRef"] == {"name": "trainer", "podGroup": POD_GROUP}
    assert referenced_gang(result) == "trainer"


@pytest.mark.parametrize("served", [V1ALPHA2, V1BETA1])
def test_on_1_36_and_1_37_a_pod_names_its_groups_pod_group(served: GangApi) -> None:
    result = mutated(pod("w-0", labels={QUEUE_LABEL: "gpu", GROUP_LABEL: "trainer"}), served)
    assert result["spec"]["schedulingGroup"] == {"podGroupName": "trainer"}
    assert "workloadRef" not in result["spec"]
    assert referenced_gang(result) == "trainer" and gang_api_of(result, served) is served


def test_a_job_pod_joins_the_gang_named_after_its_job() -> None:
    original = pod("j-abc", labels={QUEUE_LABEL: "gpu"}, owner=job_owner("train"))
    assert mutated(original, V1ALPHA1)["spec"]["workloadRef"]["name"] == "train"
    assert mutated(original, V1BETA1)["spec"]["schedulingGroup"]["podGroupName"] == "train"


def test_off_or_a_pod_with_its_own_gang_is_left_alone() -> None:
    assert "workloadRef" not in mutated(pod("w-0", labels={QUEUE_LABEL: "gpu"}), V1ALPHA1, native=False)["spec"]
    own = pod("w-0", labels={QUEUE_LABEL: "gpu"})
    own["spec"]["workloadRef"] = {"name": "mine", "podGroup": "workers"}
    assert mutated(own, V1ALPHA1)["spec"]["workloadRef"] == {"name": "mine", "podGroup": "workers"}
    mine = pod("w-0", labels={QUEUE_LABEL: "gpu"})
    mine["spec"]["schedulingGroup"] = {"podGroupName": "mine"}
    assert mutated(mine, V1BETA1)["spec"]["schedulingGroup"] == {"podGroupName": "mine"}


def test_a_pod_naming_a_workload_the_cluster_does_not_serve_is_refused() -> None:
    old = pod("w-0", labels={QUEUE_LABEL: "gpu"})
    old["spec"]["workloadRef"] = {"name": "mine", "podGroup": "workers"}
    refused = decide(old, V1BETA1)
    assert not refused.allowed
    assert "spec.workloadRef names a native gang of scheduling.k8s.io/v1alpha1 Workloads" in refused.message
    assert "it serves scheduling.k8s.io/v1beta1 PodGroups: use spec.schedulingGroup" in refused.message
    # The same when draq's own native gangs are off: the field cannot work either way.
    assert not decide(old, V1ALPHA2, native=False).allowed


def test_a_pod_naming_a_pod_group_where_no_gang_api_is_served_is_refused() -> None:
    new = pod("w-0", labels={QUEUE_LABEL: "gpu"})
    new["spec"]["schedulingGroup"] = {"podGroupName": "mine"}
    refused = decide(new, None)
    assert not refused.allowed
    assert "spec.schedulingGroup names a native gang of scheduling.k8s.io/v1alpha2 PodGroups or " \
           "scheduling.k8s.io/v1beta1 PodGroups, which this cluster does not serve" in refused.message
    assert "serves no gang API" in refused.message
    assert not decide(new, V1ALPHA1).allowed


def test_gang_names_are_dns_subdomains_and_stable() -> None:
    assert gang_name("trainer.v2") == "trainer.v2"
    odd = gang_name("Big_Run")
    assert odd.startswith("big-run-") and len(odd) == len("big-run-") + 10 and odd == gang_name("Big_Run")
    assert gang_name("_").startswith("group-")
    assert pod_reference(V1ALPHA1, "Big_Run")["name"] == odd
    assert pod_reference(V1BETA1, "Big_Run") == {"podGroupName": odd}


def test_the_workload_is_a_gang_of_the_groups_minimum() -> None:
    made = gang_object(V1ALPHA1, "team", "trainer", 4)
    assert made["apiVersion"] == "scheduling.k8s.io/v1alpha1" and made["kind"] == "Workload"
    assert made["metadata"]["namespace"] == "team"
    assert made["spec"]["podGroups"] == [{"name": POD_GROUP, "policy": {"gang": {"minCount": 4}}}]


@pytest.mark.parametrize("served", [V1ALPHA2, V1BETA1])
def test_the_pod_group_is_a_standalone_gang_of_the_groups_minimum(served: GangApi) -> None:
    made = gang_object(served, "team", "Big_Run", 3)
    assert made["apiVersion"] == f"scheduling.k8s.io/{served.version}" and made["kind"] == "PodGroup"
    assert made["metadata"]["name"] == gang_name("Big_Run")
    assert made["spec"] == {"schedulingPolicy": {"gang": {"minCount": 3}}}


def test_discovery_takes_the_newest_served_api() -> None:
    assert chosen([V1ALPHA1, V1BETA1]) is V1BETA1
    assert chosen([V1ALPHA2]) is V1ALPHA2
    assert chosen([]) is None


def test_the_start_up_note_names_what_draq_will_not_do() -> None:
    assert discovery_note("1.37", None, "auto") == (
        "native gangs off: scheduling.k8s.io/v1beta1 not served (Kubernetes 1.37 serves it with the "
        "GenericWorkload feature gate and --runtime-config=scheduling.k8s.io/v1beta1=true); draq's own gang "
        "admission keeps each group whole")
    assert "scheduling.k8s.io/v1alpha2 not served" in discovery_note("1.36", None, "auto")
    assert "GenericWorkload and GangScheduling feature gates" in discovery_note("1.35", None, "auto")
    assert "Kubernetes 1.34 has no gang API" in discovery_note("1.34", None, "auto")
    assert discovery_note("1.36", V1ALPHA2, "auto").startswith(
        "native gangs on: scheduling.k8s.io/v1alpha2 PodGroups, pods join with spec.schedulingGroup")
    assert discovery_note("1.37", V1BETA1, "off").startswith("native gangs off (--native-gangs off)")


def test_a_pod_that_uses_a_claim_by_name_is_left_out_of_the_gang() -> None:
    # A claim named by several members is allocated for the first; the gang's other members are then
    # refused while it "is in the process of being allocated", so the gang would never bind.
    shared = pod("w-0", labels={QUEUE_LABEL: "gpu", GROUP_LABEL: "trainer"})
    shared["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "team-gpus"}]
    assert "workloadRef" not in mutated(shared, V1ALPHA1)["spec"]
    assert "schedulingGroup" not in mutated(shared, V1BETA1)["spec"]
    own = pod("w-1", labels={QUEUE_LABEL: "gpu", GROUP_LABEL: "trainer"})
    own["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    assert mutated(own, V1ALPHA1)["spec"]["workloadRef"]["name"] == "trainer"
