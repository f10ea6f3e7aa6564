"""`draq gaps` (also `kubectl draq gaps`): where DRA allocations, draq's charges, native ResourceQuota,
device plugins and ResourceSlices disagree, from a live cluster (read only) or from manifest files."""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from admission.cli.allocate import load_documents
from admission.cli.options import cluster_options
from admission.core.errors import InvalidInput
from admission.core.features import SUPPORTED_VERSIONS, FeatureGates, gates_for, parse_gate_flag
from admission.core.gaps import GapInput, GapKind, GapReport, find_gaps, parse_kind, read_objects, render_text
from admission.kube import kinds
from admission.kube.client import Client, KubeApi, load_credentials
from admission.kube.listing import list_objects, server_release

HELP = "show where DRA usage, draq's charges and native quota disagree (accounting gaps)"
EXIT_GAPS = 1
READ = (kinds.NAMESPACES, kinds.NODES, kinds.PODS, kinds.RESOURCE_QUOTAS, kinds.DEVICE_CLASSES,
        kinds.RESOURCE_SLICES, kinds.RESOURCE_CLAIMS, kinds.CLAIM_TEMPLATES, kinds.CLUSTER_QUEUES,
        kinds.LOCAL_QUEUES, kinds.QUOTA_UNITS, kinds.POD_GROUPS)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--filename", dest="files", action="append", nargs="+", metavar="FILE",
                        help="read these multi-document YAML or JSON files instead of the cluster (repeatable; "
                             "- for stdin)")
    cluster_options(parser)
    parser.add_argument("-n", "--namespace", dest="namespaces", action="append", default=[], metavar="NAMESPACE",
                        help="only gaps and accounts of this namespace (repeatable)")
    parser.add_argument("-q", "--queue", dest="queues", action="append", default=[], metavar="CLUSTERQUEUE",
                        help="only gaps and accounts of this ClusterQueue (repeatable)")
    parser.add_argument("-k", "--kind", dest="kinds", action="append", default=[], metavar="KIND",
                        help="only gaps of this kind (repeatable): " + ", ".join(k.value for k in GapKind))
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    parser.add_argument("--fail-on-gap", action="store_true",
                        help=f"exit with status {EXIT_GAPS} when any gap is found (after the filters)")
    parser.add_argument("--ignore-unknown", action="store_true",
                        help="skip objects of kinds the report does not use instead of refusing the files")
    add_model_options(parser)


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """The options of commands that read a cluster or files: the release and gates to model, and the
    namespace of objects given without one."""
    parser.add_argument("--kubernetes-version", choices=SUPPORTED_VERSIONS,
                        help="release whose DRA behaviour to model (default: the server's, or 1.35 for files)")
    parser.add_argument("--feature-gates", default="", metavar="Gate=true,...",
                        help="DRA feature gates overriding the release's defaults (e.g. DRAExtendedResource=true)")
    parser.add_argument("--default-namespace", default="default",
                        help="namespace of objects in the files given without one (default: default)")


def run(args: argparse.Namespace) -> int:
    kinds_wanted = [parse_kind(k) for k in args.kinds]
    overrides = parse_gate_flag(args.feature_gates)
    if args.files:
        files = manifest_files([Path(f) for group in args.files for f in group])
        gates = gates_for(args.kubernetes_version, overrides)
        data = read_objects(load_documents(files), gates, args.default_namespace, ignore_unknown=args.ignore_unknown)
    else:
        listing = asyncio.run(_read_cluster(args.kubeconfig, args.context))
        gates = _live_gates(args.kubernetes_version or listing.release, overrides)
        data = read_objects(listing.manifests, gates, strict=False)
        if listing.missing:
            data = _with_note(data, "not served by the API server, so not read: " + ", ".join(listing.missing))
    report = find_gaps(data).filtered(args.namespaces, args.queues, kinds_wanted)
    print(_formatted(report, args.output))
    return EXIT_GAPS if args.fail_on_gap and report.gaps else 0


async def _read_cluster(kubeconfig: Path | None, context: str | None) -> Listing:
    async with KubeApi(load_credentials(kubeconfig, context)) as api:
        return await read_cluster(api)


@dataclass(frozen=True, slots=True)
class Listing:
    manifests: list[dict[str, Any]]
    release: str | None  # the API server's, e.g. 1.35
    missing: list[str]  # resources the API server does not serve (e.g. draq's CRDs not installed)


async def read_cluster(api: Client) -> Listing:
    """Every object the report reads, and the server's release; read only."""
    manifests: list[dict[str, Any]] = []
    missing: list[str] = []
    release = await server_release(api)
    for resource in READ:
        found = await list_objects(api, resource)
        if found is None:
            missing.append(resource.plural + (f".{resource.group}" if resource.group else ""))
        else:
            manifests += found
    return Listing(manifests, release, missing)


def manifest_files(paths: list[Path]) -> list[Path]:
    """The files given, a directory standing for its *.yaml, *.yml and *.json files (sorted)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(f for f in path.iterdir() if f.suffix in (".yaml", ".yml", ".json") and f.is_file())
            if not found:
                raise InvalidInput(f"directory {path}", "", "holds no .yaml, .yml or .json file")
            files += found
        else:
            files.append(path)
    return files


def _live_gates(release: str | None, overrides: dict[str, bool]) -> FeatureGates:
    if release not in SUPPORTED_VERSIONS:
        release = None  # a release draq does not model: the default one
    return gates_for(release, overrides)


def _with_note(data: GapInput, note: str) -> GapInput:
    return replace(data, notes=(*data.notes, note))


def _formatted(report: GapReport, output: str) -> str:
    if output == "json":
        return json.dumps(report.to_dict(), indent=2)
    if output == "yaml":
        return yaml.safe_dump(report.to_dict(), sort_keys=False, width=120).rstrip()
    return render_text(report)
