"""`draq queues` (also `kubectl draq queues`): usage against quota per ClusterQueue and unit, with the
cohort's borrowing, read from the cluster (read only)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from admission.cli.options import cluster_options
from admission.core.errors import DraqError
from admission.core.views import QueueReport, queue_report, render_queues
from admission.kube import kinds
from admission.kube.client import Client, KubeApi, load_credentials
from admission.kube.listing import list_objects

HELP = "show usage against quota per ClusterQueue and unit (with cohort borrowing)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queues", nargs="*", metavar="CLUSTERQUEUE", help="only these ClusterQueues (default: all)")
    cluster_options(parser)
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")


def run(args: argparse.Namespace) -> int:
    report = asyncio.run(_read(args.kubeconfig, args.context, args.queues))
    print(json.dumps(report.to_dict(), indent=2) if args.output == "json" else render_queues(report))
    return 0


async def _read(kubeconfig: Path | None, context: str | None, only: list[str]) -> QueueReport:
    async with KubeApi(load_credentials(kubeconfig, context)) as api:
        return await read_queues(api, only)


async def read_queues(api: Client, only: list[str] | None = None) -> QueueReport:
    cluster_queues = await _listed(api, kinds.CLUSTER_QUEUES)
    return queue_report(cluster_queues, await _listed(api, kinds.POD_GROUPS), only or ())


async def _listed(api: Client, resource: Any) -> list[dict[str, Any]]:
    found = await list_objects(api, resource)
    if found is None:
        raise DraqError(f"the API server does not serve {resource.plural}.{resource.group}: are draq's CRDs "
                        "installed (kubectl apply -f crds/)?")
    return found
