"""The checks of `draq doctor`, from plain data (`ClusterFacts`) to findings with their fixes."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from admission.core.doctor.facts import ClusterFacts, JsonObject, Right
from admission.core.doctor.report import Check, DoctorReport, Finding
from admission.core.errors import DraqError
from admission.core.features import SUPPORTED_VERSIONS
from admission.core.labels import API_GROUP, API_GROUP_VERSION, DEFAULT_QUEUE_LABEL
from admission.core.leadership import DEFAULT_LEASE_NAME
from admission.core.models import parse_label_selector

DRAQ_CRDS = ("clusterqueues", "localqueues", "podgroups", "quotaunits", "topologies")
WEBHOOK_CONFIGURATIONS = ("MutatingWebhookConfiguration/draq-mutating",
                          "ValidatingWebhookConfiguration/draq-validating")
DRA_API = "resource.k8s.io/v1/resourceslices"
GANG_API = "scheduling.k8s.io/v1alpha1/workloads"  # the Workload API draq's native gangs use (1.35)
NEWER_GANG_APIS = ("scheduling.k8s.io/v1alpha2/workloads", "scheduling.k8s.io/v1beta1/workloads")  # 1.36, 1.37
STALE_CYCLE_SECONDS = 180.0  # the leader runs a cycle at least every 30 s (its resync) while it leads
_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


def diagnose(facts: ClusterFacts) -> DoctorReport:
    return DoctorReport((_kubernetes(facts), _crds(facts), _webhooks(facts), _namespaces(facts), _queues(facts),
                         _units(facts), _rights(facts), _leader(facts)), tuple(facts.notes))


def _draq_pods(facts: ClusterFacts) -> str:
    return f"kubectl -n {facts.draq_namespace} get pods -l app.kubernetes.io/name=draq"


def _upgrade(facts: ClusterFacts) -> str:
    return f"helm -n {facts.draq_namespace} upgrade --reuse-values <release> charts/draq"


# ----- Kubernetes and its APIs -------------------------------------------------------------------------
def _kubernetes(facts: ClusterFacts) -> Check:
    findings = []
    version = facts.server_version or "unknown"
    found = _VERSION.match(facts.server_version or "")
    minor = f"{found.group(1)}.{found.group(2)}" if found else None
    if minor is not None and (int(found.group(1)), int(found.group(2))) < (1, 34):  # type: ignore[union-attr]
        findings.append(Finding(f"Kubernetes {version} is older than 1.34, the first release serving "
                                "resource.k8s.io/v1", "upgrade the control plane to Kubernetes 1.34 or later"))
    elif DRA_API not in facts.served:
        findings.append(Finding("the API server does not serve resource.k8s.io/v1 ResourceSlices (DRA)",
                                "enable DRA on the control plane (kubectl api-resources --api-group=resource.k8s.io)"))
    followed = ", ".join(SUPPORTED_VERSIONS)
    tested = "" if minor is None or minor in SUPPORTED_VERSIONS else f", not one draq follows ({followed})"
    newer = [api.split("/")[1] for api in NEWER_GANG_APIS if api in facts.served]
    gangs = ("served (groups are also native gangs)" if GANG_API in facts.served
             else f"served at {', '.join(newer)} only, which draq does not use (draq's own gangs)" if newer
             else "not served (draq's own gangs)")
    return Check("Kubernetes", f"{version}{tested}; DRA resource.k8s.io/v1 "
                 f"{'served' if DRA_API in facts.served else 'not served'}; native gang API {gangs}", tuple(findings))


# ----- draq's CRDs -------------------------------------------------------------------------------------
def _crds(facts: ClusterFacts) -> Check:
    findings = []
    fix = "kubectl apply --server-side -f crds/   (draq's source tree; the chart has the same in charts/draq/crds/)"
    for plural in DRAQ_CRDS:
        name = f"{plural}.{API_GROUP}"
        crd = facts.crds.get(name)
        if crd is None:
            findings.append(Finding(f"CRD {name} is not installed", fix))
            continue
        versions = {str(v.get("name")): v for v in _list(_map(crd.get("spec")).get("versions"))}
        wanted = versions.get(API_GROUP_VERSION)
        if wanted is None or not wanted.get("served"):
            findings.append(Finding(f"CRD {name} does not serve {API_GROUP_VERSION} (served: "
                                    f"{', '.join(v for v, d in versions.items() if d.get('served')) or 'none'})", fix))
        elif not _condition_true(crd, "Established"):
            findings.append(Finding(f"CRD {name} is not Established", f"kubectl describe crd {name}"))
    return Check("CRDs", f"{len(facts.crds)} of {len(DRAQ_CRDS)} draq.io CRDs installed, "
                 f"{API_GROUP_VERSION} expected", tuple(findings))


# ----- webhook configurations and what they point at ----------------------------------------------------
def _webhooks(facts: ClusterFacts) -> Check:
    findings: list[Finding] = []
    targets: dict[str, str] = {}
    for key in WEBHOOK_CONFIGURATIONS:
        kind, name = key.split("/")
        configuration = facts.webhook_configurations.get(key)
        if configuration is None:
            findings.append(Finding(
                f"{kind} {name} does not exist: pods are not gated, so nothing keeps them in their queues",
                f"{_upgrade(facts)}   (the chart creates it; draq run without the chart creates it at start)"))
            continue
        webhooks = _list(configuration.get("webhooks"))
        if not webhooks:
            findings.append(Finding(f"{kind} {name} has no webhooks: draq has not filled it in",
                                    f"{_draq_pods(facts)}; kubectl -n {facts.draq_namespace} logs "
                                    "-l app.kubernetes.io/name=draq --tail=50"))
        for webhook in webhooks:
            target = _target(_map(webhook.get("clientConfig")))
            if target:
                targets.setdefault(target, f"{kind} {name}")
    for target, used_by in targets.items():
        findings.extend(_target_findings(facts, target, used_by))
    shown = ", ".join(sorted(targets)) or "none"
    return Check("webhooks", f"{sum(c is not None for c in facts.webhook_configurations.values())} of "
                 f"{len(WEBHOOK_CONFIGURATIONS)} configurations; they call {shown}", tuple(findings))


def _target(client_config: Mapping[str, Any]) -> str:
    service = _map(client_config.get("service"))
    if service:
        return f"service {service.get('namespace')}/{service.get('name')}"
    url = client_config.get("url")
    return f"url {url}" if isinstance(url, str) else ""


def service_of(target: str) -> tuple[str, str] | None:
    """(namespace, name) of a `service ns/name` target; None for a URL."""
    if not target.startswith("service "):
        return None
    namespace, _, name = target.removeprefix("service ").partition("/")
    return namespace, name


def _target_findings(facts: ClusterFacts, target: str, used_by: str) -> Iterator[Finding]:
    refused = "so the API server refuses every pod of a managed namespace (failurePolicy Fail)"
    service = service_of(target)
    if service is None:
        url = target.removeprefix("url ")
        if not facts.urls_reachable.get(url, False):
            yield Finding(f"{used_by} calls {url}, which does not answer, {refused}",
                          f"start draq run with --webhook-url {url}, or remove the configurations: kubectl delete "
                          "mutatingwebhookconfiguration/draq-mutating validatingwebhookconfiguration/draq-validating")
        return
    namespace, name = service
    health = facts.services.get(service)
    if health is None or not health.exists:
        yield Finding(f"{used_by} calls Service {namespace}/{name}, which does not exist, {refused}",
                      f"{_upgrade(facts)}   (kubectl -n {namespace} get services lists what is there)")
    elif health.ready_endpoints == 0:
        yield Finding(f"{used_by} calls Service {namespace}/{name}, which has no ready endpoint, {refused}",
                      f"kubectl -n {namespace} get endpointslices -l kubernetes.io/service-name={name}; "
                      f"{_draq_pods(facts)}")


# ----- namespaces and queues -------------------------------------------------------------------------
def _namespaces(facts: ClusterFacts) -> Check:
    local = {(_meta(q).get("namespace"), _meta(q).get("name")) for q in facts.local_queues}
    findings = []
    labelled = 0
    for namespace in facts.namespaces:
        name = str(_meta(namespace).get("name"))
        labels = _labels(namespace)
        queue = labels.get(DEFAULT_QUEUE_LABEL)
        if not queue:
            continue
        labelled += 1
        if (name, queue) not in local:
            findings.append(Finding(
                f"namespace {name} has {DEFAULT_QUEUE_LABEL}={queue}, but LocalQueue {name}/{queue} does not exist: "
                "every pod created in the namespace is refused",
                f"{_create_local_queue(facts, name, queue, labels)}   (or take the namespace out: "
                f"kubectl label namespace {name} {DEFAULT_QUEUE_LABEL}-)"))
    return Check("namespaces", f"{labelled} with a default queue ({DEFAULT_QUEUE_LABEL})", tuple(findings))


def _create_local_queue(facts: ClusterFacts, namespace: str, queue: str, labels: Mapping[str, str]) -> str:
    serving = [cq for cq in facts.cluster_queues if _serves(cq, labels)]
    # One queue meant for the namespace (a selector that names something) beats catch-all ones ({}).
    specific = [cq for cq in serving if _map(cq.get("spec")).get("namespaceSelector")]
    chosen = serving if len(serving) == 1 else specific
    cluster_queue = str(_meta(chosen[0]).get("name")) if len(chosen) == 1 else "<CLUSTERQUEUE>"
    manifest = {"apiVersion": f"{API_GROUP}/{API_GROUP_VERSION}", "kind": "LocalQueue",
                "metadata": {"name": queue, "namespace": namespace}, "spec": {"clusterQueue": cluster_queue}}
    return f"echo '{json.dumps(manifest, separators=(',', ':'))}' | kubectl apply -f -"


def _serves(cluster_queue: JsonObject, labels: Mapping[str, str]) -> bool:
    selector = _map(cluster_queue.get("spec")).get("namespaceSelector")
    if not isinstance(selector, Mapping):
        return False
    try:
        return parse_label_selector(selector, "ClusterQueue", "spec.namespaceSelector").matches(labels)
    except DraqError:
        return False


def _queues(facts: ClusterFacts) -> Check:
    cluster_queues = {str(_meta(cq).get("name")) for cq in facts.cluster_queues}
    units = {str(_meta(u).get("name")) for u in facts.quota_units}
    findings = []
    for local in facts.local_queues:
        namespace, name = _meta(local).get("namespace"), _meta(local).get("name")
        target = _map(local.get("spec")).get("clusterQueue")
        if isinstance(target, str) and target not in cluster_queues:
            findings.append(Finding(
                f"LocalQueue {namespace}/{name} points to ClusterQueue {target}, which does not exist",
                f"kubectl -n {namespace} patch localqueue {name} --type merge -p "
                f"'{{\"spec\":{{\"clusterQueue\":\"<CLUSTERQUEUE>\"}}}}'   (kubectl get clusterqueues lists them)"))
    for cluster_queue in facts.cluster_queues:
        name = _meta(cluster_queue).get("name")
        quotas = list(enumerate(_list(_map(cluster_queue.get("spec")).get("quotas"))))
        for index, quota in reversed(quotas):  # highest index first: each removal leaves the others' in place
            unit = quota.get("unit")
            if isinstance(unit, str) and unit not in units:
                findings.append(Finding(
                    f"ClusterQueue {name} has a quota in QuotaUnit {unit}, which does not exist: the queue admits "
                    "no group", f"create QuotaUnit {unit} (docs/objects.md), or drop the quota: kubectl patch "
                    f"clusterqueue {name} --type json -p '[{{\"op\":\"remove\",\"path\":\"/spec/quotas/{index}\"}}]'"))
    return Check("queues", f"{len(facts.cluster_queues)} ClusterQueues, {len(facts.local_queues)} LocalQueues",
                 tuple(findings))


def _units(facts: ClusterFacts) -> Check:
    findings = []
    for unit in facts.quota_units:
        name = _meta(unit).get("name")
        status = _map(unit.get("status"))
        ready = next((c for c in _list(status.get("conditions")) if c.get("type") == "Ready"), None)
        if ready is not None and ready.get("status") == "False":
            findings.append(Finding(f"QuotaUnit {name} is not Ready: {ready.get('message') or ready.get('reason')}",
                                    f"kubectl describe quotaunit {name}; kubectl edit quotaunit {name}"))
        elif status.get("matchingDevices") == 0:
            findings.append(Finding(
                f"QuotaUnit {name} matches no device in any ResourceSlice: queues quoting it charge nothing in it",
                f"kubectl get resourceslices,deviceclasses; then fix its deviceClassNames or selector: "
                f"kubectl edit quotaunit {name}"))
    return Check("units", f"{len(facts.quota_units)} QuotaUnits", tuple(findings))


# ----- draq's rights and its leader ---------------------------------------------------------------------
def _rights(facts: ClusterFacts) -> Check:
    user = f"system:serviceaccount:{facts.draq_namespace}:{facts.service_account}"
    if facts.missing_rights is None:
        return Check("RBAC", f"not checked for {user}: creating SubjectAccessReviews was refused", checked=False)
    if not facts.missing_rights:
        return Check("RBAC", f"{user} has every right the operator needs")
    missing = ", ".join(_right_text(r, facts) for r in facts.missing_rights)
    first = facts.missing_rights[0]
    return Check("RBAC", f"{user} lacks {len(facts.missing_rights)} right(s)", (Finding(
        f"{user} may not {missing}",
        f"{_upgrade(facts)}   (the chart's RBAC; check one with: kubectl auth can-i {first.verb} "
        f"{_resource_arg(first)}{' -n ' + facts.draq_namespace if first.in_draq_namespace else ''} --as={user})"),))


def _right_text(right: Right, facts: ClusterFacts) -> str:
    return right.describe() + (f" (in {facts.draq_namespace})" if right.in_draq_namespace else "")


def _resource_arg(right: Right) -> str:
    resource = f"{right.resource}.{right.group}" if right.group else right.resource
    return (f"{resource}/{right.name}" if right.name else resource) + (
        f" --subresource={right.subresource}" if right.subresource else "")


def _leader(facts: ClusterFacts) -> Check:
    cycle = _cycle_text(facts)
    lease = facts.lease
    holder = _map(_map(lease).get("spec")).get("holderIdentity") if lease is not None else None
    recent = facts.last_cycle is not None and facts.now - facts.last_cycle <= STALE_CYCLE_SECONDS
    where = f"Lease {facts.draq_namespace}/{DEFAULT_LEASE_NAME}"
    findings = []
    if not holder:
        if not recent:
            findings.append(Finding(f"{where} {'has no holder' if lease is not None else 'does not exist'}: no replica "
                                    "runs admission cycles", f"{_draq_pods(facts)}; kubectl -n {facts.draq_namespace} "
                                    "logs -l app.kubernetes.io/name=draq --tail=50"))
        return Check("leader", f"{where}: none (leader election off, or no replica leads); {cycle}", tuple(findings))
    age = _renewed_ago(_map(lease).get("spec"), facts.now)
    duration = _map(_map(lease).get("spec")).get("leaseDurationSeconds")
    if age is not None and isinstance(duration, int) and age > duration:
        findings.append(Finding(f"{where} held by {holder} expired {age - duration:.0f}s ago: no replica renews it",
                                f"{_draq_pods(facts)}"))
    if facts.last_cycle is not None and not recent:
        findings.append(Finding(f"the last admission cycle ended {facts.now - facts.last_cycle:.0f}s ago (more than "
                                f"{STALE_CYCLE_SECONDS:.0f}s)", f"kubectl -n {facts.draq_namespace} logs "
                                "-l app.kubernetes.io/name=draq --tail=100"))
    renewed = f", renewed {age:.0f}s ago" if age is not None else ""
    return Check("leader", f"{holder}{renewed}; {cycle}", tuple(findings))


def _cycle_text(facts: ClusterFacts) -> str:
    if facts.last_cycle is None:
        return "last cycle unknown (" + (f"{facts.metrics_source} has no cycle yet)" if facts.metrics_source
                                         else "no metrics endpoint reached; see --metrics-url)")
    return f"last cycle {max(0.0, facts.now - facts.last_cycle):.0f}s ago"


def _renewed_ago(spec: object, now: float) -> float | None:
    renewed = _map(spec).get("renewTime")
    if not isinstance(renewed, str):
        return None
    try:
        when = dt.datetime.fromisoformat(renewed.replace("Z", "+00:00"))
    except ValueError:
        return None
    return now - when.timestamp()


# ----- reading plain data ------------------------------------------------------------------------------
def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _meta(obj: JsonObject) -> Mapping[str, Any]:
    return _map(obj.get("metadata"))


def _labels(obj: JsonObject) -> dict[str, str]:
    return {str(k): str(v) for k, v in _map(_meta(obj).get("labels")).items()}


def _condition_true(obj: JsonObject, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in _list(_map(obj.get("status")).get("conditions")))
