"""`draq demo`'s JobSet and LeaderWorkerSet: what the demo submits is one gang per JobSet and per replica group,
needs no in-order startup, names queues and claim templates the demo creates, and draq runs with the
integrations (and the chart's RBAC files) those kinds need."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from admission.cli import demo
from admission.core.labels import QUEUE_LABEL
from admission.core.workloads import BY_KIND, with_required
from admission.localcluster import rbac, standins


def manifests(*names: str) -> list[dict[str, Any]]:
    return [doc for name in names for doc in yaml.safe_load_all(Path(demo.DEMO_MANIFESTS / name).read_text())
            if doc]


def the(kind: str) -> dict[str, Any]:
    [found] = [m for m in manifests("integrations.yaml") if m["kind"] == kind]
    return found


def declared(obj: dict[str, Any]) -> int:
    shape = BY_KIND[obj["kind"]].shape
    assert shape is not None
    return sum(count for _, _, count in shape(obj))


def test_every_manifest_the_demo_submits_exists() -> None:
    for name in (*demo.FIRST_WORKLOADS, *demo.LATER_WORKLOADS):
        assert (demo.DEMO_MANIFESTS / name).is_file(), name


def test_the_jobset_is_one_gang_of_a_launcher_and_two_workers_started_in_any_order() -> None:
    jobset = the("JobSet")
    assert "startupPolicy" not in jobset["spec"]
    assert declared(jobset) == 3
    jobs = standins.child_jobs({**jobset, "metadata": {**jobset["metadata"], "uid": "u"}}, {})
    assert [(j["metadata"]["name"], j["spec"]["parallelism"]) for j in jobs] == [
        ("pretrain-launcher-0", 1), ("pretrain-workers-0", 2)]


def test_the_leaderworkerset_has_two_replica_groups_of_a_leader_and_a_worker_created_at_once() -> None:
    lws = the("LeaderWorkerSet")
    assert lws["spec"].get("startupPolicy", "LeaderCreated") == "LeaderCreated"
    assert (lws["spec"]["replicas"], declared(lws)) == (2, 2)


def test_the_workloads_name_local_queues_and_claim_templates_the_demo_creates() -> None:
    created = manifests("queues.yaml", "workloads.yaml", "integrations.yaml")
    local_queues = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in created if m["kind"] == "LocalQueue"}
    templates = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in created
                 if m["kind"] == "ResourceClaimTemplate"}
    for obj in (the("JobSet"), the("LeaderWorkerSet")):
        namespace = obj["metadata"]["namespace"]
        assert (namespace, obj["metadata"]["labels"][QUEUE_LABEL]) in local_queues
        text = yaml.safe_dump(obj)
        named = {line.split(":", 1)[1].strip() for line in text.splitlines() if "resourceClaimTemplateName" in line}
        assert named and {(namespace, n) for n in named} <= templates, named


def test_draq_runs_with_the_integrations_and_rights_of_both_kinds() -> None:
    assert set(with_required(demo.INTEGRATIONS)) == set(demo.INTEGRATIONS)
    [role] = [m for m in rbac.manifests("draq-system", rights=rbac.Rights(frameworks=demo.INTEGRATIONS))
              if m["kind"] == "ClusterRole"]
    readable = {resource for rule in role["rules"] if "watch" in rule["verbs"] for resource in rule["resources"]}
    assert {"jobsets", "leaderworkersets", "jobs", "statefulsets"} <= readable
