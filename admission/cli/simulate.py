"""`draq simulate` (also `kubectl draq simulate`): what would draq admit, when, where, and at what charge;
and which nodes would have to be added for the groups that wait. From a live cluster (read only) or from
manifest files, with workloads, nodes and quotas changed on top; nothing is written anywhere."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from admission.cli.allocate import load_documents
from admission.cli.gaps import Listing, add_model_options, manifest_files, read_cluster
from admission.cli.options import cluster_options
from admission.core.cycle import format_time, parse_time
from admission.core.errors import InvalidInput
from admission.core.features import SUPPORTED_VERSIONS, FeatureGates, gates_for, parse_gate_flag
from admission.core.models import DeviceClass, Model, parse_object
from admission.core.simulate import (
    DEFAULT_RUN_TIME,
    PROFILES,
    RUN_TIME_ANNOTATION,
    DomainsToAdd,
    Fate,
    GpuProfile,
    Loaded,
    NodesToAdd,
    Progress,
    SimulatedCluster,
    SimulationResult,
    SimulationSettings,
    device_classes,
    format_duration,
    load,
    merged,
    node_manifest,
    parse_duration,
    plan_domains,
    plan_nodes,
    render_table,
    resource_slices,
    simulate,
)
from admission.kube import kinds
from admission.kube.client import KubeApi, load_credentials
from admission.kube.listing import list_objects

HELP = "what would draq admit, when and where; and which nodes to add for the groups that wait (simulation)"
EXIT_NOT_ADMITTED = 1


def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("the starting snapshot (default: the current cluster, read only)")
    source.add_argument("--snapshot", dest="snapshot", action="append", nargs="+", metavar="FILE",
                        help="read the cluster from these YAML or JSON files (a directory: its files) instead")
    cluster_options(source)
    changes = parser.add_argument_group("changes")
    changes.add_argument("-f", "--filename", dest="files", action="append", nargs="+", default=[], metavar="FILE",
                         help="workloads to submit: Pods, Jobs, PodGroups, their claims and templates (and any "
                         "other object: queues, units, nodes); a directory stands for its files; - for stdin")
    changes.add_argument("--add-nodes", dest="add_nodes", action="append", default=[],
                         metavar="PROFILE=N[,...]|FILE", help="nodes to add: of built-in profiles ("
                         + ", ".join(PROFILES) + "), or the Nodes and ResourceSlices of a file")
    changes.add_argument("--partitions", action="store_true",
                         help="nodes of profiles also publish partitions (MIG, CPX) with shared counters")
    changes.add_argument("--remove-nodes", default="", metavar="NODE[,NODE...]",
                         help="nodes taken away, with their devices and the pods on them")
    changes.add_argument("--drain-nodes", default="", metavar="NODE[,NODE...]",
                         help="nodes cordoned and their pods evicted (the groups with a member there end)")
    changes.add_argument("--set-quota", action="append", default=[], metavar="CLUSTERQUEUE:UNIT=AMOUNT",
                         help="a ClusterQueue's nominal quota of a unit (repeatable)")
    run = parser.add_argument_group("simulation")
    run.add_argument("--run-time", default=format_duration(DEFAULT_RUN_TIME), metavar="DURATION",
                     help="how long a group runs when neither it nor its pods declare it with the annotation "
                     f"{RUN_TIME_ANNOTATION} (e.g. 30m, 2h, never; default: %(default)s)")
    run.add_argument("--horizon", metavar="DURATION", help="simulate no further than this (default: until the "
                     "queue drains or nothing changes)")
    run.add_argument("--start", metavar="TIME", help="the snapshot's time, RFC 3339 (default: now)")
    run.add_argument("--plan-nodes", metavar="PROFILE[,PROFILE...]",
                     help="find the fewest nodes of these profiles to add so that the waiting groups are admitted "
                     "(whole domains of a topology level, of the first profile, when the groups ask for one)")
    run.add_argument("--plan-for", action="append", default=[], metavar="GROUP",
                     help="plan for these groups only (namespace/name; repeatable; default: every waiting group)")
    run.add_argument("--plan-within", default="0s", metavar="DURATION",
                     help="planned groups must be admitted within this time (default: at once, in the first cycle)")
    out = parser.add_argument_group("output")
    out.add_argument("-o", "--output", choices=("table", "json"), default="table")
    out.add_argument("--no-details", action="store_true", help="the table without nodes and devices per group")
    out.add_argument("--expect-admitted", action="append", default=[], metavar="GROUP",
                     help=f"exit with status {EXIT_NOT_ADMITTED} unless this group (namespace/name) is admitted "
                     "in the simulation (repeatable)")
    out.add_argument("--quiet", action="store_true", help="no progress line on standard error")
    add_model_options(parser)


def run(args: argparse.Namespace) -> int:
    start = _start(args.start)
    loaded, gates = _snapshot(args)
    loaded = _changed(loaded, args, gates, start)
    settings = SimulationSettings(gates, start, parse_duration(args.run_time, "--run-time"), loaded.run_times,
                                  horizon=parse_duration(args.horizon, "--horizon") if args.horizon else None)
    progress = _ProgressLine(quiet=args.quiet)
    plan: NodesToAdd | DomainsToAdd | None = None
    if args.plan_nodes:
        names = [p.strip() for p in args.plan_nodes.split(",") if p.strip()]
        for name in names:
            _profile(name)
        targets = [_group(g, args.default_namespace) for g in args.plan_for] or None
        cluster = _with_classes(loaded.cluster, args.partitions)
        within = parse_duration(args.plan_within, "--plan-within") or 0.0
        maker = _maker(args.partitions, "planned")
        plan = plan_domains(cluster, settings, names, maker, targets, within, progress) or \
            plan_nodes(cluster, settings, names, maker, targets, within, progress)
        result = plan.result
    else:
        result = simulate(loaded.cluster, settings, progress)
    progress.done()
    _print(result, plan, loaded.notes, args)
    expected = [_group(g, args.default_namespace) for g in args.expect_admitted]
    missing = [g for g in expected if (o := result.outcome(g)) is None or o.fate is not Fate.ADMITTED]
    for group in missing:
        print(f"draq simulate: {group} is not admitted in the simulation", file=sys.stderr)
    return EXIT_NOT_ADMITTED if missing else 0


# ----- the snapshot and the changes ------------------------------------------------------------------
def _snapshot(args: argparse.Namespace) -> tuple[Loaded, FeatureGates]:
    overrides = parse_gate_flag(args.feature_gates)
    if args.snapshot:
        gates = gates_for(args.kubernetes_version, overrides)
        documents = load_documents(manifest_files([Path(f) for group in args.snapshot for f in group]))
        return load(documents, gates, default_namespace=args.default_namespace), gates
    listing = asyncio.run(_listing(args.kubeconfig, args.context))
    release = args.kubernetes_version or listing.release
    gates = gates_for(release if release in SUPPORTED_VERSIONS else None, overrides)
    loaded = load(listing.manifests, gates, strict=False, submitted=False)
    if listing.missing:
        loaded = Loaded(loaded.cluster, loaded.run_times,
                        (*loaded.notes, "not served by the API server, so not read: " + ", ".join(listing.missing)))
    return loaded, gates


async def _listing(kubeconfig: Path | None, context: str | None) -> Listing:
    async with KubeApi(load_credentials(kubeconfig, context)) as api:
        listing = await read_cluster(api)
        topologies = await list_objects(api, kinds.TOPOLOGIES)
        if topologies is None:
            return replace(listing, missing=[*listing.missing, "topologies.draq.io"])
        return replace(listing, manifests=[*listing.manifests, *topologies])


def _changed(loaded: Loaded, args: argparse.Namespace, gates: FeatureGates, start: dt.datetime) -> Loaded:
    files = [Path(f) for group in args.files for f in group]
    if files:
        documents = load_documents(manifest_files(files))
        added = load(documents, gates, default_namespace=args.default_namespace,
                     namespace_labels=loaded.cluster.namespace_labels, stamp=format_time(start))
        loaded = merged(loaded, added)
    cluster = loaded.cluster
    nodes: list[Model] = []
    for spec in args.add_nodes:
        nodes += _added_nodes(spec, args.partitions)
    if nodes:
        cluster = _with_classes(cluster, args.partitions).with_models(nodes)
    notes = list(loaded.notes)
    for names, drain in ((args.remove_nodes, False), (args.drain_nodes, True)):
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        if wanted:
            cluster, ended = cluster.without_nodes(wanted, drain=drain)
            if ended:
                notes.append(f"ended at the start, a member was on a node {'drained' if drain else 'removed'}: "
                             + ", ".join(ended))
    for entry in args.set_quota:
        queue, _, rest = entry.partition(":")
        unit, _, amount = rest.partition("=")
        if not (queue and unit and amount):
            raise InvalidInput("--set-quota", entry, "expected CLUSTERQUEUE:UNIT=AMOUNT, e.g. research:gpus=32")
        cluster = cluster.with_quota(queue, unit, amount)
    return Loaded(cluster, loaded.run_times, tuple(notes))


def _added_nodes(spec: str, partitions: bool) -> list[Model]:
    if "=" not in spec:
        documents = load_documents(manifest_files([Path(spec)]))
        models = [parse_object(d) for d in documents if d.get("kind") in ("Node", "ResourceSlice", "DeviceClass")]
        if not models:
            raise InvalidInput(f"--add-nodes {spec}", "", "holds no Node, ResourceSlice or DeviceClass")
        return models
    out: list[Model] = []
    maker = _maker(partitions, "added")
    for part in spec.split(","):
        name, _, count = part.partition("=")
        if not count.strip().isdigit():
            raise InvalidInput("--add-nodes", part, "expected PROFILE=COUNT, e.g. h100=2")
        for index in range(int(count)):
            out += maker(name.strip(), index)
    return out


def _maker(partitions: bool, prefix: str) -> Any:
    """Nodes of a profile named `<prefix>-<profile>-<n>`, with the ResourceSlices its driver publishes."""
    def make(name: str, index: int) -> list[Model]:
        profile = _profile(name)
        node = f"{prefix}-{name}-{index}"
        return [parse_object(m) for m in (node_manifest(profile, node),
                                          *resource_slices(profile, node, partitions=partitions))]
    return make


def _profile(name: str) -> GpuProfile:
    found = PROFILES.get(name)
    if found is None:
        raise InvalidInput("node profile", name, "unknown; profiles: " + ", ".join(PROFILES))
    return found


def _with_classes(cluster: SimulatedCluster, partitions: bool) -> SimulatedCluster:
    """The DeviceClasses the profiles' drivers install, where the cluster lacks them."""
    known = {m.name for m in cluster.models if isinstance(m, DeviceClass)}
    classes = [c for c in (parse_object(m) for m in device_classes()) if isinstance(c, DeviceClass)]
    return cluster.with_models(c for c in classes if c.name not in known)


