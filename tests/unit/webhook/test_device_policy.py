"""Pod CREATE: devices outside queues under the namespace's device policy, verified owner exemptions, and
the cap on pending groups per LocalQueue."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.labels import DEVICE_POLICY_LABEL, GATE, GROUP_LABEL, MANAGED_LABEL, QUEUE_LABEL
from admission.core.models import ObjectRef
from admission.core.review import GatingPolicy, device_use, mutate, validate
from tests.support import builders as manifests

from .builders import POD, FakeLookups, cluster, request

EXEMPT_DAEMONSETS = GatingPolicy(exempt_owner_kinds=frozenset({"DaemonSet"}))
DS_OWNER = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "uid-1", "controller": True}


def gpu_pod(name: str = "p", namespace: str = "team-a", **kwargs: Any) -> dict[str, Any]:
    return manifests.pod(name, namespace, requests={"nvidia.com/gpu": "4"}, container="c", **kwargs)


def claim_pod(name: str = "p", namespace: str = "team-a", **kwargs: Any) -> dict[str, Any]:
    return manifests.pod(name, namespace, templates={"gpu": "four-gpus"}, container="c", **kwargs)


def with_agent(lookups: FakeLookups, namespace: str = "team-a", uid: str = "uid-1") -> FakeLookups:
    lookups.owners[("DaemonSet", namespace, "agent")] = {"metadata": {"name": "agent", "namespace": namespace,
                                                                       "uid": uid}}
    return lookups


# ----- what counts as device use ------------------------------------------------------------------------
def test_claims_and_extended_resources_of_any_container_are_device_use() -> None:
    assert device_use(claim_pod()) == ("ResourceClaims in spec.resourceClaims (gpu)",)
    assert device_use(gpu_pod()) == ("nvidia.com/gpu in container c",)
    init = manifests.pod("p", init_requests={"example.com/fpga": "1"})
    assert device_use(init) == ("example.com/fpga in initContainer init",)
    implicit = manifests.pod("p", requests={"deviceclass.resource.kubernetes.io/gpu": "1"}, container="c")
    assert device_use(implicit) == ("deviceclass.resource.kubernetes.io/gpu in container c",)


def test_limits_alone_count_and_native_resources_do_not() -> None:
    limited = manifests.pod("p", requests={"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "2Mi"})
    assert device_use(limited) == ()
    limited["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    assert device_use(limited) == ("nvidia.com/gpu in container main",)


# ----- the namespace's device policy ------------------------------------------------------------------
@pytest.mark.parametrize("make", [gpu_pod, claim_pod])
def test_device_pod_without_queue_is_refused_where_a_queue_is_required(make: Any) -> None:
    decision = validate(request(POD, make()), cluster(), GatingPolicy())
    assert not decision.allowed
    assert "namespace 'team-a' requires pods that use devices to go through a draq queue" in decision.message
    assert "the webhook's default for managed namespaces" in decision.message
    assert f"Add the label {QUEUE_LABEL} naming a LocalQueue" in decision.message


def test_the_namespace_label_allows_devices_off_queue_or_requires_a_queue() -> None:
    lookups = cluster({"open": {MANAGED_LABEL: "true", DEVICE_POLICY_LABEL: "allow"},
                       "strict": {MANAGED_LABEL: "true", DEVICE_POLICY_LABEL: "require-queue"}})
    allowing = GatingPolicy(default_device_policy="allow")
    assert validate(request(POD, gpu_pod(namespace="open")), lookups, GatingPolicy()).allowed
    assert validate(request(POD, gpu_pod()), lookups, allowing).allowed
    strict = validate(request(POD, gpu_pod(namespace="strict")), lookups, allowing)
    assert not strict.allowed and f"the namespace label {DEVICE_POLICY_LABEL}=require-queue" in strict.message


def test_an_unknown_policy_value_requires_a_queue() -> None:
    lookups = cluster({"typo": {MANAGED_LABEL: "true", DEVICE_POLICY_LABEL: "alow"}})
    decision = validate(request(POD, gpu_pod(namespace="typo")), lookups, GatingPolicy(default_device_policy="allow"))
    assert not decision.allowed and "'alow', which is not one of require-queue, allow" in decision.message


def test_pods_without_devices_and_unmanaged_namespaces_pass() -> None:
    assert validate(request(POD, manifests.pod("p", "team-a")), cluster(), GatingPolicy()).allowed
    assert validate(request(POD, gpu_pod(namespace="plain")), cluster(), GatingPolicy()).allowed


def test_a_static_pods_mirror_passes() -> None:
    mirror = gpu_pod()
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    assert validate(request(POD, mirror), cluster(), GatingPolicy()).allowed


# ----- owner exemptions -----------------------------------------------------------------------------------
def test_a_verified_exempt_owner_lets_its_pods_use_devices_off_queue() -> None:
    lookups = with_agent(cluster())
    assert validate(request(POD, gpu_pod(owner=DS_OWNER)), lookups, EXEMPT_DAEMONSETS).allowed
    queued = gpu_pod(namespace="team-b", owner=DS_OWNER)
    assert mutate(request(POD, queued), with_agent(lookups, "team-b"), EXEMPT_DAEMONSETS).patch == ()


def test_a_made_up_owner_is_named_missing_and_exempts_nothing() -> None:
    decision = validate(request(POD, gpu_pod(owner=DS_OWNER)), cluster(), EXEMPT_DAEMONSETS)
    assert not decision.allowed
    assert "owner DaemonSet team-a/agent does not exist or could not be read" in decision.message
    assert ObjectRef("DaemonSet", "team-a", "agent") in decision.missing


def test_a_made_up_owner_in_a_namespace_with_a_default_queue_is_gated_with_a_warning() -> None:
    decision = mutate(request(POD, gpu_pod(namespace="team-b", owner=DS_OWNER)), cluster(), EXEMPT_DAEMONSETS)
    assert any(op.path == ("spec", "schedulingGates") for op in decision.patch)
    assert ("Pod team-b/p waits in LocalQueue batch like any pod: its owner DaemonSet team-b/agent does not exist or "
            "could not be read, so it exempts the pod from nothing") in decision.warnings
    assert decision.missing == (ObjectRef("DaemonSet", "team-b", "agent"),)


def test_an_owner_with_another_uid_exempts_nothing() -> None:
    decision = validate(request(POD, gpu_pod(owner=DS_OWNER)), with_agent(cluster(), uid="uid-2"), EXEMPT_DAEMONSETS)
    assert not decision.allowed
    assert "names DaemonSet team-a/agent with uid uid-1, but that DaemonSet has uid uid-2" in decision.message
    assert decision.missing == ()


def test_an_owner_kind_the_policy_does_not_exempt_is_queued_as_any_pod() -> None:
    decision = mutate(request(POD, gpu_pod(namespace="team-b", owner=DS_OWNER)), with_agent(cluster(), "team-b"))
    assert any(op.path == ("spec", "schedulingGates") for op in decision.patch)
    assert not [w for w in decision.warnings if "exempt" in w]


def test_policy_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="default device policy 'open'"):
        GatingPolicy(default_device_policy="open")
    with pytest.raises(ValueError, match="exempt owner kinds Deployment: draq can verify only"):
        GatingPolicy(exempt_owner_kinds=frozenset({"Deployment"}))
    with pytest.raises(ValueError, match="max pending groups -1"):
        GatingPolicy(max_pending_groups=-1)


# ----- the cap on pending groups ----------------------------------------------------------------------------
def queued(name: str = "p", group: str = "g") -> dict[str, Any]:
    return manifests.pod(name, "team-a", queue="gpu", group=group, group_min=1, gated=True, container="c")


def test_a_pod_that_would_start_a_group_past_the_cap_is_refused() -> None:
    lookups = cluster()
    lookups.pending[("team-a", "gpu")] = 3
    decision = validate(request(POD, queued()), lookups, GatingPolicy(max_pending_groups=3))
    assert not decision.allowed
    assert decision.message == (
        "Pod team-a/p would start group 'g' in LocalQueue team-a/gpu, which already holds 3 pending groups, at or "
        "over its cap of 3 (the webhook's default, as the queue sets no spec.maxPendingGroups). Wait until some "
        "are admitted, delete groups nobody waits for (kubectl get podgroups -n team-a), or ask the queue's owner "
        "to raise spec.maxPendingGroups")
    assert validate(request(POD, queued()), lookups, GatingPolicy(max_pending_groups=4)).allowed


def test_members_of_existing_groups_pass_past_the_cap() -> None:
    lookups = cluster()
    lookups.pending[("team-a", "gpu")] = 10
    lookups.pod_groups[("team-a", "g")] = {"metadata": {"name": "g"}, "status": {"phase": "Admitted"}}
    assert validate(request(POD, queued("p-1")), lookups, GatingPolicy(max_pending_groups=1)).allowed


def test_the_queues_own_cap_wins_and_zero_means_none() -> None:
    lookups = cluster()
    lookups.pending[("team-a", "gpu")] = 5
    lookups.local_queues[("team-a", "gpu")]["spec"]["maxPendingGroups"] = 5
    refused = validate(request(POD, queued()), lookups, GatingPolicy(max_pending_groups=100))
    assert not refused.allowed and "cap of 5 (its spec.maxPendingGroups)" in refused.message
    lookups.local_queues[("team-a", "gpu")]["spec"]["maxPendingGroups"] = 0
    assert validate(request(POD, queued()), lookups, GatingPolicy(max_pending_groups=1)).allowed


def test_the_gate_is_still_required_under_the_cap() -> None:
    ungated = queued()
    ungated["spec"]["schedulingGates"] = []
    decision = validate(request(POD, ungated), cluster(), GatingPolicy())
    assert not decision.allowed and GATE in decision.message and GROUP_LABEL not in decision.message
