"""The kinds table: suspend fields by their real paths, and the integrations."""

from __future__ import annotations

import pytest

from admission.core.workloads import BY_KIND, FRAMEWORKS, KINDS, enabled_kinds


def test_suspend_patches_use_each_apis_field() -> None:
    assert BY_KIND["Job"].suspend_patch(True) == {"spec": {"suspend": True}}
    assert BY_KIND["PyTorchJob"].suspend_patch(False) == {"spec": {"runPolicy": {"suspend": False}}}
    assert BY_KIND["MPIJob"].suspended({"spec": {"runPolicy": {"suspend": True}}})
    assert not BY_KIND["RayCluster"].suspended({"spec": {}})


def test_kinds_without_a_suspend_field_are_evicted_by_deleting_pods() -> None:
    assert {k.kind for k in KINDS if not k.suspendable} == {
        "LeaderWorkerSet", "ReplicaSet", "Deployment", "StatefulSet", "Workload"}


def test_every_kind_belongs_to_a_known_integration_and_names_are_unique() -> None:
    assert {k.framework for k in KINDS} == set(FRAMEWORKS)
    assert len(BY_KIND) == len(KINDS)


def test_enabled_kinds_follow_the_integrations() -> None:
    assert [k.kind for k in enabled_kinds(["deployment"])] == ["ReplicaSet", "Deployment"]


def test_an_unknown_integration_is_named() -> None:
    with pytest.raises(ValueError, match="unknown integration\\(s\\) batch/jobs; known: batch/job"):
        enabled_kinds(["batch/jobs"])
