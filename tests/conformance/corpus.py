"""Loading allocator conformance cases (the shared corpus format) and comparing outcomes with them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from admission.core.allocator import Allocator, Outcome, Snapshot, Status, allocation_to_manifest
from admission.core.features import exactly
from admission.core.models import ResourceClaim, parse_objects
from admission.core.quantity import parse_quantity

REPO = Path(__file__).resolve().parents[2]
# The shared corpus lives beside the repository (../shared), or where DRAQ_CONFORMANCE_DIR points.
# A plain clone has no ../shared: its cases are then skipped with the reason, our own still run.
SHARED_DIR_FROM_ENV = bool(os.environ.get("DRAQ_CONFORMANCE_DIR"))
SHARED_DIR = Path(os.environ.get("DRAQ_CONFORMANCE_DIR")
                  or REPO.parent / "shared/conformance/allocator-cases").resolve()
OWN_DIR = REPO / "tests/cases/allocator"
# The shared corpus held 92 cases when this was written; far fewer means a broken or partial copy.
SHARED_MIN_CASES = 90


def shared_corpus_status() -> str:
    """One line saying whether the shared corpus is used, for the test report header and skip reasons."""
    if not SHARED_DIR.is_dir():
        return (f"shared allocator corpus not found at {SHARED_DIR} (absent on a plain clone; set "
                f"DRAQ_CONFORMANCE_DIR to use one elsewhere): its cases are skipped, "
                f"the cases in {OWN_DIR.relative_to(REPO)} still run")
    count = sum(1 for p in SHARED_DIR.iterdir() if (p / "expect.yaml").is_file())
    return f"shared allocator corpus: {SHARED_DIR} ({count} cases)"


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    version: str

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"


def discover(*roots: Path) -> list[Case]:
    cases = []
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(p for p in root.iterdir() if (p / "expect.yaml").is_file()):
            expect = yaml.safe_load((path / "expect.yaml").read_text())
            cases.extend(Case(path.name, path, str(v)) for v in expect["k8s_versions"])
    return cases


def run_case(case: Case) -> tuple[dict[str, Any], Outcome, dict[str, ResourceClaim]]:
    expect = yaml.safe_load((case.path / "expect.yaml").read_text())
    manifests = list(yaml.safe_load_all((case.path / "objects.yaml").read_text()))
    snapshot = Snapshot.from_models(parse_objects(manifests))
    allocator = Allocator(snapshot, exactly(case.version, expect.get("features") or []))
    claims = [snapshot.claims[name] for name in expect["claims"]]
    outcome = allocator.allocate(expect["node"], claims)
    return expect, outcome, {c.key: c for c in claims}


def mismatches(expect: dict[str, Any], outcome: Outcome) -> list[str]:
    """Every way the outcome differs from the expectation (empty when they agree)."""
    problems: list[str] = []
    if "error" in expect:
        scope = {"fatal": Status.ERROR, "node": Status.NODE_ERROR}[expect["error_scope"]]
        if outcome.status is not scope or expect["error"] not in (outcome.message or ""):
            problems.append(f"expected {expect['error_scope']} error {expect['error']!r}, "
                            f"got {outcome.status.value}: {outcome.message}")
        return problems
    if outcome.is_error:
        return [f"unexpected {outcome.status.value}: {outcome.message}"]
    if outcome.allocatable != expect["allocatable"]:
        return [f"expected allocatable={expect['allocatable']}, "
                f"got {outcome.status.value} ({outcome.message})"]
    if not outcome.allocatable:
        return problems
    got_devices = {claim: _devices(allocation_to_manifest(a)) for claim, a in outcome.allocations.items()}
    want_devices = {claim: {req: set(ids) for req, ids in reqs.items()}
                    for claim, reqs in (expect.get("devices") or {}).items()}
    if got_devices != want_devices:
        problems.append(f"devices: expected {want_devices}, got {got_devices}")
    for claim, details in (expect.get("allocation_details") or {}).items():
        manifest = allocation_to_manifest(outcome.allocations[claim])
        problems.extend(_detail_problems(claim, details, manifest))
    return problems


def _devices(manifest: dict[str, Any]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for r in manifest["devices"]["results"]:
        found.setdefault(r["request"], set()).add(f"{r['driver']}/{r['pool']}/{r['device']}")
    return found


def _detail_problems(claim: str, details: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    problems = []
    if "nodeSelector" in details and _selector_key(details["nodeSelector"]) != _selector_key(
            manifest.get("nodeSelector")):
        problems.append(f"{claim} nodeSelector: expected {details['nodeSelector']}, "
                        f"got {manifest.get('nodeSelector')}")
    want_config = details.get("config") or []
    got_config = manifest["devices"].get("config") or []
    if _config_key(want_config) != _config_key(got_config):
        problems.append(f"{claim} config: expected {want_config}, got {got_config}")
    want_fields = {(f["request"], f["device"]): _extra(f) for f in details.get("resultFields") or []}
    got_fields = {(r["request"], f"{r['driver']}/{r['pool']}/{r['device']}"): _extra(r)
                  for r in manifest["devices"]["results"]}
    for key, extra in got_fields.items():
        if extra != want_fields.get(key, {}):
            problems.append(f"{claim} result {key}: expected fields {want_fields.get(key, {})}, got {extra}")
    return problems


def _extra(result: dict[str, Any]) -> dict[str, Any]:
    extra = {k: v for k, v in result.items() if k not in ("request", "device", "driver", "pool")}
    if "shareID" in extra:
        extra["shareID"] = "<present>"
    if "consumedCapacity" in extra:
        extra["consumedCapacity"] = {k: parse_quantity(v) for k, v in extra["consumedCapacity"].items()}
    if "tolerations" in extra:
        extra["tolerations"] = sorted(_toleration(t) for t in extra["tolerations"])
    return extra


def _toleration(t: dict[str, Any]) -> tuple[str, ...]:
    return (t.get("key", ""), t.get("operator") or "Equal", t.get("value", ""), t.get("effect", ""),
            str(t.get("tolerationSeconds")))


def _selector_key(selector: dict[str, Any] | None) -> Any:
    if selector is None:
        return None
    terms = []
    for term in selector.get("nodeSelectorTerms") or []:
        parts = []
        for kind in ("matchExpressions", "matchFields"):
            for r in term.get(kind) or []:
                parts.append((kind, r["key"], r["operator"], tuple(sorted(r.get("values") or []))))
        terms.append(tuple(sorted(parts)))
    return sorted(terms)


def _config_key(configs: list[dict[str, Any]]) -> list[Any]:
    return [(c["source"], tuple(c.get("requests") or ()), yaml.safe_dump(c["opaque"], sort_keys=True))
            for c in configs]
