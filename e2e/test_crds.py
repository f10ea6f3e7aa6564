"""The draq CRDs install on the real control plane, serve the example, and refuse invalid objects
with messages that say what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from admission.core.cycle import plan_status
from admission.core.quota import Plan, PlannedClaim, Slot, parse_pod_group
from admission.localcluster.controlplane import ControlPlane

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[1]
CRDS = ROOT / "crds"
KINDS = ("clusterqueues", "localqueues", "quotaunits", "podgroups", "topologies")


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> ControlPlane:
    control_plane.kubectl("apply", "--server-side", "-f", str(CRDS))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                          *(f"crd/{kind}.draq.io" for kind in KINDS))
    return control_plane


def apply(plane: ControlPlane, *objects: dict[str, Any]) -> tuple[int, str]:
    result = plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects), check=False)
    return result.returncode, result.stderr


def obj(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "draq.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}


def test_crds_are_established_with_short_names_and_category(crds: ControlPlane) -> None:
    resources = crds.kubectl("api-resources", "--api-group=draq.io", "-o", "wide").stdout
    for kind, short in (("clusterqueues", "cq"), ("localqueues", "lq"), ("quotaunits", "qu"),
                        ("podgroups", "pg"), ("topologies", "topo")):
        line = next(row for row in resources.splitlines() if row.startswith(kind))
        assert f" {short} " in f" {line} " and "draq" in line


def test_the_example_applies_and_kubectl_get_shows_useful_columns(crds: ControlPlane) -> None:
    crds.kubectl("apply", "-f", str(ROOT / "examples" / "queues.yaml"))
    queues = crds.kubectl("get", "clusterqueues").stdout.splitlines()
    assert queues[0].split()[:5] == ["NAME", "COHORT", "USAGE", "PENDING", "ADMITTED"]
    assert any(row.split()[:2] == ["research", "gpu-pool"] for row in queues[1:])
    groups = crds.kubectl("get", "podgroups", "-n", "research").stdout.splitlines()
    assert groups[0].split()[:5] == ["NAME", "PHASE", "MIN", "MEMBERS", "QUEUE"]
    local = crds.kubectl("get", "lq", "-n", "research").stdout.splitlines()
    assert local[0].split()[:2] == ["NAME", "CLUSTERQUEUE"] and local[1].split()[:2] == ["training", "research"]
    spec = yaml.safe_load(crds.kubectl("get", "cq", "production", "-o", "yaml").stdout)["spec"]
    assert spec["namespaceSelector"] == {"matchLabels": {"draq.io/tenant": "production"}}
    assert spec["queueingStrategy"] == "StrictFIFO"


def test_status_subresource_feeds_the_usage_column(crds: ControlPlane, unique: str) -> None:
    name = f"status-{unique}"
    assert apply(crds, obj("ClusterQueue", name, {"quotas": [{"unit": "gpus", "nominal": 16}]}))[0] == 0
    spec = yaml.safe_load(crds.kubectl("get", "cq", name, "-o", "yaml").stdout)["spec"]
    # No namespaceSelector is defaulted (a queue without one serves no namespace); the strategy is.
    assert "namespaceSelector" not in spec and spec["queueingStrategy"] == "BestEffortFIFO"
    crds.kubectl("patch", "clusterqueue", name, "--subresource=status", "--type=merge", "-p",
                 '{"status": {"summary": "gpus 12/16", "pendingGroups": 2, "admittedGroups": 3}}')
    row = crds.kubectl("get", "cq", name, "--no-headers").stdout.split()
    assert row[1:5] == ["gpus", "12/16", "2", "3"]
    # A write to the main resource does not touch status.
    crds.kubectl("patch", "clusterqueue", name, "--type=merge", "-p", '{"status": {"summary": "x"}}')
    assert crds.kubectl("get", "cq", name, "-o", "jsonpath={.status.summary}").stdout == "gpus 12/16"


def test_a_plan_with_slots_is_kept_whole_by_the_status_subresource(crds: ControlPlane, unique: str) -> None:
    name = f"slots-{unique}"
    assert apply(crds, obj("PodGroup", name, {"minMember": 2, "queue": "lq"}, "default"))[0] == 0
    plan = Plan((("lead", "node-0"),), (PlannedClaim("worker#0/gpu", (("gpus", "gpu.example.com/node-1/gpu-0"),)),),
                (Slot("leader", 0, "node-0", "lead"), Slot("worker", 0, "node-1")))
    body = json.dumps({"status": {"phase": "Admitted", "plan": plan_status(plan)}})
    crds.kubectl("patch", "podgroup", name, "-n", "default", "--subresource=status", "--type=merge", "-p", body)
    stored = json.loads(crds.kubectl("get", "podgroup", name, "-n", "default", "-o", "json").stdout)
    assert parse_pod_group(stored).plan == plan


INVALID = [
    ("ClusterQueue", {"quotas": [{"unit": "gpus", "nominal": -3}]}, "spec.quotas[0].nominal", "must not be negative"),
    ("ClusterQueue", {"quotas": [{"unit": "gpus", "nominal": "lots"}]}, "spec.quotas[0].nominal",
     "must be a quantity such as 16"),
    ("ClusterQueue", {"quotas": [{"unit": "gpus", "nominal": 4, "borrowingLimit": 2}]}, "spec.quotas",
     "borrowingLimit needs a cohort"),
    ("ClusterQueue", {"quotas": [{"unit": "gpus", "nominal": 4, "lendingLimit": 2}]}, "spec.quotas",
     "lendingLimit needs a cohort"),
    ("ClusterQueue", {"cohort": "c", "quotas": [{"unit": "gpus", "nominal": 4, "lendingLimit": "5"}]},
     "spec.quotas[0].lendingLimit", "lendingLimit must not exceed nominal"),
    ("ClusterQueue", {"quotas": [{"unit": "gpus", "nominal": 1}, {"unit": "gpus", "nominal": 2}]},
     "spec.quotas[1]", "Duplicate value"),
    ("ClusterQueue", {"queueingStrategy": "LIFO"}, "spec.queueingStrategy", "Unsupported value"),
    ("QuotaUnit", {}, "spec", "set exactly one way of counting"),
    ("QuotaUnit", {"devices": {"deviceClassNames": ["gpu"]}, "weight": {"deviceClassNames": ["gpu"],
                                                                         "expression": "1"}},
     "spec", "set exactly one way of counting"),
    ("QuotaUnit", {"core": {"resource": "cpu"}, "extendedResources": [{"name": "nvidia.com/gpu"}]},
     "spec.extendedResources", "a core unit counts pod requests directly"),
    ("QuotaUnit", {"devices": {"deviceClassNames": []}}, "spec.devices.deviceClassNames", "should have at least 1"),
    ("QuotaUnit", {"devices": {"deviceClassNames": ["a", "a"]}}, "spec.devices.deviceClassNames[1]",
     "Duplicate value"),
    ("QuotaUnit", {"capacity": {"deviceClassNames": ["gpu"]}}, "spec.capacity.name", "Required value"),
    ("PodGroup", {"minMember": 0, "queue": "q"}, "spec.minMember", "greater than or equal to 1"),
    ("PodGroup", {"minMember": 2}, "spec.queue", "Required value"),
    ("LocalQueue", {}, "spec.clusterQueue", "Required value"),
    ("PodGroup", {"minMember": 2, "queue": "q", "topology": {"required": "rack", "preferred": "rack"}},
     "spec.topology", "set exactly one of required and preferred"),
    ("Topology", {"levels": []}, "spec.levels", "should have at least 1"),
    ("Topology", {"levels": [{"name": "rack"}]}, "spec.levels[0]", "set exactly one of nodeLabel and deviceAttribute"),
    ("Topology", {"levels": [{"name": "Rack", "nodeLabel": "example.com/rack"}]}, "spec.levels[0].name",
     "should match"),
    ("Topology", {"levels": [{"name": "rack", "nodeLabel": "a"}, {"name": "rack", "nodeLabel": "b"}]},
     "spec.levels[1]", "Duplicate value"),
]


@pytest.mark.parametrize(("kind", "spec", "field", "message"), INVALID,
                         ids=[f"{kind}-{message.split()[0]}-{i}" for i, (kind, _, _, message) in enumerate(INVALID)])
def test_invalid_objects_are_refused_naming_field_and_reason(
        crds: ControlPlane, unique: str, kind: str, spec: dict[str, Any], field: str, message: str) -> None:
    namespace = "default" if kind in ("PodGroup", "LocalQueue") else None
    code, stderr = apply(crds, obj(kind, f"bad-{unique}", spec, namespace))
    assert code != 0
    assert f"{field}:" in stderr and message in stderr, stderr


@pytest.mark.parametrize(("kind", "spec", "change", "message"), [
    ("LocalQueue", {"clusterQueue": "a"}, {"clusterQueue": "b"}, "clusterQueue cannot be changed"),
    ("PodGroup", {"minMember": 1, "queue": "a"}, {"queue": "b"}, "queue cannot be changed"),
])
def test_queue_references_cannot_be_changed(crds: ControlPlane, unique: str, kind: str, spec: dict[str, Any],
                                            change: dict[str, Any], message: str) -> None:
    name = f"fixed-{unique}"
    assert apply(crds, obj(kind, name, spec, "default"))[0] == 0
    code, stderr = apply(crds, obj(kind, name, {**spec, **change}, "default"))
    assert code != 0 and message in stderr, stderr
