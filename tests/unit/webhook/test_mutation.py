"""The mutating webhook: gate and labels on managed pods, nothing on the others."""

from __future__ import annotations

from typing import Any

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.review import GatingPolicy, label_value, mutate
from admission.core.review.envelope import ObjectRef, render_response

from .builders import POD, apply_patch, cluster, decode_patch, job_owner, pod, request, review


def mutated(obj: dict[str, Any], lookups: Any = None, **kwargs: Any) -> dict[str, Any]:
    document = review(POD, obj, **kwargs)
    from admission.core.review.envelope import parse_review

    decision = mutate(parse_review(document), lookups or cluster())
    assert decision.allowed
    patch = decode_patch(render_response("u", decision))
    result: dict[str, Any] = apply_patch(obj, patch)
    return result


def test_labelled_pod_without_gates_gets_the_gate_and_group_labels() -> None:
    original = pod("lone", labels={QUEUE_LABEL: "gpu"})
    assert "schedulingGates" not in original["spec"]
    result = mutated(original)
    assert result["spec"]["schedulingGates"] == [{"name": GATE}]
    assert result["metadata"]["labels"] == {QUEUE_LABEL: "gpu", GROUP_LABEL: "lone", GROUP_MIN_LABEL: "1"}


def test_default_queue_pod_with_no_labels_at_all() -> None:
    original = pod("x", namespace="team-b")
    assert "labels" not in original["metadata"]
    result = mutated(original)
    assert result["metadata"]["labels"] == {QUEUE_LABEL: "batch", GROUP_LABEL: "x", GROUP_MIN_LABEL: "1"}
    assert result["spec"]["schedulingGates"] == [{"name": GATE}]


def test_null_labels_and_null_gates_are_replaced() -> None:
    original = pod("x", namespace="team-b")
    original["metadata"]["labels"] = None
    original["spec"]["schedulingGates"] = None
    result = mutated(original)
    assert result["metadata"]["labels"][QUEUE_LABEL] == "batch"
    assert result["spec"]["schedulingGates"] == [{"name": GATE}]


def test_existing_gates_are_kept_and_ours_appended() -> None:
    result = mutated(pod("x", labels={QUEUE_LABEL: "gpu", "app": "t"}, gates=["other.io/wait"]))
    assert result["spec"]["schedulingGates"] == [{"name": "other.io/wait"}, {"name": GATE}]
    assert result["metadata"]["labels"]["app"] == "t"


def test_mutation_is_idempotent() -> None:
    once = mutated(pod("x", labels={QUEUE_LABEL: "gpu"}))
    twice = mutated(once)
    assert once == twice


def test_user_group_and_min_are_kept() -> None:
    labels = {QUEUE_LABEL: "gpu", GROUP_LABEL: "trainers", GROUP_MIN_LABEL: "4"}
    result = mutated(pod("x", labels=labels))
    assert {k: result["metadata"]["labels"][k] for k in labels} == labels


def test_user_group_without_min_gets_no_invented_min() -> None:
    result = mutated(pod("x", labels={QUEUE_LABEL: "gpu", GROUP_LABEL: "trainers"}))
    assert GROUP_MIN_LABEL not in result["metadata"]["labels"]


def test_job_pods_form_a_group_named_after_the_job_sized_by_parallelism() -> None:
    lookups = cluster()
    lookups.jobs[("team-a", "train")] = {"spec": {"parallelism": 4, "completions": 8}}
    result = mutated(pod("train-abc", labels={QUEUE_LABEL: "gpu"}, owner=job_owner("train")), lookups)
    assert result["metadata"]["labels"][GROUP_LABEL] == "train"
    assert result["metadata"]["labels"][GROUP_MIN_LABEL] == "4"


def test_job_group_never_waits_for_more_pods_than_completions() -> None:
    lookups = cluster()
    lookups.jobs[("team-a", "train")] = {"spec": {"parallelism": 4, "completions": 2}}
    result = mutated(pod("t", labels={QUEUE_LABEL: "gpu"}, owner=job_owner("train")), lookups)
    assert result["metadata"]["labels"][GROUP_MIN_LABEL] == "2"


def test_unknown_job_is_reported_missing() -> None:
    decision = mutate(request(POD, pod("t", labels={QUEUE_LABEL: "gpu"}, owner=job_owner("gone"))), cluster())
    assert decision.allowed and decision.missing == (ObjectRef("Job", "team-a", "gone"),)
    assert any("gone" in w for w in decision.warnings)


def test_generate_name_pods_get_a_unique_group() -> None:
    first = mutated(pod("", labels={QUEUE_LABEL: "gpu"}, generate_name="web-"), uid="1111-2222-3333")
    second = mutated(pod("", labels={QUEUE_LABEL: "gpu"}, generate_name="web-"), uid="4444-5555-6666")
    groups = {first["metadata"]["labels"][GROUP_LABEL], second["metadata"]["labels"][GROUP_LABEL]}
    assert len(groups) == 2 and all(g.startswith("web-") for g in groups)


def test_unmanaged_namespace_pod_passes_untouched() -> None:
    decision = mutate(request(POD, pod("x", namespace="plain", labels={QUEUE_LABEL: "gpu"})), cluster())
    assert decision.allowed and decision.patch == ()


def test_managed_namespace_pod_without_queue_passes_untouched() -> None:
    decision = mutate(request(POD, pod("x")), cluster())
    assert decision.allowed and decision.patch == ()


def test_verified_exempt_owner_and_mirror_pods_are_not_managed() -> None:
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "1", "controller": True}
    lookups = cluster()
    lookups.owners[("DaemonSet", "team-b", "ds")] = {"metadata": {"name": "ds", "namespace": "team-b", "uid": "1"}}
    exempting = GatingPolicy(exempt_owner_kinds=frozenset({"DaemonSet"}))
    assert mutate(request(POD, pod("d", namespace="team-b", owner=owner)), lookups, exempting).patch == ()
    mirror = pod("m", namespace="team-b")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    assert mutate(request(POD, mirror), cluster()).patch == ()


def test_unknown_namespace_is_reported_missing() -> None:
    decision = mutate(request(POD, pod("x", namespace="new")), cluster())
    assert decision.allowed and decision.missing == (ObjectRef("Namespace", "", "new"),)


def test_updates_and_other_kinds_are_not_mutated() -> None:
    obj = pod("x", labels={QUEUE_LABEL: "gpu"})
    assert mutate(request(POD, obj, operation="UPDATE", old=obj), cluster()).patch == ()


def test_label_value_shortens_long_names_validly() -> None:
    long_name = "a" * 80 + ".b"
    value = label_value(long_name)
    assert len(value) <= 63 and value[0].isalnum() and value[-1].isalnum()
    assert label_value(long_name) == value != label_value("a" * 81 + ".b")
    assert label_value("train") == "train"
