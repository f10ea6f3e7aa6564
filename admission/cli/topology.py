"""`draq topology` (also `kubectl draq topology`): free room and fragmentation per domain of every Topology
level, read from the cluster (read only)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from admission.cli.options import cluster_options
from admission.core.features import SUPPORTED_VERSIONS, gates_for
from admission.core.views import TopologyReport, render_topology, topology_report
from admission.kube import kinds
from admission.kube.client import Client, KubeApi, load_credentials
from admission.kube.listing import list_objects, server_release

HELP = "show free devices and the largest gang each topology domain can still take"
READ = (kinds.NODES, kinds.RESOURCE_SLICES, kinds.RESOURCE_CLAIMS, kinds.TOPOLOGIES)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topologies", nargs="*", metavar="TOPOLOGY", help="only these Topologies (default: all)")
    cluster_options(parser)
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")


def run(args: argparse.Namespace) -> int:
    report = asyncio.run(_read(args.kubeconfig, args.context, args.topologies))
    print(json.dumps(report.to_dict(), indent=2) if args.output == "json" else render_topology(report))
    return 0


async def _read(kubeconfig: Path | None, context: str | None, only: list[str]) -> TopologyReport:
    async with KubeApi(load_credentials(kubeconfig, context)) as api:
        return await read_topology(api, only)


async def read_topology(api: Client, only: list[str] | None = None) -> TopologyReport:
    release = await server_release(api)
    manifests: list[dict[str, Any]] = []
    missing: list[str] = []
    for resource in READ:
        found = await list_objects(api, resource)
        if found is None:
            missing.append(f"{resource.plural}.{resource.group}" if resource.group else resource.plural)
        else:
            manifests += found
    gates = gates_for(release if release in SUPPORTED_VERSIONS else None)
    return topology_report(manifests, gates, only or (), missing=missing)
