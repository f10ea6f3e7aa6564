"""Each kind's owner chain, group identity, declared size, queue and eviction target."""

from __future__ import annotations

import pytest

from admission.core.models import ObjectRef
from admission.core.workloads import KINDS, Membership, declared_shape, membership, walk_key
from tests.unit.workloads.manifests import GPU_TEMPLATE, NS, Store, job_spec, obj, owner_ref, pod

ALL = frozenset(k.kind for k in KINDS)
JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def jobset(name: str = "train", owner: dict | None = None, labels: dict | None = None) -> dict:
    return obj(JOBSET_API, "JobSet", name, {"replicatedJobs": [
        {"name": "driver", "replicas": 1, "template": {"spec": job_spec(1, 1)}},
        {"name": "workers", "replicas": 2, "template": {"spec": job_spec(4, 4)}},
    ], "suspend": False}, owner, labels)


def jobset_pod(jobset_name: str = "train") -> dict:
    job = f"{jobset_name}-workers-0"
    return pod(f"{job}-0-abcde", owner_ref("batch/v1", "Job", job),
               {"jobset.sigs.k8s.io/jobset-name": jobset_name, "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                "batch.kubernetes.io/job-name": job})


def jobset_job(jobset_name: str = "train") -> dict:
    return obj("batch/v1", "Job", f"{jobset_name}-workers-0", job_spec(4, 4),
               owner_ref(JOBSET_API, "JobSet", jobset_name))


def test_job_is_one_gang_sized_by_parallelism_capped_by_completions() -> None:
    job = obj("batch/v1", "Job", "j", job_spec(8, 3), labels={"draq.io/queue": "gpus"})
    member = membership(pod("j-0", owner_ref("batch/v1", "Job", "j")), Store(job), ALL)
    assert (member.group, member.minimum, member.queue) == ("j", 3, "gpus")
    assert member.suspend == ObjectRef("Job", NS, "j")


def test_jobset_is_one_gang_of_all_its_jobs_and_is_suspended_itself() -> None:
    member = membership(jobset_pod(), Store(jobset_job(), jobset(labels={"draq.io/queue": "big"})), ALL)
    assert member.group == "train"
    assert member.chain == (ObjectRef("Job", NS, "train-workers-0"), ObjectRef("JobSet", NS, "train"))
    assert member.minimum == 1 + 2 * 4
    assert [(name, count) for name, _, count in member.roles] == [("driver", 1), ("workers", 8)]
    assert member.suspend == ObjectRef("JobSet", NS, "train") and member.queue == "big"


def test_trainjob_owns_the_jobset_and_is_the_group_and_the_suspend_target() -> None:
    trainjob = obj("trainer.kubeflow.org/v1alpha1", "TrainJob", "llm", {"runtimeRef": {"name": "torch-distributed"}},
                   labels={"draq.io/queue": "research"})
    store = Store(jobset_job("llm"), jobset("llm", owner_ref("trainer.kubeflow.org/v1alpha1", "TrainJob", "llm")),
                  trainjob)
    member = membership(jobset_pod("llm"), store, ALL)
    assert (member.group, member.top, member.queue) == ("llm", ObjectRef("TrainJob", NS, "llm"), "research")
    assert member.minimum == 9  # the JobSet it runs declares the members
    assert member.suspend == ObjectRef("TrainJob", NS, "llm")


def test_a_missing_owner_stops_the_walk_and_is_named() -> None:
    member = membership(jobset_pod(), Store(jobset_job()), ALL)
    assert member.missing == ObjectRef("JobSet", NS, "train")
    assert not member.gang


def test_a_disabled_parent_leaves_the_child_as_the_top() -> None:
    member = membership(jobset_pod(), Store(jobset_job(), jobset()), frozenset({"Job"}))
    assert (member.group, member.minimum) == ("train-workers-0", 4)


LWS_API = "leaderworkerset.x-k8s.io/v1"


def lws() -> dict:
    return obj(LWS_API, "LeaderWorkerSet", "serve", {"replicas": 2, "leaderWorkerTemplate": {
        "size": 4, "workerTemplate": GPU_TEMPLATE, "restartPolicy": "RecreateGroupOnPodRestart"}},
        labels={"draq.io/queue": "inference"})


def lws_labels(index: int, worker: int) -> dict:
    return {"leaderworkerset.sigs.k8s.io/name": "serve", "leaderworkerset.sigs.k8s.io/group-index": str(index),
            "leaderworkerset.sigs.k8s.io/worker-index": str(worker)}


@pytest.mark.parametrize(("pod_name", "statefulset", "worker"), [("serve-1", "serve", 0), ("serve-1-3", "serve-1", 3)])
def test_leaderworkerset_replica_group_holds_leader_and_workers(pod_name: str, statefulset: str, worker: int) -> None:
    member = membership(pod(pod_name, owner_ref("apps/v1", "StatefulSet", statefulset), lws_labels(1, worker)),
                        Store(lws()), ALL)
    assert (member.group, member.minimum, member.queue) == ("serve-1", 4, "inference")
    assert [(name, count) for name, _, count in member.roles] == [("leader", 1), ("worker", 3)]
    assert member.suspend is None  # no suspend field: its pods are deleted and recreated


def test_leaderworkerset_labels_that_contradict_the_statefulset_are_a_problem() -> None:
    member = membership(pod("x", owner_ref("apps/v1", "StatefulSet", "other"), lws_labels(1, 0)), Store(lws()), ALL)
    assert "contradict the pod's owner StatefulSet 'other'" in member.problem and not member.gang


@pytest.mark.parametrize(("kind", "field", "roles"), [
    ("PyTorchJob", "pytorchReplicaSpecs", {"Master": 1, "Worker": 3}),
    ("MPIJob", "mpiReplicaSpecs", {"Launcher": 1, "Worker": 2}),
])
def test_kubeflow_jobs_are_gangs_of_their_replica_specs(kind: str, field: str, roles: dict[str, int]) -> None:
    spec = {field: {role: {"replicas": n, "restartPolicy": "OnFailure", "template": GPU_TEMPLATE}
                    for role, n in roles.items()}, "runPolicy": {"suspend": False}}
    member = membership(pod("bert-worker-0", owner_ref("kubeflow.org/v1", kind, "bert"),
                            {"training.kubeflow.org/job-name": "bert"}),
                        Store(obj("kubeflow.org/v1", kind, "bert", spec)), ALL)
    assert (member.group, member.minimum) == ("bert", sum(roles.values()))
    assert member.suspend == ObjectRef(kind, NS, "bert")


def raycluster(name: str, owner: dict | None = None) -> dict:
    return obj("ray.io/v1", "RayCluster", name, {
        "headGroupSpec": {"rayStartParams": {}, "template": GPU_TEMPLATE},
        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 4,
                              "numOfHosts": 2, "rayStartParams": {}, "template": GPU_TEMPLATE}]}, owner)


