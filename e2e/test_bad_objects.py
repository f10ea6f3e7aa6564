"""A bad object hurts only what uses it, on the real control plane: a QuotaUnit whose weight compiles but
fails on the cluster's devices stops only the ClusterQueue that quotes it. Its groups wait, saying which
unit, device and CEL error; the unit says so in its Ready condition and a Warning Event; another queue
admits as usual; once the unit is fixed, the waiting group is admitted.

Pods are created gated and labelled directly (the webhook is not involved), as in test_operator.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.localcluster.controlplane import ControlPlane
from admission.localcluster.nodesim import NodeSimulator
from e2e.test_operator import GPU_CLASS, RunningOperator, apply, crds, gated, pod_group, settings
from e2e.waiting import until

__all__ = ["crds"]  # the fixture, shared with test_operator.py

DRAQ = ("draq.io", "v1alpha1")
FAILING = f'device.attributes["{GPU_CLASS}"].missing * 2'


def draq(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "draq.io/v1alpha1", "kind": kind, "metadata": metadata, "spec": spec}


def member(namespace: str, group: str, queue: str, node: str) -> list[dict[str, Any]]:
    """One gated pod of `group` in LocalQueue `queue`, pinned to `node`, with a claim of one GPU."""
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": f"{group}-gpu", "namespace": namespace},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 1}}]}}}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{group}-0", "namespace": namespace,
                        "labels": {QUEUE_LABEL: queue, GROUP_LABEL: group, GROUP_MIN_LABEL: "1"}},
           "spec": {"schedulingGates": [{"name": GATE}], "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [{"name": "main", "image": "registry.example/cuda:12",
                                    "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": f"{group}-gpu"}]}}
    return [template, pod]


@pytest.fixture
def two_queues(control_plane: ControlPlane, api: Any, crds: None, namespace: str, unique: str) -> Iterator[str]:
    """Unit `gpus-<unique>` (whole GPUs) and `weighted-<unique>` (a weight that fails on every GPU);
    ClusterQueue `good-<unique>` quotes the first (LocalQueue `lq`), `bad-<unique>` both (LocalQueue `blq`).
    Removed afterwards: cluster-scoped objects outlive the test's namespace."""
    apply(control_plane,
          draq("QuotaUnit", f"gpus-{unique}", {"devices": {"deviceClassNames": [GPU_CLASS]}}),
          draq("QuotaUnit", f"weighted-{unique}", {"weight": {"deviceClassNames": [GPU_CLASS], "expression": FAILING}}),
          draq("ClusterQueue", f"good-{unique}",
               {"namespaceSelector": {}, "quotas": [{"unit": f"gpus-{unique}", "nominal": 8}]}),
          draq("ClusterQueue", f"bad-{unique}", {"namespaceSelector": {},
                                                  "quotas": [{"unit": f"gpus-{unique}", "nominal": 8},
                                                            {"unit": f"weighted-{unique}", "nominal": 100}]}),
          draq("LocalQueue", "lq", {"clusterQueue": f"good-{unique}"}, namespace),
          draq("LocalQueue", "blq", {"clusterQueue": f"bad-{unique}"}, namespace))
    yield unique
    objects = client.CustomObjectsApi(api)
    for plural, name in (("clusterqueues", f"good-{unique}"), ("clusterqueues", f"bad-{unique}"),
                         ("quotaunits", f"gpus-{unique}"), ("quotaunits", f"weighted-{unique}")):
        objects.delete_cluster_custom_object(*DRAQ, plural, name)


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), {})


def test_a_unit_that_fails_on_the_devices_stops_only_the_queue_that_quotes_it(
        control_plane: ControlPlane, api: Any, nodesim: NodeSimulator, namespace: str,
        two_queues: str) -> None:
    unique = two_queues
    node = f"bad-{unique}"
    nodesim.add_node(node, "h100")
    running = RunningOperator(settings(control_plane, namespace)).start()
    try:
        apply(control_plane, *member(namespace, "fine", "lq", node), *member(namespace, "stuck", "blq", node))
        until("group fine, in the queue that does not quote the unit, released",
              lambda: not gated(api, namespace, "fine-0"), timeout=60)
        stuck = until("group stuck to wait with reason QuotaUnitInvalid", lambda: pod_group(api, namespace, "stuck"),
                      accept=lambda g: condition(g, "Admitted").get("reason") == "QuotaUnitInvalid", timeout=30)
        message = stuck["status"]["message"]
        assert f"ClusterQueue bad-{unique} quotes an invalid unit: QuotaUnit weighted-{unique}: expression fails " \
               f"on device {GPU_CLASS}/" in message and "no such key: missing" in message
        assert gated(api, namespace, "stuck-0")
        objects = client.CustomObjectsApi(api)
        ready = until("the unit to be Ready=False", lambda: condition(objects.get_cluster_custom_object(
            *DRAQ, "quotaunits", f"weighted-{unique}"), "Ready"), accept=lambda c: c.get("status") == "False")
        assert ready["reason"] == "Invalid" and "no such key: missing" in ready["message"]
        events = until("a Warning Event on the unit", lambda: [
            e for e in client.CoreV1Api(api).list_namespaced_event("default").items
            if e.involved_object.name == f"weighted-{unique}" and e.reason == "QuotaUnitInvalid"], timeout=30)
        assert events[0].type == "Warning" and "no such key: missing" in events[0].message
        good = objects.get_cluster_custom_object(*DRAQ, "clusterqueues", f"good-{unique}")
        assert condition(good, "Active").get("status") == "True"

        # Fixed, the unit counts again and the waiting group is admitted.
        objects.patch_cluster_custom_object(*DRAQ, "quotaunits", f"weighted-{unique}",
                                            {"spec": {"weight": {"expression": "2"}}})
        until("group stuck released once the unit is fixed", lambda: not gated(api, namespace, "stuck-0"), timeout=60)
        admitted = pod_group(api, namespace, "stuck")
        assert admitted is not None and {"unit": f"weighted-{unique}", "amount": "2"} in admitted["status"]["charge"]
    finally:
        running.stop()
    assert running.error is None, running.error
