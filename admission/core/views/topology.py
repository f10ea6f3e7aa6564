"""`draq topology`: free room and fragmentation per domain of every Topology level: each domain's devices,
how many are free, and the largest gang of whole-node pods it can still take (`allocator.domain_figures`).

Read from the cluster's Nodes, ResourceSlices, ResourceClaims and Topologies: a device is taken when a claim's
allocation holds it. Devices promised to an admitted group whose claims are not allocated yet are free
here; the operator's metrics, which see its plans, count them as taken.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from admission.core.allocator import DomainFigure, Snapshot, domain_figures
from admission.core.errors import DraqError
from admission.core.features import FeatureGates
from admission.core.gaps.render import table
from admission.core.models import Topology, parse_objects, parse_topology

HEADER = ("TOPOLOGY", "LEVEL", "DOMAIN", "NODES", "DEVICES", "FREE", "LARGEST GANG", "STRANDED")


@dataclass(frozen=True, slots=True)
class TopologyReport:
    domains: tuple[DomainFigure, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"domains": [d.to_dict() for d in self.domains], "notes": list(self.notes)}


def topology_report(manifests: Iterable[Mapping[str, Any]], gates: FeatureGates, only: Collection[str] = (),
                    missing: Collection[str] = ()) -> TopologyReport:
    """The figures of every Topology (or those named in `only`) over the listed objects; `missing`: the
    resources the API server does not serve."""
    listed = list(manifests)
    topologies, notes = _topologies(listed, only)
    snapshot = Snapshot.from_models(parse_objects([m for m in listed if m.get("kind") != "Topology"],
                                                  skip_unsupported=True))
    listed_names = {str(m.get("metadata", {}).get("name", "")) for m in listed if m.get("kind") == "Topology"}
    notes += [f"{name}: no such Topology" for name in sorted(set(only) - listed_names)]
    if missing:
        notes.append(f"the API server does not serve {', '.join(missing)}: are draq's CRDs installed "
                     "(kubectl apply -f crds/)?")
    return TopologyReport(domain_figures(snapshot, gates, topologies, snapshot.in_use(gates)), tuple(notes))


def _topologies(manifests: list[Mapping[str, Any]], only: Collection[str]) -> tuple[list[Topology], list[str]]:
    found: list[Topology] = []
    notes: list[str] = []
    for manifest in manifests:
        if manifest.get("kind") != "Topology":
            continue
        name = str(manifest.get("metadata", {}).get("name", ""))
        if only and name not in only:
            continue
        try:
            found.append(parse_topology(manifest))
        except DraqError as err:
            notes.append(f"{name}: does not parse: {err}")
    return found, notes


def render_topology(report: TopologyReport) -> str:
    """One row per domain; the whole-node pod of each level in the LARGEST GANG column (`9 x 8`)."""
    if not report.domains and not report.notes:
        return "no Topology, or no domain in any (no node has a level's label, no device its attribute)"
    rows = [[d.topology, d.level, d.domain, str(d.nodes), str(d.devices), str(d.free),
             f"{d.largest_gang} x {d.pod_devices}", str(d.stranded)] for d in report.domains]
    lines = table(HEADER, rows) if rows else []
    return "\n".join([*lines, *([""] if lines and report.notes else []), *report.notes])
