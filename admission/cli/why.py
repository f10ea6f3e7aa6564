"""`draq why POD|GROUP` (also `kubectl draq why`): why a group waits, in the words of its PodGroup's
Admitted condition. A pod stands for its group (label draq.io/pod-group); `pod/NAME` or `podgroup/NAME`
say which one a name is, otherwise a PodGroup of that name is looked for first, then a pod."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from admission.cli.options import cluster_options
from admission.core.errors import DraqError, InvalidInput
from admission.core.labels import GROUP_LABEL
from admission.core.views import Why, group_of_pod, why
from admission.kube import kinds
from admission.kube.client import Client, KubeApi, KubeApiError, load_credentials
from admission.kube.connection import context_namespace
from admission.kube.paths import Resource, check_name

HELP = "say why a pod's group, or a PodGroup, waits (in the words of its Admitted condition)"
EXIT_WAITING = 1
_KINDS = {"pod": "pod", "pods": "pod", "po": "pod", "podgroup": "group", "podgroups": "group", "pg": "group",
          "podgroup.draq.io": "group", "podgroups.draq.io": "group"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="POD|GROUP", help="a pod or a PodGroup; pod/NAME or podgroup/NAME to say which")
    parser.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's, else default)")
    cluster_options(parser)
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument("--fail-if-waiting", action="store_true",
                        help=f"exit with status {EXIT_WAITING} when the group waits")


def parse_target(text: str) -> tuple[str | None, str]:
    """(`pod`, `group` or None for either, name)."""
    kind, slash, name = text.partition("/")
    if not slash:
        return None, check_name(text)
    if kind.lower() not in _KINDS:
        raise InvalidInput("draq why", "POD|GROUP", f"{kind!r} is not pod or podgroup (in {text!r})")
    return _KINDS[kind.lower()], check_name(name)


def run(args: argparse.Namespace) -> int:
    kind, name = parse_target(args.name)
    namespace = args.namespace or context_namespace(args.kubeconfig, args.context)
    found = asyncio.run(_read(args.kubeconfig, args.context, namespace, kind, name))
    print(json.dumps(found.to_dict(), indent=2) if args.output == "json" else found.text())
    return EXIT_WAITING if args.fail_if_waiting and found.waiting else 0


async def _read(kubeconfig: Path | None, context: str | None, namespace: str, kind: str | None, name: str) -> Why:
    async with KubeApi(load_credentials(kubeconfig, context)) as api:
        return await explain(api, namespace, kind, name)


async def explain(api: Client, namespace: str, kind: str | None, name: str) -> Why:
    """Why the group named (or the group of the pod named) waits. A group whose PodGroup is not written yet
    is found by its members' label."""
    if kind != "pod":
        pod_group = await _get(api, kinds.POD_GROUPS, namespace, name)
        if pod_group is not None or await _has_members(api, namespace, name):
            return why(f"{namespace}/{name}", pod_group)
        if kind == "group":
            raise DraqError(f"no PodGroup {name} in namespace {namespace}, and no pod labelled {GROUP_LABEL}={name}")
    pod = await _get(api, kinds.PODS, namespace, name)
    if pod is None:
        asked = "pod" if kind == "pod" else "PodGroup, group or pod"
        raise DraqError(f"no {asked} {name} in namespace {namespace}")
    group = group_of_pod(pod)
    return why(f"{namespace}/{group}", await _get(api, kinds.POD_GROUPS, namespace, group), pod=name)


async def _has_members(api: Client, namespace: str, group: str) -> bool:
    found = await api.get(kinds.PODS.collection_path(namespace), {"labelSelector": f"{GROUP_LABEL}={group}",
                                                                 "limit": "1"})
    return bool(found.get("items"))


async def _get(api: Client, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return await api.get(resource.object_path(namespace, name))
    except KubeApiError as err:
        if err.status == 404:
            return None
        raise
