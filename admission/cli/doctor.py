"""`draq doctor` (also `kubectl draq doctor`): a preflight and health check of a live cluster. This module
reads the cluster into `ClusterFacts`; the checks and their fixes are the core's (`admission.core.doctor`).
Exit code: 0 nothing found, 1 findings, 2 the cluster could not be reached."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from typing import Any
from urllib.parse import urlparse

import aiohttp

from admission.cli.options import cluster_options
from admission.core.doctor import (
    DRAQ_CRDS,
    REQUIRED_RIGHTS,
    WEBHOOK_CONFIGURATIONS,
    ClusterFacts,
    Right,
    ServiceHealth,
    diagnose,
    last_cycle_from_metrics,
    render_report,
    service_of,
)
from admission.core.errors import InvalidInput
from admission.core.labels import API_GROUP
from admission.core.leadership import DEFAULT_LEASE_NAME
from admission.kube import kinds
from admission.kube.client import KubeApi, KubeApiError, load_credentials
from admission.kube.discovery import serves
from admission.kube.listing import list_objects

HELP = "check a live cluster: CRDs, webhooks, queues, units, draq's rights, leader and last cycle"
CONNECT_SECONDS = 3.0


def configure(parser: argparse.ArgumentParser) -> None:
    cluster_options(parser)
    parser.add_argument("-n", "--namespace", default="draq-system",
                        help="draq's namespace: its Services, Lease and ServiceAccount (default %(default)s)")
    parser.add_argument("--service-account", default="draq", help="draq's ServiceAccount (default %(default)s)")
    parser.add_argument("--metrics-url", help="draq's /metrics, for the last cycle time (default: draq's metrics "
                        "Service in --namespace, through the API server)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    if args.metrics_url and urlparse(args.metrics_url).scheme not in ("http", "https"):
        raise InvalidInput("draq doctor", "--metrics-url", f"{args.metrics_url!r} is not an http(s):// URL")
    try:
        facts = asyncio.run(_gather(args))
    except (OSError, ConnectionError, TimeoutError) as err:
        print(f"draq doctor: cannot reach the API server: {err}", file=sys.stderr)
        return 2
    except KubeApiError as err:
        if err.status in (401, 403):
            print(f"draq doctor: the API server refused to answer: {err}", file=sys.stderr)
            return 2
        raise
    report = diagnose(facts)
    print(json.dumps(report.to_dict(), indent=2) if args.output == "json" else render_report(report))
    return report.exit_code


async def _gather(args: argparse.Namespace) -> ClusterFacts:
    async with KubeApi(load_credentials(args.kubeconfig, args.context), timeout=15) as api:
        version = (await api.get("/version")).get("gitVersion")
        configurations = await _configurations(api)
        targets = _targets(configurations)
        notes: list[str] = []
        last_cycle, source = await _last_cycle(api, args.namespace, args.metrics_url, notes)
        server_time = api.server_time()
        return ClusterFacts(
            draq_namespace=args.namespace, service_account=args.service_account,
            now=server_time.timestamp() if server_time else time.time(),
            server_version=str(version) if version else None, served=await _served(api),
            crds=await _crds(api), webhook_configurations=configurations,
            services={s: await _service(api, *s) for s in targets if isinstance(s, tuple)},
            urls_reachable={u: await _reachable(u) for u in targets if isinstance(u, str)},
            namespaces=await _listed(api, kinds.NAMESPACES), local_queues=await _listed(api, kinds.LOCAL_QUEUES),
            cluster_queues=await _listed(api, kinds.CLUSTER_QUEUES), quota_units=await _listed(api, kinds.QUOTA_UNITS),
            missing_rights=await _missing_rights(api, args.namespace, args.service_account),
            lease=await _get(api, kinds.LEASES.object_path(args.namespace, DEFAULT_LEASE_NAME)),
            last_cycle=last_cycle, metrics_source=source, notes=tuple(notes))


async def _served(api: KubeApi) -> frozenset[str]:
    workloads = [dataclasses.replace(kinds.WORKLOADS, version=v) for v in ("v1alpha1", "v1alpha2", "v1beta1")]
    found = [r for r in (kinds.RESOURCE_SLICES, *workloads) if await serves(api, r)]
    return frozenset(f"{r.api_version}/{r.plural}" for r in found)


async def _crds(api: KubeApi) -> dict[str, Any]:
    names = [f"{plural}.{API_GROUP}" for plural in DRAQ_CRDS]
    found = {name: await _get(api, kinds.CRDS.object_path(None, name)) for name in names}
    return {name: crd for name, crd in found.items() if crd is not None}


async def _configurations(api: KubeApi) -> dict[str, dict[str, Any] | None]:
    found = {}
    for key in WEBHOOK_CONFIGURATIONS:
        kind, name = key.split("/")
        found[key] = await _get(api, kinds.BY_KIND[kind].object_path(None, name))
    return found


def _targets(configurations: dict[str, dict[str, Any] | None]) -> set[tuple[str, str] | str]:
    """The Services (namespace, name) and URLs the webhooks call."""
    found: set[tuple[str, str] | str] = set()
    for configuration in configurations.values():
        for webhook in (configuration or {}).get("webhooks") or []:
            client = webhook.get("clientConfig") or {}
            service = client.get("service") or {}
            if service:
                at = service_of(f"service {service.get('namespace')}/{service.get('name')}")
                if at is not None:
                    found.add(at)
            elif isinstance(client.get("url"), str):
                found.add(client["url"])
    return found


async def _service(api: KubeApi, namespace: str, name: str) -> ServiceHealth:
    if await _get(api, kinds.SERVICES.object_path(namespace, name)) is None:
        return ServiceHealth(exists=False)
    listing = await api.get(kinds.ENDPOINT_SLICES.collection_path(namespace),
                            {"labelSelector": f"kubernetes.io/service-name={name}"})
    ready = sum(1 for s in listing.get("items") or [] for e in s.get("endpoints") or []
                if (e.get("conditions") or {}).get("ready") is not False)
    return ServiceHealth(exists=True, ready_endpoints=ready)


async def _reachable(url: str) -> bool:
    parsed = urlparse(url)
    if not parsed.hostname:
        return False
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(
            parsed.hostname, parsed.port or 443), CONNECT_SECONDS)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


async def _missing_rights(api: KubeApi, namespace: str, account: str) -> list[Right] | None:
    user = f"system:serviceaccount:{namespace}:{account}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]
    missing = []
    for right in REQUIRED_RIGHTS:
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": user, "groups": groups, "resourceAttributes": {
                "verb": right.verb, "group": right.group, "resource": right.resource,
                "subresource": right.subresource, "name": right.name,
                "namespace": namespace if right.in_draq_namespace else ""}}}
        try:
            answer = await api.create(kinds.SUBJECT_ACCESS_REVIEWS.list_path(), review)
        except KubeApiError as err:
            if err.status == 403:
                return None
            raise
        if not (answer.get("status") or {}).get("allowed"):
            missing.append(right)
    return missing


async def _last_cycle(api: KubeApi, namespace: str, url: str | None, notes: list[str]) -> tuple[float | None, str]:
    """The last cycle's end from draq's /metrics: `url`, else each metrics Service of draq's namespace."""
    if url:
        try:
            async with aiohttp.ClientSession() as session, session.get(
                    url, timeout=aiohttp.ClientTimeout(total=CONNECT_SECONDS * 2)) as response:
                return last_cycle_from_metrics(await response.text()), url
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            notes.append(f"--metrics-url {url} did not answer ({type(err).__name__})")
            return None, ""
    listing = await api.get(kinds.SERVICES.collection_path(namespace),
                            {"labelSelector": "app.kubernetes.io/name=draq"})
    for service in listing.get("items") or []:
        name = str((service.get("metadata") or {}).get("name") or "")
        if not any(p.get("name") == "metrics" for p in (service.get("spec") or {}).get("ports") or []):
            continue
        path = f"{kinds.SERVICES.object_path(namespace, name)}:metrics/proxy/metrics"
        try:
            text = await api.get_text(path)
        except (KubeApiError, ConnectionError, OSError) as err:
            notes.append(f"Service {namespace}/{name}'s /metrics could not be read through the API server: {err}")
            continue
        return last_cycle_from_metrics(text), f"Service {namespace}/{name}"
    return None, ""


async def _listed(api: KubeApi, resource: Any) -> list[dict[str, Any]]:
    return await list_objects(api, resource) or []


async def _get(api: KubeApi, path: str) -> dict[str, Any] | None:
    try:
        return await api.get(path)
    except KubeApiError as err:
        if err.status == 404:
            return None
        raise
