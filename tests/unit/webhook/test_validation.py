"""The validating webhook: pods, gate removal, label changes, draq's own objects."""

from __future__ import annotations

from typing import Any

from admission.core.labels import DEFAULT_DRAQ_USER, GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.review import GatingPolicy, validate
from admission.core.review.envelope import ObjectRef

from .builders import CLUSTER_QUEUE, LOCAL_QUEUE, POD, FakeLookups, cluster, pod, request

POLICY = GatingPolicy()
GATED = {QUEUE_LABEL: "gpu", GROUP_LABEL: "g", GROUP_MIN_LABEL: "1"}


def check(kind: Any, obj: Any, lookups: FakeLookups | None = None, **kwargs: Any):  # type: ignore[no-untyped-def]
    return validate(request(kind, obj, **kwargs), lookups or cluster(), POLICY)


def test_gated_pod_of_an_existing_queue_is_allowed() -> None:
    assert check(POD, pod("x", labels=GATED, gates=[GATE])).allowed


def test_pod_naming_a_missing_queue_is_denied_with_what_to_do() -> None:
    decision = check(POD, pod("x", labels={**GATED, QUEUE_LABEL: "nope"}, gates=[GATE]))
    assert not decision.allowed and decision.code == 403
    assert "LocalQueue 'nope'" in decision.message and "namespace 'team-a'" in decision.message
    assert "Create it" in decision.message and "label draq.io/queue" in decision.message
    assert decision.missing == (ObjectRef("LocalQueue", "team-a", "nope"),)


def test_missing_default_queue_names_the_namespace_label() -> None:
    lookups = cluster({"team-c": {"draq.io/default-queue": "absent"}})
    decision = check(POD, pod("x", namespace="team-c", gates=[GATE]), lookups)
    assert not decision.allowed and "has the label draq.io/default-queue=absent" in decision.message


def test_missing_default_queue_does_not_blame_the_label_the_mutating_webhook_copied() -> None:
    # A plain pod in a namespace labelled before its LocalQueue exists: the mutating webhook has copied
    # the namespace's default into the pod's queue label, which the user never set.
    lookups = cluster({"team-c": {"draq.io/default-queue": "absent"}})
    decision = check(POD, pod("nginx", namespace="team-c", labels={QUEUE_LABEL: "absent"}, gates=[GATE]), lookups)
    assert not decision.allowed
    assert "namespace 'team-c' has the label draq.io/default-queue=absent" in decision.message
    assert "LocalQueue 'absent', which does not exist" in decision.message
    assert "kubectl label namespace team-c draq.io/default-queue-" in decision.message
    assert "(from label draq.io/queue)" not in decision.message
    assert decision.missing == (ObjectRef("LocalQueue", "team-c", "absent"),)


def test_a_pod_label_naming_another_missing_queue_is_blamed_on_the_label() -> None:
    lookups = cluster({"team-c": {"draq.io/default-queue": "absent"}})
    decision = check(POD, pod("x", namespace="team-c", labels={QUEUE_LABEL: "typo"}, gates=[GATE]), lookups)
    assert not decision.allowed and "LocalQueue 'typo' (from label draq.io/queue)" in decision.message
    assert "kubectl label namespace" not in decision.message


def test_pods_of_unmanaged_namespaces_are_not_checked_unless_they_name_a_queue() -> None:
    assert check(POD, pod("x", namespace="plain", labels={"app": "web"})).allowed
    assert not check(POD, pod("x", namespace="plain", labels={QUEUE_LABEL: "nope"})).allowed


def test_bad_group_min_is_denied() -> None:
    for bad in ("0", "-1", "two", "1e3", "٣"):
        decision = check(POD, pod("x", labels={**GATED, GROUP_MIN_LABEL: bad}, gates=[GATE]))
        assert not decision.allowed and GROUP_MIN_LABEL in decision.message, bad


def test_node_name_bypass_is_denied() -> None:
    obj = pod("x", labels=GATED, gates=[GATE])
    obj["spec"]["nodeName"] = "node-1"
    decision = check(POD, obj)
    assert not decision.allowed and "spec.nodeName" in decision.message


