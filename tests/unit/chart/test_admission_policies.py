"""The chart's ValidatingAdmissionPolicies, rendered by Helm and evaluated with draq's own CEL evaluator.

What is rendered for which values; then each policy's match conditions, variables and validations are run
against admission requests the way the API server runs them: every write of the operator's `Writer`
(made against the in-memory fake API, the object before and after) passes, and the writes the policies exist
to stop are refused with their specific message. e2e/test_least_privilege.py checks the same on the real
API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from admission.core.cel import CelError, compile_expression
from admission.core.labels import DEFAULT_QUEUE_LABEL, GATE, GROUP_LABEL, MANAGED_LABEL, QUEUE_LABEL
from admission.core.models import ObjectRef
from admission.localcluster import helm as helm_build
from admission.operator.cache import OperatorCache
from admission.operator.writer import Writer
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.chart.support import CHART

DRAQ_NS = "draq-system"
DRAQ = f"system:serviceaccount:{DRAQ_NS}:draq"
TENANT = "system:serviceaccount:team:admin"
WORK = "team"
CEL_VARIABLES = {"object": "dyn", "oldObject": "dyn", "request": "dyn", "namespaceObject": "dyn", "variables": "dyn"}
MANAGED = {MANAGED_LABEL: "true"}


@cache
def render(*values: str, namespace: str = DRAQ_NS) -> tuple[dict[str, Any], ...]:
    paths = helm_build.paths_for()
    if not helm_build.is_built(paths):
        pytest.skip(f"Helm is not built ({paths.binary}): make helm")
    home = Path(os.environ.get("TMPDIR", "/tmp")) / "draq-unit-helm"
    env = {**os.environ, "HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"),
           "HELM_DATA_HOME": str(home / "data")}
    out = subprocess.run([str(paths.binary), "template", "draq", str(CHART), "--namespace", namespace, *values],
                         capture_output=True, text=True, env=env, check=True, timeout=60).stdout
    return tuple(doc for doc in yaml.safe_load_all(out) if doc)


def of_kind(docs: tuple[dict[str, Any], ...], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def policies(*values: str) -> list[dict[str, Any]]:
    return list(of_kind(render(*values), "ValidatingAdmissionPolicy").values())


# ----- evaluating a policy as the API server does ----------------------------------------------------------
@dataclass
class Review:
    """One admission request: what a policy sees."""

    operation: str
    resource: tuple[str, str]  # (group, resource or resource/subresource)
    user: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    namespace_labels: dict[str, str] = field(default_factory=lambda: dict(MANAGED))

    def activation(self) -> dict[str, Any]:
        group, resource = self.resource
        plural, _, sub = resource.partition("/")
        meta = (self.new or self.old or {}).get("metadata") or {}
        return {"object": self.new, "oldObject": self.old,
                "request": {"operation": self.operation, "userInfo": {"username": self.user},
                            "resource": {"group": group, "resource": plural}, "subResource": sub,
                            "name": meta.get("name", ""), "namespace": meta.get("namespace", "")},
                "namespaceObject": {"metadata": {"name": meta.get("namespace", ""), "labels": self.namespace_labels}}}


def matches(policy: Mapping[str, Any], review: Review) -> bool:
    group, resource = review.resource
    return any(group in rule["apiGroups"] and resource in rule["resources"] and review.operation in rule["operations"]
               for rule in policy["spec"]["matchConstraints"]["resourceRules"])


def evaluate(expression: str, activation: Mapping[str, Any]) -> Any:
    return compile_expression(expression, CEL_VARIABLES).evaluate(activation)


def refusals(policy: Mapping[str, Any], review: Review) -> list[str]:
    """The messages of the validations that fail ([] when the policy does not apply or passes). Variables are
    evaluated in order; one that fails (e.g. `object` on a DELETE) is left out, as the API server evaluates
    them only when used."""
    spec = policy["spec"]
    activation = review.activation()
    if not matches(policy, review) or not all(evaluate(c["expression"], activation)
                                              for c in spec.get("matchConditions", [])):
        return []
    variables: dict[str, Any] = {}
    for variable in spec.get("variables", []):
        with contextlib.suppress(CelError):
            variables[variable["name"]] = evaluate(variable["expression"], {**activation, "variables": variables})
    activation["variables"] = variables
    found = []
    for validation in spec["validations"]:
        if evaluate(validation["expression"], activation) is not True:
            found.append(evaluate(validation["messageExpression"], activation) if "messageExpression" in validation
                         else validation["message"])
    return found


def refused(review: Review, *values: str) -> list[str]:
    return [message for policy in policies(*values) for message in refusals(policy, review)]


# ----- objects ---------------------------------------------------------------------------------------------
def pod(name: str = "p", namespace: str = WORK, gates: tuple[str, ...] = (GATE, "example.com/hold"),
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": labels if labels is not None else {QUEUE_LABEL: "lq", GROUP_LABEL: "g", "app": "x"}},
            "spec": {"schedulingGates": [{"name": g} for g in gates],
                     "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
                     "containers": [{"name": "main", "image": "registry.example/cuda:12"}]}}


def job(name: str = "train", namespace: str = WORK) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}}


def pod_group(name: str = "g", namespace: str = WORK) -> dict[str, Any]:
    return {"apiVersion": "draq.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": 1, "queue": "lq"}}


def changed(obj: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    change(new)
    return new


def pod_update(old: dict[str, Any], change: Callable[[dict[str, Any]], None], user: str = DRAQ,
               resource: str = "pods", namespace_labels: dict[str, str] | None = None) -> Review:
    return Review("UPDATE", ("", resource), user, old, changed(old, change),
                  dict(MANAGED) if namespace_labels is None else namespace_labels)


# ----- what is rendered ------------------------------------------------------------------------------------
def test_the_default_render_has_six_policies_each_bound_with_deny() -> None:
    docs = render()
    found, bindings = of_kind(docs, "ValidatingAdmissionPolicy"), of_kind(docs, "ValidatingAdmissionPolicyBinding")
    assert sorted(found) == ["draq-pod-labels", "draq-podgroup-status", "draq-token-jobs", "draq-token-pod-status",
                             "draq-token-pods", "draq-token-webhook-configurations"]
    assert {b["spec"]["policyName"] for b in bindings.values()} == set(found)
    assert all(b["spec"]["validationActions"] == ["Deny"] for b in bindings.values())
    assert all(p["spec"]["failurePolicy"] == "Fail" for p in found.values())


def test_the_policies_name_the_release_namespace_and_service_account() -> None:
    docs = render("--set", "serviceAccount.name=keeper", namespace="quota")
    text = yaml.safe_dump_all([d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"])
    assert "system:serviceaccount:quota:keeper" in text and DRAQ not in text


def test_values_switch_the_policies() -> None:
    assert not policies("--set", "admissionPolicies.enabled=false")
    chart_owned = policies("--set", "certificates.mode=cert-manager", "--set", "webhook.configurations=chart")
    assert "draq-token-webhook-configurations" not in {p["metadata"]["name"] for p in chart_owned}
    bindings = of_kind(render("--set", "admissionPolicies.validationActions={Warn,Audit}"),
                       "ValidatingAdmissionPolicyBinding")
    assert {tuple(b["spec"]["validationActions"]) for b in bindings.values()} == {("Warn", "Audit")}


def test_every_expression_compiles() -> None:
    for policy in policies():
        spec = policy["spec"]
        for item in (*spec.get("matchConditions", []), *spec.get("variables", []), *spec["validations"]):
            for key in ("expression", "messageExpression"):
                if key in item:
                    compile_expression(item[key], CEL_VARIABLES)


# ----- only draq writes what draq decides ------------------------------------------------------------------
def test_only_draq_writes_podgroup_status() -> None:
    old = pod_group()
    new = changed(old, lambda g: g.update(status={"phase": "Admitted", "clusterQueue": "main"}))
    assert refused(Review("UPDATE", ("draq.io", "podgroups/status"), TENANT, old, new)) == [
        f"only draq ({DRAQ}) writes PodGroup status: its phase, charge and plan are draq's admission record"]
    assert refused(Review("UPDATE", ("draq.io", "podgroups/status"), DRAQ, old, new)) == []
    assert refused(Review("UPDATE", ("draq.io", "podgroups"), TENANT, old, changed(
        old, lambda g: g["spec"].update(minMember=2)))) == [], "the spec is the tenant's"


@pytest.mark.parametrize("resource", ["pods", "pods/status"])
def test_only_draq_changes_draqs_labels_and_annotations_of_an_existing_pod(resource: str) -> None:
    def regroup(p: dict[str, Any]) -> None:
        p["metadata"]["labels"][GROUP_LABEL] = "other"
        del p["metadata"]["labels"][QUEUE_LABEL]
        p["metadata"]["annotations"] = {"draq.io/run-time": "60"}

    assert refused(pod_update(pod(), regroup, user=TENANT, resource=resource)) == [
        f"only draq ({DRAQ}) changes the draq.io/ labels and annotations of an existing pod (here: label "
        f"{QUEUE_LABEL}, label {GROUP_LABEL}, annotation draq.io/run-time); set them when the pod is created, or "
        "delete the pod and create it again"]
    assert refused(pod_update(pod(), regroup, resource=resource)) == []
    assert refused(pod_update(pod(), lambda p: p["metadata"]["labels"].update(app="y"), user=TENANT,
                              resource=resource)) == []


def test_pods_are_labelled_at_creation_by_anyone() -> None:
    assert refused(Review("CREATE", ("", "pods"), TENANT, None, pod())) == []


# ----- draq's token does what draq does --------------------------------------------------------------------
async def run_writer(call: Callable[[Writer], Awaitable[Any]], target: tuple[str, str, str],
                     resource: tuple[str, str], api: FakeApi) -> Review:
    """A write of the Writer against the fake API, as the admission request the API server reviews."""
    kind, namespace, name = target
    before = copy.deepcopy(api.get_object(kind, namespace, name))
    await call(Writer(api, OperatorCache(api), FakeClock()))
    after = copy.deepcopy(api.get_object(kind, namespace, name))
    operation = "DELETE" if after is None else "CREATE" if before is None else "UPDATE"
    return Review(operation, resource, DRAQ, before, after)


WRITES: dict[str, tuple[Callable[[Writer], Awaitable[Any]], tuple[str, str, str], tuple[str, str]]] = {
    "release and pin": (lambda w: w.ungate(WORK, "p", None, node="node-0"), ("Pod", WORK, "p"), ("", "pods")),
    "release unpinned": (lambda w: w.ungate(WORK, "p", None), ("Pod", WORK, "p"), ("", "pods")),
    "delete a member": (lambda w: w.delete_pod(WORK, "p"), ("Pod", WORK, "p"), ("", "pods")),
    "suspend a Job": (lambda w: w.suspend(ObjectRef("Job", WORK, "train"), True), ("Job", WORK, "train"),
                      ("batch", "jobs")),
    "PodGroup status": (lambda w: w.pod_group_status(WORK, "g", {"phase": "Admitted"}), ("PodGroup", WORK, "g"),
                        ("draq.io", "podgroups/status")),
}


@pytest.mark.parametrize("write", WRITES)
def test_every_write_of_the_writer_passes(write: str) -> None:
    call, target, resource = WRITES[write]
    api = FakeApi()
    api.add(pod(), job(), pod_group())
    review = asyncio.run(run_writer(call, target, resource, api))
    assert review.old != review.new, "the write changed nothing"
    assert refused(review) == []


def test_draqs_token_writes_pods_only_in_managed_namespaces() -> None:
    message = (f"draq ({DRAQ}) writes pods only in namespaces it manages: namespace default is not managed by draq "
               "(it has neither the label draq.io/managed=true nor draq.io/default-queue)")
    unmanaged = pod(namespace="default")
    assert refused(pod_update(unmanaged, lambda p: p["spec"]["schedulingGates"].pop(0), namespace_labels={})) == [
        message]
    assert refused(Review("DELETE", ("", "pods"), DRAQ, unmanaged, None, {})) == [message]
    assert refused(pod_update(unmanaged, lambda p: p["spec"]["schedulingGates"].pop(0),
                              namespace_labels={DEFAULT_QUEUE_LABEL: "lq"})) == []


@pytest.mark.parametrize(("change", "field_changed"), [
    (lambda p: p["spec"]["containers"][0].update(image="evil.example/miner"), "spec.containers"),
    (lambda p: p["spec"]["schedulingGates"].pop(1), "spec.schedulingGates"),
    (lambda p: p["spec"].update(tolerations=[{"operator": "Exists"}]), "spec.tolerations"),
    (lambda p: p["metadata"]["labels"].update(app="renamed"), "metadata.labels"),
    (lambda p: p["metadata"].update(annotations={"example.com/owner": "me"}), "metadata.annotations"),
    (lambda p: p["spec"].update(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}),
     "spec.affinity"),
])
def test_draqs_token_changes_nothing_else_of_a_pod(change: Callable[[dict[str, Any]], None],
                                                   field_changed: str) -> None:
    assert refused(pod_update(pod(), change)) == [
        f"draq ({DRAQ}) may only remove its gate draq.io/admission from a pod, pin a gated pod to one node and set "
        f"draq.io/ labels and annotations; this write to pod {WORK}/p changes {field_changed}"]


def test_draqs_token_pins_only_a_pod_it_gates() -> None:
    released = pod(gates=("example.com/hold",))
    pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}}}
    assert refused(pod_update(released, lambda p: p["spec"].update(affinity=pinned))) != []
    assert refused(pod_update(pod(), lambda p: p["spec"].update(affinity=pinned))) != [], \
        "the pod's own pod anti-affinity must be kept"
    assert refused(pod_update(pod(), lambda p: p["spec"]["affinity"].update(pinned))) == []


def test_draqs_token_sets_its_labels_and_annotations() -> None:
    def label(p: dict[str, Any]) -> None:
        p["metadata"]["labels"]["draq.io/group-min"] = "2"
        p["metadata"]["annotations"] = {"draq.io/run-time": "60"}

    assert refused(pod_update(pod(), label)) == []


def test_draqs_token_deletes_only_members_of_its_groups() -> None:
    stranger = pod(labels={"app": "x"})
    assert refused(Review("DELETE", ("", "pods"), DRAQ, stranger, None)) == [
        f"draq ({DRAQ}) deletes only members of its groups (pods with the label draq.io/pod-group); pod {WORK}/p "
        "has none"]


def test_draqs_token_only_suspends_and_resumes_jobs() -> None:
    old = job()
    assert refused(Review("UPDATE", ("batch", "jobs"), DRAQ, old, changed(
        old, lambda j: j["spec"].update(parallelism=100, suspend=False)))) == [
        f"draq ({DRAQ}) may only suspend and resume a Job and set its draq.io/ annotations; this write to Job "
        f"{WORK}/train changes spec.parallelism"]
    assert refused(Review("UPDATE", ("batch", "jobs"), DRAQ, old, changed(
        old, lambda j: j["spec"].update(suspend=True)), {})) != [], "only in managed namespaces"


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE", "DELETE"])
def test_draqs_token_writes_only_its_own_webhook_configurations(operation: str) -> None:
    def configuration(name: str) -> dict[str, Any]:
        return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": name}, "webhooks": []}

    def review(name: str) -> Review:
        old = None if operation == "CREATE" else configuration(name)
        new = None if operation == "DELETE" else configuration(name)
        return Review(operation, ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"), DRAQ, old, new)

    assert refused(review("all-pods-and-secrets")) == [
        f"draq ({DRAQ}) writes only its own webhook configurations draq-mutating and draq-validating, not "
        "all-pods-and-secrets"]
    assert refused(review("draq-mutating")) == []


def test_draqs_pod_status_writes_set_only_its_own_condition_in_managed_namespaces() -> None:
    waiting = {"type": "draq.io/Admitted", "status": "False", "reason": "QuotaExceeded", "message": "m"}
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    gated = {**pod(), "status": {"phase": "Pending", "conditions": [scheduled]}}

    def status_update(change: Callable[[dict[str, Any]], None], labels: dict[str, str] | None = None) -> Review:
        return pod_update(gated, change, resource="pods/status", namespace_labels=labels)

    assert refused(status_update(lambda p: p["status"]["conditions"].append(waiting))) == []
    assert refused(status_update(lambda p: p["status"]["conditions"].pop(0))) == [
        f"draq ({DRAQ}) may only set its condition draq.io/Admitted in the status of a pod; this write to pod "
        f"{WORK}/p changes status.conditions"]
    assert refused(status_update(lambda p: p["status"].update(phase="Failed"))) == [
        f"draq ({DRAQ}) may only set its condition draq.io/Admitted in the status of a pod; this write to pod "
        f"{WORK}/p changes status.phase"]
    outside = refused(status_update(lambda p: p["status"]["conditions"].append(waiting), labels={}))
    assert len(outside) == 1 and "writes pods only in namespaces it manages" in outside[0]