def _group(name: str, namespace: str) -> str:
    return name if "/" in name else f"{namespace}/{name}"


def _start(text: str | None) -> dt.datetime:
    if not text:
        return dt.datetime.now(dt.UTC).replace(microsecond=0)
    moment = parse_time(text)
    if moment is None:
        raise InvalidInput("--start", text, "not an RFC 3339 time, e.g. 2026-11-23T12:00:00Z")
    return moment


# ----- output -------------------------------------------------------------------------------------------
def _print(result: SimulationResult, plan: NodesToAdd | DomainsToAdd | None, notes: Sequence[str],
           args: argparse.Namespace) -> None:
    if args.output == "json":
        document: dict[str, Any] = {"simulation": result.to_dict(), "notes": list(notes)}
        if plan is not None:
            document["plan"] = plan.to_dict()
        print(json.dumps(document, indent=2))
        return
    lines = []
    if plan is not None:
        lines += [*plan.lines(), ""]
    lines += render_table(result, details=not args.no_details)
    if notes:
        lines += ["", "notes:", *(f"  {n}" for n in notes)]
    print("\n".join(lines))


class _ProgressLine:
    """`cycle N, +T: A admitted, W waiting, R running` on standard error, once a simulation takes over a
    second, at most twice a second."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started = time.monotonic()
        self.last = 0.0
        self.shown = False

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if self.quiet or now - self.started < 1.0 or now - self.last < 0.5:
            return
        self.last = now
        self.shown = True
        sys.stderr.write(f"\rsimulating: cycle {p.cycle}, +{format_duration(p.after)}: {p.admitted} admitted, "
                         f"{p.waiting} waiting, {p.running} running   ")
        sys.stderr.flush()

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