def test_managed_pod_without_gate_is_denied() -> None:
    decision = check(POD, pod("x", labels=GATED))
    assert not decision.allowed and "MutatingWebhookConfiguration" in decision.message


def test_queue_whose_cluster_queue_is_missing_warns() -> None:
    lookups = cluster().with_queue("team-a", "orphan", "ghost")
    del lookups.cluster_queues["ghost"]
    decision = check(POD, pod("x", labels={**GATED, QUEUE_LABEL: "orphan"}, gates=[GATE]), lookups)
    assert decision.allowed and "ghost" in decision.warnings[0]


def _ungated(labels: dict[str, str] = GATED) -> dict[str, Any]:
    return pod("x", labels=labels, gates=[])


def test_gate_removal_by_a_user_is_denied() -> None:
    decision = check(POD, _ungated(), operation="UPDATE", old=pod("x", labels=GATED, gates=[GATE]))
    assert not decision.allowed
    assert DEFAULT_DRAQ_USER in decision.message and "spec.schedulingGates" in decision.message


def test_gate_removal_by_draq_is_allowed() -> None:
    old = pod("x", labels=GATED, gates=[GATE])
    assert check(POD, _ungated(), operation="UPDATE", old=old, username=DEFAULT_DRAQ_USER).allowed


def test_removing_another_gate_is_fine() -> None:
    old = pod("x", labels=GATED, gates=["other.io/x", GATE])
    new = pod("x", labels=GATED, gates=[GATE])
    assert check(POD, new, operation="UPDATE", old=old).allowed


def test_the_allowed_user_is_configurable() -> None:
    old = pod("x", labels=GATED, gates=[GATE])
    request_ = request(POD, _ungated(), operation="UPDATE", old=old, username="system:serviceaccount:ops:q")
    assert validate(request_, cluster(), GatingPolicy(draq_user="system:serviceaccount:ops:q")).allowed
    assert not validate(request_, cluster(), POLICY).allowed


def test_relabelling_an_admitted_pod_is_denied() -> None:
    for key, value in ((QUEUE_LABEL, "other"), (GROUP_LABEL, "h"), (GROUP_MIN_LABEL, "3")):
        decision = check(POD, _ungated({**GATED, key: value}), operation="UPDATE", old=_ungated())
        assert not decision.allowed and key in decision.message and "delete the pod" in decision.message


def test_removing_the_queue_label_of_an_admitted_pod_is_denied() -> None:
    labels = {k: v for k, v in GATED.items() if k != QUEUE_LABEL}
    assert not check(POD, _ungated(labels), operation="UPDATE", old=_ungated()).allowed


def test_other_label_changes_of_an_admitted_pod_are_fine() -> None:
    assert check(POD, _ungated({**GATED, "app": "x"}), operation="UPDATE", old=_ungated()).allowed


def test_gated_pod_keeps_its_queue_even_for_an_existing_one() -> None:
    old = pod("x", labels=GATED, gates=[GATE])
    lookups = cluster().with_queue("team-a", "cpu")
    moved = pod("x", labels={**GATED, QUEUE_LABEL: "cpu"}, gates=[GATE])
    decision = check(POD, moved, lookups, operation="UPDATE", old=old)
    assert not decision.allowed and "cannot be changed to 'cpu'" in decision.message
    assert "delete the pod and create it again" in decision.message


def test_updates_of_unmanaged_pods_pass() -> None:
    old = pod("x", namespace="plain", gates=["x/y"])
    assert check(POD, pod("x", namespace="plain"), operation="UPDATE", old=old).allowed