def ray_pod(cluster: str) -> dict:
    return pod(f"{cluster}-gpu-worker-x1", owner_ref("ray.io/v1", "RayCluster", cluster),
               {"ray.io/cluster": cluster, "ray.io/node-type": "worker", "ray.io/group": "gpu"})


def test_raycluster_is_a_gang_of_head_and_min_workers_times_hosts() -> None:
    member = membership(ray_pod("rc"), Store(raycluster("rc")), ALL)
    assert (member.group, member.minimum, member.suspend) == ("rc", 1 + 2 * 2, ObjectRef("RayCluster", NS, "rc"))


def test_rayjob_is_the_group_of_the_cluster_it_created() -> None:
    cluster = "rj-raycluster-k7x2p"
    store = Store(raycluster(cluster, owner_ref("ray.io/v1", "RayJob", "rj")), obj("ray.io/v1", "RayJob", "rj", {}))
    member = membership(ray_pod(cluster), store, ALL)
    assert (member.group, member.minimum, member.suspend) == ("rj", 5, ObjectRef("RayJob", NS, "rj"))


def test_deployment_pods_are_each_their_own_group_with_the_deployments_queue() -> None:
    deployment = obj("apps/v1", "Deployment", "web", {"replicas": 3}, labels={"draq.io/queue": "web"})
    replica_set = obj("apps/v1", "ReplicaSet", "web-5d8f7c", {"replicas": 3},
                      owner_ref("apps/v1", "Deployment", "web"))
    member = membership(pod("web-5d8f7c-abcde", owner_ref("apps/v1", "ReplicaSet", "web-5d8f7c")),
                        Store(replica_set, deployment), ALL)
    assert not member.gang and member.queue == "web" and member.suspend is None
    assert member.top == ObjectRef("Deployment", NS, "web")


def test_statefulset_pods_are_each_their_own_group() -> None:
    member = membership(pod("db-0", owner_ref("apps/v1", "StatefulSet", "db")),
                        Store(obj("apps/v1", "StatefulSet", "db", {"replicas": 2})), ALL)
    assert not member.gang and member.top == ObjectRef("StatefulSet", NS, "db") and member.suspend is None


def test_bare_pod_is_its_own_group() -> None:
    assert membership(pod("lone"), Store(), ALL) == Membership()


