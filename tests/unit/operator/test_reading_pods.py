"""Pods in the operator's cache and reading: every pod keeps what the node filters read, only managed pods
are group members, and a pod already running on a node takes its room from a group."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from admission.core.labels import GATE
from admission.operator.cache import OPERATOR_RESOURCES
from tests.support.builders import HOSTNAME_LABEL, container, gpu, node, pod, resource_slice, toleration, with_spec
from tests.unit.cycle.cycle_builders import NS, gang
from tests.unit.operator.operator_world import cluster, gates_of, started

PROJECT_POD = next(project for resource, project in OPERATOR_RESOURCES if resource.kind == "Pod")


def full_pod(**labels: str) -> dict[str, Any]:
    manifest = with_spec(pod("web", "apps", labels=labels, node="node-0", phase="Running"),
                         containers=[{**container(requests={"cpu": "2"}), "image": "nginx", "env": [{"name": "A"}]}],
                         initContainers=[container("proxy", requests={"cpu": "1"}, restart_policy="Always")],
                         tolerations=[toleration("gpu", operator="Exists")], overhead={"cpu": "100m"},
                         volumes=[{"name": "data", "emptyDir": {}}], serviceAccountName="web")
    manifest["metadata"].update(resourceVersion="7", uid="u-1", managedFields=[{"manager": "kubectl"}],
                                annotations={"big": "x" * 100,
                                             "kubectl.kubernetes.io/last-applied-configuration": "{}"})
    manifest["status"] = {"phase": "Running", "conditions": [{"type": "Ready"}], "podIP": "10.0.0.1"}
    return manifest


def test_other_pods_keep_what_the_node_filters_read() -> None:
    projected = PROJECT_POD(full_pod(app="web"))
    assert projected["metadata"] == {"name": "web", "namespace": "apps", "uid": "u-1", "resourceVersion": "7",
                                     "labels": {"app": "web"}, "annotations": {"big": "x" * 100}}
    assert projected["spec"] == {
        "nodeName": "node-0", "tolerations": [{"key": "gpu", "operator": "Exists"}], "overhead": {"cpu": "100m"},
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}],
        "initContainers": [{"name": "proxy", "resources": {"requests": {"cpu": "1"}}, "restartPolicy": "Always"}]}
    assert projected["status"] == {"phase": "Running"}


def test_other_pods_of_separately_decoded_answers_share_their_repeated_strings() -> None:
    first, second = (PROJECT_POD(json.loads(json.dumps(full_pod(app="web")))) for _ in range(2))
    assert first == second
    assert first["spec"]["nodeName"] is second["spec"]["nodeName"]
    assert first["metadata"]["labels"]["app"] is second["metadata"]["labels"]["app"]
    assert first["spec"]["containers"][0]["resources"]["requests"]["cpu"] is \
        second["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    assert first["status"]["phase"] is second["status"]["phase"]


def test_managed_pods_stay_whole_less_managed_fields() -> None:
    projected = PROJECT_POD(full_pod(**{"draq.io/queue": "lq"}))
    assert projected["spec"]["volumes"] and projected["status"]["podIP"] == "10.0.0.1"
    assert "managedFields" not in projected["metadata"] and projected["metadata"]["annotations"]


def test_a_running_pod_of_someone_else_takes_its_node_and_is_no_group_member() -> None:
    async def go() -> None:
        api = cluster(nodes=0)
        small = {"cpu": "4", "memory": "16Gi", "pods": "110"}
        for name in ("node-0", "node-1"):
            api.add(node(name, {HOSTNAME_LABEL: name}, allocatable=small),
                    resource_slice(name, *(gpu(f"gpu-{i}") for i in range(4)), name=f"{name}-gpus"))
        busy = with_spec(pod("busy", "apps", node="node-0", phase="Running"),
                         containers=[container(requests={"cpu": "3"})])
        api.add(busy, *[with_spec(m, containers=[container(requests={"cpu": "2"})]) if m["kind"] == "Pod" else m
                        for m in gang("train", 2, 1)])
        operator = await started(api)
        reading = operator.reader.read()
        snapshot = reading.cycle.snapshot
        assert snapshot.node_fit.usage.on("node-0") == {"cpu": 3000, "pods": 1}
        assert [g.key for g in reading.cycle.groups] == [f"{NS}/train"]
        assert reading.pod_manifest("apps", "busy") is None and reading.pod_manifest(NS, "train-0") is not None
        await operator.reconcile()
        group = api.get_object("PodGroup", NS, "train")
        assert group is not None and group["status"]["phase"] == "Admitted"
        # 2 + 2 cpu do not fit next to the 3 already on node-0: both members go to node-1.
        assert {p["node"] for p in group["status"]["plan"]["pods"]} == {"node-1"}
        assert GATE not in gates_of(api, "train-0")
        # A pod that did not change is not parsed again.
        again = operator.reader.read()
        assert again.cycle.snapshot.pods["apps/busy"] is snapshot.pods["apps/busy"]

    asyncio.run(go())
