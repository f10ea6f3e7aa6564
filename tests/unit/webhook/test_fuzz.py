"""Hostile and malformed AdmissionReviews: never a 500, never a crash, always a well-formed answer.

Two layers: the decision pipeline fed thousands of generated documents directly, and the HTTP
endpoints fed generated bodies over a real socket.
"""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from admission.core.labels import GATE, QUEUE_LABEL
from admission.core.review import GatingPolicy, mutate, validate
from admission.core.review.envelope import AdmissionRequest, render_response
from admission.webhook.handlers import read_review

from .builders import CLAIM, CLUSTER_QUEUE, LOCAL_QUEUE, POD, apply_patch, cluster, pod, review
from .serving import LiveServer, live_server

LOOKUPS = cluster()
POLICY = GatingPolicy()

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                    st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=25)
keys = st.sampled_from(["metadata", "labels", "spec", "schedulingGates", "name", "namespace", "uid", "object",
                        "oldObject", "kind", "operation", "userInfo", "ownerReferences", "resourceClaims",
                        "devices", "requests", "exactly", "selectors", "quotas", "clusterQueue",
                        "draq.io/queue", "draq.io/group-min", "generateName", "nodeName", "controller"])


def mutilations(document: Any) -> st.SearchStrategy[Any]:
    """The document with one randomly chosen subtree replaced by arbitrary JSON."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, (*path, index))

    walk(document, ())

    def replace(path: tuple[Any, ...], value: Any) -> Any:
        copy = json.loads(json.dumps(document))
        if not path:
            return value
        parent = copy
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = value
        return copy

    return st.builds(replace, st.sampled_from(paths), json_values | st.dictionaries(keys, json_values, max_size=5))


def seeds() -> list[dict[str, Any]]:
    gated = pod("x", labels={QUEUE_LABEL: "gpu", "draq.io/pod-group": "g", "draq.io/group-min": "2"},
                gates=[GATE])
    ungated = pod("x", labels={QUEUE_LABEL: "gpu"}, gates=[])
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "c", "namespace": "team-a", "labels": {QUEUE_LABEL: "gpu"}},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.example.com", "count": 2,
                 "selectors": [{"cel": {"expression": "device.driver == 'x'"}}]}}]}}}
    return [
        review(POD, pod("x", labels={QUEUE_LABEL: "gpu"})),
        review(POD, pod("", namespace="team-b", generate_name="w-")),
        review(POD, ungated, operation="UPDATE", old=gated),
        review(CLAIM, claim),
        review(LOCAL_QUEUE, {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue",
                             "metadata": {"name": "q", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}),
        review(CLUSTER_QUEUE, {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue",
                               "metadata": {"name": "cq"}, "spec": {"quotas": [{"unit": "u", "nominal": 1}]}}),
    ]


documents = st.one_of(json_values, *(mutilations(seed) for seed in seeds()))


def assert_well_formed(answer: dict[str, Any]) -> None:
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert isinstance(response["uid"], str) and isinstance(response["allowed"], bool)
    if response["allowed"]:
        if "patch" in response:
            assert response["patchType"] == "JSONPatch"
            ops = json.loads(base64.b64decode(response["patch"]))
            assert isinstance(ops, list) and all(op["op"] in ("add", "replace", "remove") for op in ops)
    else:
        status = response["status"]
        assert isinstance(status["message"], str) and status["message"]
        assert status["code"] in (400, 403, 422), status  # 500 would be a bug in a decision


def answer(body: bytes, endpoint: str) -> dict[str, Any]:
    parsed = read_review(body)
    if not isinstance(parsed, AdmissionRequest):
        return parsed
    decision = mutate(parsed, LOOKUPS) if endpoint == "mutate" else validate(parsed, LOOKUPS, POLICY)
    return render_response(parsed.uid, decision)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.sampled_from(["mutate", "validate"]))
def test_decisions_never_crash(document: Any, endpoint: str) -> None:
    assert_well_formed(answer(json.dumps(document).encode(), endpoint))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_answered(body: bytes) -> None:
    for endpoint in ("mutate", "validate"):
        answered = answer(body, endpoint)
        assert_well_formed(answered)


pod_labels = st.one_of(st.none(), st.dictionaries(st.sampled_from([QUEUE_LABEL, "app", "draq.io/pod-group",
                                                                   "draq.io/group-min"]),
                                                  st.sampled_from(["gpu", "a", "3", ""]), max_size=4))
gates = st.one_of(st.none(), st.lists(st.sampled_from([GATE, "other.io/x", "y"]), max_size=3))


@settings(max_examples=500, deadline=None)
@given(pod_labels, gates, st.sampled_from(["team-a", "team-b", "plain"]))
def test_patches_apply_and_gate_every_managed_pod_exactly_once(labels: Any, gate_names: Any, ns: str) -> None:
    obj = pod("x", namespace=ns)
    obj["metadata"]["labels"] = labels
    obj["spec"]["schedulingGates"] = None if gate_names is None else [{"name": g} for g in gate_names]
    document = review(POD, obj)
    answered = answer(json.dumps(document).encode(), "mutate")
    assert_well_formed(answered)
    raw = answered["response"].get("patch")
    patched = apply_patch(obj, json.loads(base64.b64decode(raw)) if raw else [])
    names = [g["name"] for g in patched["spec"].get("schedulingGates") or []]
    queue = (labels or {}).get(QUEUE_LABEL) or {"team-b": "batch"}.get(ns)
    if queue and ns != "plain":
        assert names.count(GATE) == max(1, (gate_names or []).count(GATE))
        assert patched["metadata"]["labels"][QUEUE_LABEL] == queue
        assert patched["metadata"]["labels"]["draq.io/pod-group"]
    else:
        assert patched == obj


@pytest.fixture(scope="module")
def plain_server() -> Iterator[LiveServer]:
    with live_server(cluster(), use_tls=False) as live:
        yield live


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(documents.map(lambda d: json.dumps(d).encode()), st.binary(max_size=300)),
       st.sampled_from(["/mutate", "/validate"]))
def test_endpoints_never_answer_500(plain_server: LiveServer, body: bytes, path: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", plain_server.port, timeout=10)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        payload = response.read()
    finally:
        connection.close()
    assert response.status == 200
    assert_well_formed(json.loads(payload))