def test_unknown_owner_kind_is_reported_and_the_pod_is_its_own_group() -> None:
    member = membership(pod("x", owner_ref("example.com/v1", "Widget", "w")), Store(), ALL)
    assert member.unknown_owner == "Widget w (example.com/v1)" and not member.gang


def test_a_kind_of_the_same_name_in_another_api_group_is_unknown() -> None:
    member = membership(pod("x", owner_ref("example.com/v1", "Job", "j")), Store(), ALL)
    assert member.unknown_owner.startswith("Job j") and not member.gang


def workload(pod_groups: list) -> dict:
    return obj("scheduling.k8s.io/v1alpha1", "Workload", "w", {"podGroups": pod_groups})


def test_native_workload_pod_group_gives_the_minimum() -> None:
    member = membership(pod("w-0", spec={"workloadRef": {"name": "w", "podGroup": "workers"}}),
                        Store(workload([{"name": "workers", "policy": {"gang": {"minCount": 4}}}])), ALL)
    assert (member.group, member.minimum) == ("w", 4)


def test_native_workload_with_an_unknown_pod_group_is_a_problem() -> None:
    member = membership(pod("w-0", spec={"workloadRef": {"name": "w", "podGroup": "nope"}}),
                        Store(workload([{"name": "workers", "policy": {"basic": {}}}])), ALL)
    assert "'nope' is not a pod group of Workload team-a/w (it has 'workers')" in member.problem


def test_declared_shape_parses_the_templates() -> None:
    member = membership(jobset_pod(), Store(jobset_job(), jobset()), ALL)
    shape = declared_shape(member)
    assert shape is not None and shape.owner == ObjectRef("JobSet", NS, "train") and shape.total == 9
    worker = shape.roles[1].template
    assert worker.name == "" and worker.namespace == NS
    assert worker.resource_claims[0].resource_claim_template_name == "one-gpu"


def test_an_owner_loop_ends() -> None:
    a = obj("batch/v1", "Job", "a", job_spec(), owner_ref("batch/v1", "Job", "b"))
    b = obj("batch/v1", "Job", "b", job_spec(), owner_ref("batch/v1", "Job", "a"))
    store = Store(a, b)
    membership(pod("p", owner_ref("batch/v1", "Job", "a")), store, ALL)
    assert len(store.reads) <= 8


def test_a_leader_without_the_group_index_label_takes_its_pod_index() -> None:
    from admission.core.workloads import membership as member_of

    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "serve", "namespace": "ns", "uid": "u1", "labels": {"draq.io/queue": "lq"}},
           "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": {"spec": {}}}}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "serve-1", "namespace": "ns",
                        "labels": {"leaderworkerset.sigs.k8s.io/name": "serve", "apps.kubernetes.io/pod-index": "1"},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "serve",
                                             "uid": "s1", "controller": True}]},
           "spec": {}}

    class Owners:
        def owner(self, kind: str, namespace: str, name: str) -> dict[str, object] | None:
            return lws if (kind, name) == ("LeaderWorkerSet", "serve") else None

    found = member_of(pod, Owners(), frozenset({"LeaderWorkerSet", "StatefulSet"}))
    assert (found.group, found.queue, found.minimum, found.problem) == ("serve-1", "lq", 3, "")


def leader(index: int) -> dict:
    return pod(f"serve-{index}", owner_ref("apps/v1", "StatefulSet", "serve"),
               {"leaderworkerset.sigs.k8s.io/name": "serve", "apps.kubernetes.io/pod-index": str(index)})


def test_leaders_of_one_statefulset_are_walked_apart_by_their_pod_index() -> None:
    """Leaders share their owner StatefulSet but not their group: a reader walking once per key must tell them
    apart, and find each one's own replica group."""
    keys = {walk_key(leader(i)) for i in range(3)}
    assert len(keys) == 3
    assert [membership(leader(i), Store(lws()), ALL).group for i in range(3)] == ["serve-0", "serve-1", "serve-2"]


def test_pods_alike_in_what_their_membership_reads_share_a_walk_key() -> None:
    workers = [pod(f"serve-1-{w}", owner_ref("apps/v1", "StatefulSet", "serve-1"), lws_labels(1, w)) for w in (1, 2)]
    assert walk_key(workers[0]) == walk_key(workers[1])  # one worker StatefulSet, one replica group
    jobs = [pod(f"train-{i}", owner_ref("batch/v1", "Job", "train"), {"apps.kubernetes.io/pod-index": str(i)})
            for i in range(2)]
    assert walk_key(jobs[0]) == walk_key(jobs[1])  # the pod index is read only for LeaderWorkerSet pods
