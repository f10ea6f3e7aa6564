"""`draq allocate`: can these claims be allocated together on that node, given these objects?"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from admission.core.allocator import (
    Allocator,
    Outcome,
    Snapshot,
    Status,
    allocation_to_manifest,
    explain,
)
from admission.core.errors import DraqError, InvalidInput
from admission.core.features import SUPPORTED_VERSIONS, gates_for, parse_gate_flag
from admission.core.models import ResourceClaim, parse_objects

HELP = "Can these ResourceClaims be allocated together on that node? (answers as the kube-scheduler would)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--filename", dest="files", action="append", nargs="+", required=True,
                        metavar="FILE", help="multi-document YAML or JSON with Nodes, DeviceClasses, "
                        "ResourceSlices and ResourceClaims (repeatable)")
    parser.add_argument("--node", required=True, help="the node to allocate on")
    parser.add_argument("--claims", required=True, metavar="NAME[,NAME...]",
                        help="claims to allocate together, in order: name or namespace/name")
    parser.add_argument("--namespace", default="default",
                        help="namespace of objects and claims given without one (default: default)")
    parser.add_argument("--feature-gates", default="", metavar="Gate=true,...",
                        help="DRA feature gates overriding the version's defaults")
    parser.add_argument("--kubernetes-version", default=None, choices=SUPPORTED_VERSIONS,
                        help="release whose defaults and behaviour to model (default: 1.35); on 1.37 the answer names "
                             "the gates in force whose semantics draq does not model")
    parser.add_argument("-o", "--output", choices=("json", "text"), default="text")


def run(args: argparse.Namespace) -> int:
    gates = gates_for(args.kubernetes_version, parse_gate_flag(args.feature_gates))
    files = [Path(f) for group in args.files for f in group]
    snapshot = Snapshot.from_models(parse_objects(load_documents(files), args.namespace, skip_unsupported=True))
    node = snapshot.node(args.node)
    names = [n.strip() for n in args.claims.split(",") if n.strip()]
    if not names:
        raise InvalidInput("--claims", "", "name at least one claim")
    claims = [_claim(snapshot, name, args.namespace) for name in names]
    allocator = Allocator(snapshot, gates)
    outcome = allocator.allocate(node, claims)
    notes = gates.unmodelled()
    if args.output == "json":
        print(json.dumps({**json_answer(outcome, names, claims), "notModelled": list(notes)},
                         indent=2, sort_keys=False))
    else:
        print("\n".join([*text_answer(allocator, outcome, names, claims), *(f"not modelled: {n}" for n in notes)]))
    return 0


def load_documents(files: list[Path]) -> list[Any]:
    documents: list[Any] = []
    for path in files:
        try:
            text = sys.stdin.read() if str(path) == "-" else path.read_text()
        except FileNotFoundError:
            raise InvalidInput(f"file {path}", "", "does not exist") from None
        except OSError as err:
            raise InvalidInput(f"file {path}", "", f"cannot be read: {err.strerror}") from None
        try:
            loaded = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(err, "problem", None) or str(err)
            raise InvalidInput(f"file {path}", where, f"not valid YAML or JSON: {problem}") from None
        for index, document in enumerate(loaded):
            if not isinstance(document, dict):
                raise InvalidInput(f"file {path}", f"document {index + 1}",
                                   "expected a Kubernetes object (a mapping)")
        documents.extend(loaded)
    return documents


def _claim(snapshot: Snapshot, name: str, namespace: str) -> ResourceClaim:
    key = name if "/" in name else f"{namespace}/{name}"
    found = snapshot.claims.get(key)
    if found is None:
        known = ", ".join(sorted(snapshot.claims)) or "none"
        raise InvalidInput(f"ResourceClaim {key}", "--claims", f"not found in the files (claims found: {known})")
    return found


def json_answer(outcome: Outcome, names: list[str], claims: list[ResourceClaim]) -> dict[str, Any]:
    devices: dict[str, Any] = {}
    selectors: dict[str, Any] = {}
    if outcome.allocatable:
        for name, claim in zip(names, claims, strict=True):
            allocation = outcome.allocations.get(claim.key) or claim.allocation
            if allocation is None:
                continue
            manifest = allocation_to_manifest(allocation)
            per_request: dict[str, list[str]] = {}
            for r in manifest["devices"]["results"]:
                per_request.setdefault(r["request"], []).append(f"{r['driver']}/{r['pool']}/{r['device']}")
            devices[name] = per_request
            selectors[name] = manifest.get("nodeSelector")
    return {
        "allocatable": outcome.allocatable,
        "devices": devices,
        "nodeSelector": selectors,
        "error": outcome.message if outcome.is_error else None,
        "missingDeviceClass": outcome.missing_class,
    }


def text_answer(allocator: Allocator, outcome: Outcome, names: list[str],
                claims: list[ResourceClaim]) -> list[str]:
    claim_list = ", ".join(names)
    if outcome.allocatable:
        lines = [f"yes: {claim_list} can be allocated together on node {outcome.node}"]
        for name, claim in zip(names, claims, strict=True):
            allocation = outcome.allocations.get(claim.key)
            if allocation is None:
                lines.append(f"  {name}: already allocated, usable on this node")
                continue
            for result in allocation.results:
                extra = " (admin access)" if result.admin_access else ""
                if result.share_id:
                    extra += " (shared: " + ", ".join(f"{k}={v}" for k, v in result.consumed_capacity.items()) + ")"
                lines.append(f"  {name}, request {result.request}: {result.device_id}{extra}")
        return lines
    if outcome.missing_class:
        return [f"no: {claim_list} cannot be allocated on any node: device class {outcome.missing_class} "
                f"does not exist (the scheduler reports the pod unschedulable until it does; {outcome.message})"]
    if outcome.status is Status.ERROR:
        return [f"error: the scheduler would not schedule a pod with {claim_list} on any node: {outcome.message}"]
    if outcome.status is Status.NODE_ERROR:
        head = f"no: node {outcome.node} cannot be used: {outcome.message}"
    elif outcome.gave_up:
        head = f"no answer: {outcome.message} (the scheduler would time out here too)"
    else:
        head = f"no: {claim_list} cannot be allocated together on node {outcome.node}"
        if outcome.message:
            head += f" ({outcome.message})"
    try:
        return [head, *explain(allocator, outcome.node, claims).lines()]
    except DraqError:
        return [head]
