"""The chart's RBAC, derived from the code and nothing more.

Every rule is commented, names only concrete verbs and resources, and grants nothing that escalates.
Every request the code makes is granted: the operator's and the webhook's list+watch caches (their tables),
a whole admission pass of the operator, every method of the writer, leader election, draq's CA Secret
and the webhook configurations publisher, each run against a recording fake of the API.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import yaml

from admission.core.labels import GATE
from admission.core.native_gangs import GANG_APIS
from admission.core.review.envelope import ObjectRef
from admission.kube import kinds
from admission.localcluster import rbac
from admission.operator.cache import OPERATOR_RESOURCES, OperatorCache
from admission.operator.leader import LeaderElector
from admission.operator.writer import Writer
from admission.webhook.cache import WEBHOOK_RESOURCES, WebhookCache
from admission.webhook.configurations import WebhookTarget, configurations
from admission.webhook.publisher import ConfigurationPublisher
from admission.webhook.rotation import SecretCA
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.chart.support import CHART, Request, allowed, request_of
from tests.unit.cycle.cycle_builders import NS
from tests.unit.operator.operator_world import cluster, started, submit

DRAQ_NS = "draq-system"
RULE_FILES = sorted((CHART / "files" / "rbac").glob("*.yaml"))
INTEGRATION_FILES = sorted((CHART / "files" / "rbac" / "integrations").glob("*.yaml"))
ESCALATING = {"bind", "escalate", "impersonate", "*"}


class RecordingApi(FakeApi):
    """The in-memory fake API, recording every request (reads too) as RBAC sees it."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[Request] = []

    def _seen(self, method: str, path: str) -> None:
        found = request_of(method, path)
        if found is not None:
            self.requests.append(found)

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        self._seen("GET", path)
        return await super().get(path, params)

    def _record(self, method: str, path: str, body: Any) -> None:
        self._seen({"POST": "POST", "PATCH": "PATCH", "PUT": "PUT", "DELETE": "DELETE"}[method], path)
        super()._record(method, path, body)

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300) -> AsyncIterator[
            dict[str, Any]]:
        self._seen("WATCH", path)
        async for event in super().watch(path, resource_version, timeout_seconds):
            yield event


def full_rights() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rights = rbac.Rights()
    return rbac.rules(*rights.cluster_files()), rbac.rules(*rights.namespace_files())


def denied(requests: list[Request]) -> list[str]:
    cluster_rules, namespace_rules = full_rights()
    return sorted({r.describe() for r in requests if not allowed(r, cluster_rules, namespace_rules, DRAQ_NS)})


# ----- the rule files themselves ----------------------------------------------------------------------
@pytest.mark.parametrize("path", RULE_FILES + INTEGRATION_FILES, ids=lambda p: p.name)
def test_every_rule_is_commented(path: Any) -> None:
    lines = path.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("- ")]
    assert starts, f"{path.name} has no rules"
    for i in starts:
        assert lines[i - 1].startswith("#"), f"{path.name}:{i + 1}: the rule has no comment above it"


@pytest.mark.parametrize("path", RULE_FILES + INTEGRATION_FILES, ids=lambda p: p.name)
def test_rules_name_concrete_verbs_and_resources_and_nothing_that_escalates(path: Any) -> None:
    rules = yaml.safe_load(path.read_text())
    assert isinstance(rules, list) and rules
    for rule in rules:
        assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, rule
        assert not ESCALATING & set(rule["verbs"]), rule
        assert "*" not in rule["resources"] and "*" not in rule["apiGroups"], rule
        assert "rbac.authorization.k8s.io" not in rule["apiGroups"], rule
        assert "create" not in rule["verbs"] or not rule.get("resourceNames"), \
            f"create cannot be narrowed to names, so it never matches: {rule}"


def test_secrets_are_only_in_the_namespaced_role_and_only_draqs_seal_key_and_ca_are_readable() -> None:
    cluster_rules, namespace_rules = full_rights()
    assert not any("secrets" in rule["resources"] for rule in cluster_rules)
    readable = [rule for rule in namespace_rules if "secrets" in rule["resources"] and "get" in rule["verbs"]]
    assert [rule["resourceNames"] for rule in readable] == [["draq-seal-key"], ["draq-webhook-ca"]]


def test_the_chart_template_includes_every_rule_file() -> None:
    template = (CHART / "templates" / "rbac.yaml").read_text()
    for path in RULE_FILES:
        assert f'.Files.Get "files/rbac/{path.name}"' in template
    assert 'printf "files/rbac/integrations/%s.yaml" (replace "/" "_" .)' in template  # one per integration
    rights = rbac.Rights()
    files = [name for name in [*rights.cluster_files(), *rights.namespace_files()] if "/" not in name]
    assert sorted(files) == [p.name for p in RULE_FILES]


