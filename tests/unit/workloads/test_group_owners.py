"""A group as its members' owner chains make it: declared shape and minimum, or a problem that keeps it waiting."""

from __future__ import annotations

from dataclasses import replace

from admission.core.cycle import GroupView, with_owners
from admission.core.labels import GATE
from admission.core.models import ObjectMeta, ObjectRef, Pod
from admission.core.quota import PodGroup, parse_pod_group
from admission.core.workloads import KINDS, Membership, membership
from tests.unit.workloads.manifests import NS, Store, job_spec, obj, owner_ref, pod

ALL = frozenset(k.kind for k in KINDS)


def view(name: str, *pods: str, minimum: int = 1) -> GroupView:
    members = tuple(Pod(ObjectMeta(p, NS), scheduling_gates=(GATE,)) for p in pods)
    return GroupView(NS, name, "lq", minimum, 0, "", members)


def job_member(job: str, parallelism: int = 3) -> Membership:
    return membership(pod(f"{job}-0", owner_ref("batch/v1", "Job", job)), Store(obj("batch/v1", "Job", job,
                                                                                    job_spec(parallelism))), ALL)


def test_the_declared_shape_sets_the_minimum() -> None:
    group = with_owners(view("train", "a"), {"a": job_member("train", 3)})
    assert group.min_member == 3 and group.declared is not None
    assert group.declared.owner == ObjectRef("Job", NS, "train") and not group.problem


def test_a_minimum_label_above_the_declared_shape_is_a_problem() -> None:
    group = with_owners(view("train", "a", minimum=5), {"a": job_member("train", 3)})
    assert group.problem == ("label draq.io/group-min: 5 is above the 3 members Job team-a/train declares; "
                             "lower it, or raise the owner's size")


def test_two_objects_claiming_one_group_is_a_problem() -> None:
    jobset = membership(
        pod("x", owner_ref("batch/v1", "Job", "train-w-0")),
        Store(obj("batch/v1", "Job", "train-w-0", job_spec(), owner_ref("jobset.x-k8s.io/v1alpha2", "JobSet", "train")),
              obj("jobset.x-k8s.io/v1alpha2", "JobSet", "train", {"replicatedJobs": []})), ALL)
    group = with_owners(view("train", "a", "b"), {"a": job_member("train"), "b": jobset})
    assert group.problem.startswith("Job team-a/train and JobSet team-a/train both claim group 'train'")


def test_a_label_that_contradicts_the_chain_is_a_problem() -> None:
    group = with_owners(view("mine", "a"), {"a": job_member("train")})
    assert "label draq.io/pod-group: 'mine' contradicts its owner chain" in group.problem


def test_an_unreadable_owner_names_the_object_and_the_right() -> None:
    member = Membership(chain=(ObjectRef("JobSet", NS, "t"),), missing=ObjectRef("JobSet", NS, "t"))
    group = with_owners(view("t", "a"), {"a": member})
    assert group.problem == (f"pod {NS}/a is owned by JobSet {NS}/t, which draq cannot read: it was deleted, or "
                             "draq lacks get/list/watch on jobsets.jobset.x-k8s.io (enable its integration in the "
                             "chart's integrations.frameworks)")


def test_a_group_that_holds_quota_does_not_change() -> None:
    admitted = replace(view("mine", "a"), pod_group=_admitted())
    assert admitted.holds_quota
    assert with_owners(admitted, {"a": job_member("train")}) == admitted


def test_a_group_that_holds_quota_is_given_its_declared_shape_and_keeps_its_minimum() -> None:
    """Its late members take the slots its plan keeps open by matching the role templates of its shape."""
    admitted = replace(view("train", "a"), pod_group=_admitted("train"))
    group = with_owners(admitted, {"a": job_member("train", 3)})
    assert group.declared is not None and group.declared.total == 3
    assert (group.min_member, group.problem) == (1, "")


def _admitted(name: str = "mine") -> PodGroup:
    return parse_pod_group({"apiVersion": "draq.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": name, "namespace": NS},
                            "spec": {"queue": "lq", "minMember": 1},
                            "status": {"phase": "Admitted", "clusterQueue": "cq"}})