def _local_queue(cluster_queue: str, namespace: str = "team-a") -> dict[str, Any]:
    return {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": namespace}, "spec": {"clusterQueue": cluster_queue}}


def test_local_queue_naming_a_missing_cluster_queue_is_denied() -> None:
    decision = check(LOCAL_QUEUE, _local_queue("ghost"))
    assert not decision.allowed and "spec.clusterQueue" in decision.message and "'ghost'" in decision.message
    assert decision.missing == (ObjectRef("ClusterQueue", "", "ghost"),)
    assert check(LOCAL_QUEUE, _local_queue("cq")).allowed


def test_local_queue_outside_the_cluster_queue_namespace_selector_is_denied() -> None:
    lookups = cluster()
    lookups.cluster_queues["picky"] = {"spec": {"namespaceSelector": {"matchLabels": {"team": "ml"}}}}
    decision = check(LOCAL_QUEUE, _local_queue("picky"), lookups)
    assert not decision.allowed and "namespaceSelector" in decision.message
    lookups.namespaces["team-a"]["team"] = "ml"
    assert check(LOCAL_QUEUE, _local_queue("picky"), lookups).allowed


def test_local_queue_naming_a_cluster_queue_without_namespace_selector_is_denied() -> None:
    lookups = cluster()
    lookups.cluster_queues["closed"] = {"spec": {"quotas": []}}
    lookups.cluster_queues["open"] = {"spec": {"namespaceSelector": {}}}
    decision = check(LOCAL_QUEUE, _local_queue("closed"), lookups)
    assert not decision.allowed
    assert "field spec.clusterQueue: ClusterQueue 'closed' has no spec.namespaceSelector, so it serves no " \
        "namespace. Its administrator sets a namespaceSelector that matches this namespace (or {} for every " \
        "namespace), or point to another ClusterQueue" in decision.message
    assert check(LOCAL_QUEUE, _local_queue("open"), lookups).allowed  # {} serves every namespace


def test_local_queue_naming_a_cluster_queue_with_an_invalid_namespace_selector_is_denied() -> None:
    lookups = cluster()
    lookups.cluster_queues["odd"] = {"spec": {"namespaceSelector": {
        "matchExpressions": [{"key": "team", "operator": "Near", "values": ["ml"]}]}}}
    decision = check(LOCAL_QUEUE, _local_queue("odd"), lookups)
    assert not decision.allowed and decision.code == 403
    assert "ClusterQueue 'odd' cannot be used: ClusterQueue odd, field " \
        "spec.namespaceSelector.matchExpressions[0].operator: unknown operator 'Near'" in decision.message
    assert "does not serve" not in decision.message


def test_cluster_queue_quoting_missing_units_is_accepted_with_a_warning() -> None:
    lookups = cluster()
    lookups.units["gpus"] = {"spec": {}}
    obj = {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
           "spec": {"quotas": [{"unit": "gpus", "nominal": 8}, {"unit": "memory", "nominal": "1Ti"},
                               {"unit": "mig", "nominal": 2}]}}
    # One apply (or Helm release) may create the queue before its units: accepted, with a warning.
    decision = check(CLUSTER_QUEUE, obj, lookups)
    assert decision.allowed
    [warning] = decision.warnings
    assert "QuotaUnit 'memory', 'mig' does not exist yet" in warning and "admits no group" in warning
    assert {ref.name for ref in decision.missing} == {"memory", "mig"}
    lookups.units["memory"] = lookups.units["mig"] = {"spec": {}}
    decision = check(CLUSTER_QUEUE, obj, lookups)
    assert decision.allowed and not decision.warnings and not decision.missing


def test_cluster_queue_with_bad_preemption_policies_is_denied() -> None:
    def queue(spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}

    refused = [
        ({"preemption": {"withinClusterQueue": "Any"}}, "spec.preemption.withinClusterQueue"),
        ({"preemption": {"reclaimWithinCohort": "LowerPriority"}}, "needs spec.cohort"),
        ({"cohort": "c", "preemption": {"borrowWithinCohort": "Always"}}, "spec.preemption.borrowWithinCohort"),
        ({"preemption": {"minimumRunSeconds": -5}}, "spec.preemption.minimumRunSeconds"),
        ({"fairSharing": {"weight": "-1"}}, "spec.fairSharing.weight"),
    ]
    for spec, words in refused:
        decision = check(CLUSTER_QUEUE, queue(spec))
        assert not decision.allowed and words in decision.message, (spec, decision.message)
    good = {"cohort": "c", "fairSharing": {"weight": "1.5"},
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                           "borrowWithinCohort": "LowerPriority", "minimumRunSeconds": 600}}
    assert check(CLUSTER_QUEUE, queue(good)).allowed