def test_optional_rights_leave_their_rules_out() -> None:
    none = rbac.Rights(native_gangs=False, webhook_configurations=False, leader_election=False, draq_ca=False)
    names = [m["kind"] for m in rbac.manifests(DRAQ_NS, rights=none)]
    assert names == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
    [role] = [m for m in rbac.manifests(DRAQ_NS, rights=none) if m["kind"] == "ClusterRole"]
    granted = {r for rule in role["rules"] for r in rule["resources"]}
    assert not granted & {"workloads", "mutatingwebhookconfigurations", "leases", "secrets"}
    [local] = [m for m in rbac.manifests(DRAQ_NS, rights=none) if m["kind"] == "Role"]  # the seal key is not optional
    assert [r.get("resourceNames") for r in local["rules"]] == [None, ["draq-seal-key"]]


# ----- the code's requests ------------------------------------------------------------------------------
def test_every_cached_resource_may_be_listed_and_watched() -> None:
    cluster_rules, _ = full_rights()
    for resource, _project in (*OPERATOR_RESOURCES, *WEBHOOK_RESOURCES):
        for verb in ("list", "watch"):
            request = Request(verb, resource.group, resource.plural, "", "")
            assert allowed(request, cluster_rules, [], DRAQ_NS), request.describe()


def test_the_scheduling_pod_groups_of_each_gang_api_may_be_listed_and_watched() -> None:
    """The operator watches them where the cluster serves them (their PodGroup-level resource claims)."""
    cluster_rules, _ = full_rights()
    for api in GANG_APIS:
        if api.kind == "PodGroup":
            resource = kinds.scheduling_pod_groups(api)
            for verb in ("list", "watch"):
                request = Request(verb, resource.group, resource.plural, "", "")
                assert allowed(request, cluster_rules, [], DRAQ_NS), request.describe()


def test_the_webhook_may_fetch_every_kind_it_caches_after_a_miss() -> None:
    cluster_rules, _ = full_rights()
    for resource, _project in WEBHOOK_RESOURCES:
        request = Request("get", resource.group, resource.plural, "team" if resource.namespaced else "", "x")
        assert allowed(request, cluster_rules, [], DRAQ_NS), request.describe()


def test_an_admission_pass_makes_only_granted_requests() -> None:
    async def go() -> list[Request]:
        api = RecordingApi()
        for obj in cluster().objects.values():
            api.add(obj)
        submit(api, "train", 2, 2)
        operator = await started(api)  # type: ignore[arg-type]
        await operator.reconcile()
        await operator.cache.stop()
        return api.requests

    requests = asyncio.run(go())
    verbs = {(r.verb, r.resource) for r in requests}
    assert {("watch", "pods"), ("patch", "pods"), ("patch", "podgroups/status"), ("create", "events")} <= verbs
    assert denied(requests) == []


WRITER_CALLS = {
    "ensure_pod_group": lambda w: w.ensure_pod_group(NS, "g", 2, "lq"),
    "pod_group_status": lambda w: w.pod_group_status(NS, "g", {"phase": "Pending"}),
    "ungate": lambda w: w.ungate(NS, "p", None, node="node-0"),
    "ensure_gang": lambda w: asyncio.gather(*(w.ensure_gang(api, NS, "g", 2) for api in GANG_APIS)),
    "remove_gang": lambda w: asyncio.gather(*(w.remove_gang(api, NS, "g") for api in GANG_APIS)),
    "pod_condition": lambda w: w.pod_condition(
        {"metadata": {"name": "p", "namespace": NS}, "status": {"phase": "Pending"}},
        {"type": "draq.io/Admitted", "status": "False", "reason": "QuotaExceeded", "message": "m"}),
    "delete_pod": lambda w: w.delete_pod(NS, "gone"),
    "suspend": lambda w: w.suspend(ObjectRef("Job", NS, "job"), True),
    "cluster_queue_status": lambda w: w.cluster_queue_status("main", {"pendingGroups": 0}),
    "local_queue_status": lambda w: w.local_queue_status(NS, "lq", {"pendingGroups": 0}),
    "quota_unit_status": lambda w: w.quota_unit_status("gpus", {"summary": "8 devices"}),
    "event": lambda w: w.event({"apiVersion": "draq.io/v1alpha1", "kind": "PodGroup",
                                "metadata": {"name": "g", "namespace": NS}}, "Admitted", "admitted"),
}


def test_every_writer_method_is_covered_here() -> None:
    public = {name for name, member in inspect.getmembers(Writer, inspect.iscoroutinefunction)
              if not name.startswith("_")}
    assert public == set(WRITER_CALLS), ("a Writer method was added or removed: call it in WRITER_CALLS and "
                                         "give draq the rights it needs in charts/draq/files/rbac/")


def test_every_write_of_the_writer_is_granted() -> None:
    async def go() -> list[Request]:
        api = RecordingApi()
        api.add({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS},
                 "spec": {"schedulingGates": [{"name": GATE}], "containers": [{"name": "c"}]}},
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gone", "namespace": NS}, "spec": {}},
                {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job", "namespace": NS}, "spec": {}},
                {"apiVersion": "draq.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "main"}, "spec": {}},
                {"apiVersion": "draq.io/v1alpha1", "kind": "QuotaUnit", "metadata": {"name": "gpus"}, "spec": {}},
                {"apiVersion": "draq.io/v1alpha1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": NS},
                 "spec": {}})
        writer = Writer(api, OperatorCache(api), FakeClock())
        for call in WRITER_CALLS.values():
            await call(writer)
        return api.requests

    requests = asyncio.run(go())
    assert {r.verb for r in requests} >= {"create", "patch", "delete"}
    made = {(r.verb, r.group, r.resource) for r in requests}
    assert {(verb, "scheduling.k8s.io", plural) for verb in ("create", "delete")
            for plural in ("workloads", "podgroups")} <= made
    assert denied(requests) == []


def test_leader_election_is_granted_in_draqs_namespace_only() -> None:
    async def go() -> list[Request]:
        api, clock = RecordingApi(), FakeClock()
        one = LeaderElector(api, DRAQ_NS, "draq-operator", "draq-0", 15.0, clock)
        await one.step()
        clock.advance(5)
        await one.step()
        two = LeaderElector(api, DRAQ_NS, "draq-operator", "draq-1", 15.0, clock)
        await two.step()
        await one.release()
        return api.requests

    requests = asyncio.run(go())
    assert {(r.verb, r.resource) for r in requests} >= {("create", "leases"), ("get", "leases"), ("update", "leases")}
    assert denied(requests) == []
    elsewhere = [Request(r.verb, r.group, r.resource, "other", r.name) for r in requests]
    assert denied(elsewhere), "leases must not be granted outside draq's namespace"


def test_the_ca_secret_and_the_webhook_configurations_are_granted() -> None:
    async def go() -> list[Request]:
        api = RecordingApi()
        ca = await SecretCA(api, DRAQ_NS).load_or_create()
        await SecretCA(api, DRAQ_NS).load_or_create()
        target = WebhookTarget(service_namespace=DRAQ_NS, service_name="draq-webhook")
        publisher = ConfigurationPublisher(api, lambda bundle: configurations(target, bundle, DRAQ_NS))
        await publisher.apply(ca.cert_pem)  # created
        publisher.forget()
        await publisher.apply(b"another CA")  # read and replaced
        return api.requests

    requests = asyncio.run(go())
    resources = {(r.verb, r.resource) for r in requests}
    assert {("create", "secrets"), ("get", "secrets"), ("create", "mutatingwebhookconfigurations"),
            ("update", "validatingwebhookconfigurations")} <= resources
    assert denied(requests) == []


def test_the_webhook_cache_is_granted() -> None:
    async def go() -> list[Request]:
        api = RecordingApi()
        api.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        cache = WebhookCache(api)
        await cache.start(timeout=5)
        await cache.stop()
        return api.requests

    requests = asyncio.run(go())
    assert {r.resource for r in requests if r.verb == "list"} == {r.plural for r, _ in WEBHOOK_RESOURCES}
    assert denied(requests) == []


def test_the_webhooks_fence_may_read_the_lease() -> None:
    async def go() -> list[Request]:
        api = RecordingApi()
        api.add({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "draq-operator", "namespace": DRAQ_NS}, "spec": {"holderIdentity": "a"}})
        cache = WebhookCache(api)
        assert await cache.fetch((ObjectRef("Lease", DRAQ_NS, "draq-operator"),)) is not None
        return api.requests

    requests = asyncio.run(go())
    assert [(r.verb, r.resource) for r in requests] == [("get", "leases")]
    assert denied(requests) == []


def test_nothing_is_granted_that_no_code_asks_for() -> None:
    """Each granted resource is one of the code's tables of resources (admission/kube/kinds.py)."""
    cluster_rules, namespace_rules = full_rights()
    known = {(r.group, r.plural) for r in (*kinds.ALL, *kinds.WORKLOAD_KINDS.values(), *kinds.GANG_RESOURCES)}
    for rule in (*cluster_rules, *namespace_rules):
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert (group, re.sub(r"/status$", "", resource)) in known, (group, resource)


def test_the_default_integrations_owners_may_be_read_and_suspended() -> None:
    from admission.core.workloads import DEFAULT_FRAMEWORKS, enabled_kinds

    cluster_rules, _ = full_rights()
    for kind in enabled_kinds(DEFAULT_FRAMEWORKS):
        resource = kinds.WORKLOAD_KINDS[kind.kind]
        verbs = ("get", "list", "watch", *(("patch",) if kind.suspendable else ()))
        for verb in verbs:
            request = Request(verb, resource.group, resource.plural, "team" if verb in ("get", "patch") else "",
                              "x" if verb in ("get", "patch") else "")
            assert allowed(request, cluster_rules, [], DRAQ_NS), request.describe()
