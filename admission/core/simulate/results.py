"""What a simulation says about every group, and its rendering as a table or as JSON-ready data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from admission.core.quota import Amounts, Plan
from admission.core.quota.amounts import NONE, format_amount
from admission.core.simulate.workloads import format_duration


class Fate(StrEnum):
    ADMITTED = "Admitted"  # admitted during the simulation
    WAITING = "Waiting"  # still waiting at its end
    HELD = "Held"  # admitted or running already in the snapshot
    PREEMPTED = "Preempted"  # preempted, and its pods gone for good (bare pods are not recreated)


@dataclass(frozen=True, slots=True)
class ClaimDevices:
    claim: str  # the claim's name in the plan (`pod/entry` for claims made from templates)
    devices: tuple[tuple[str, str], ...]  # (request, driver/pool/device)


@dataclass(frozen=True, slots=True)
class GroupOutcome:
    """One group's fate. Times are seconds after the start of the simulation."""

    group: str
    cluster_queue: str
    fate: Fate
    cycle: int = 0  # the cycle that admitted it (1 is the first)
    admitted_after: float | None = None
    finished_after: float | None = None  # when it finishes (after the end: as planned then); None: never
    nodes: tuple[tuple[str, str], ...] = ()  # (pod name, node)
    claims: tuple[ClaimDevices, ...] = ()
    charge: Amounts = NONE
    borrowed: Amounts = NONE
    reason: str = ""  # why it waits (the PodGroup condition's reason), at the end
    message: str = ""
    waited_cycles: int = 0  # cycles it waited in before being admitted (or until the end)
    preempted: int = 0  # times it was preempted (a Job's members come back and queue again)

    @property
    def admitted(self) -> bool:
        return self.fate is Fate.ADMITTED

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"group": self.group, "clusterQueue": self.cluster_queue, "fate": self.fate.value}
        if self.fate is Fate.ADMITTED:
            out.update(cycle=self.cycle, admittedAfterSeconds=self.admitted_after)
        if self.fate in (Fate.ADMITTED, Fate.HELD):
            out.update(finishedAfterSeconds=self.finished_after,
                       nodes=[{"pod": pod, "node": node} for pod, node in self.nodes],
                       claims=[{"name": c.claim, "devices": [{"request": r, "device": d} for r, d in c.devices]}
                               for c in self.claims],
                       charge={unit: format_amount(amount) for unit, amount in self.charge},
                       borrowed={unit: format_amount(amount) for unit, amount in self.borrowed})
        else:
            out.update(reason=self.reason, message=self.message)
        out["waitedCycles"] = self.waited_cycles
        if self.preempted:
            out["preempted"] = self.preempted
        return out


def claims_of(plan: Plan) -> tuple[ClaimDevices, ...]:
    return tuple(ClaimDevices(c.name, c.devices) for c in plan.claims)


@dataclass(frozen=True, slots=True)
class SimulationResult:
    outcomes: tuple[GroupOutcome, ...]  # admitted in admission order, then waiting, then held ones
    cycles: int
    end_after: float  # simulated seconds at the last cycle
    stopped: str  # why the simulation ended

    def outcome(self, group: str) -> GroupOutcome | None:
        return next((o for o in self.outcomes if o.group == group), None)

    @property
    def admitted(self) -> tuple[GroupOutcome, ...]:
        return tuple(o for o in self.outcomes if o.fate is Fate.ADMITTED)

    @property
    def waiting(self) -> tuple[GroupOutcome, ...]:
        return tuple(o for o in self.outcomes if o.fate is Fate.WAITING)

    @property
    def preemptions(self) -> int:
        return sum(o.preempted for o in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "endAfterSeconds": self.end_after, "stopped": self.stopped,
                "admitted": len(self.admitted), "waiting": len(self.waiting), "preemptions": self.preemptions,
                "groups": [o.to_dict() for o in self.outcomes]}


def render_table(result: SimulationResult, *, details: bool = True) -> list[str]:
    """One line per group; then, per admitted group, its pods' nodes and devices; then why groups wait."""
    rows = [("GROUP", "CLUSTERQUEUE", "RESULT", "CYCLE", "AT", "ENDS", "NODES", "CHARGE")]
    for o in result.outcomes:
        rows.append((o.group, o.cluster_queue or "-", o.fate.value, str(o.cycle) if o.cycle else "-",
                     _at(o.admitted_after), _at(o.finished_after), _nodes(o.nodes) or "-",
                     o.charge.describe() if o.charge else ("-" if o.fate is not Fate.ADMITTED else "nothing")))
    lines = _columns(rows)
    lines.append("")
    preempted = f", {result.preemptions} preemption(s)" if result.preemptions else ""
    lines.append(f"{len(result.admitted)} admitted, {len(result.waiting)} waiting{preempted} after {result.cycles} "
                 f"cycle(s), {format_duration(result.end_after)} of simulated time; {result.stopped}")
    if details and result.admitted:
        lines += ["", "placements:"]
        for o in result.admitted:
            lines.append(f"{o.group} (cycle {o.cycle}, +{format_duration(o.admitted_after or 0)}):")
            lines += [f"  pod {pod} -> node {node}" for pod, node in o.nodes]
            for claim in o.claims:
                lines.append(f"  claim {claim.claim}: {_devices(claim.devices)}")
            if o.borrowed:
                lines.append(f"  borrowed from the cohort: {o.borrowed.describe()}")
    gone = [o for o in result.outcomes if o.fate is Fate.PREEMPTED]
    if gone:
        lines += ["", "preempted for good:"]
        lines += [f"{o.group}: {o.message}" for o in gone]
    if result.waiting:
        lines += ["", "why groups wait:"]
        lines += [f"{o.group}: {o.reason}: {o.message}" for o in result.waiting]
    return lines


def _devices(devices: Sequence[tuple[str, str]]) -> str:
    """`gpu: gpu.nvidia.com/node-1/{gpu-0,gpu-1}`: per request and pool, the devices' names."""
    pools: dict[tuple[str, str], list[str]] = {}
    for request, device in devices:
        pool, _, name = device.rpartition("/")
        pools.setdefault((request, pool), []).append(name)
    return "; ".join(f"{request}: {pool}/{names[0]}" if len(names) == 1 else f"{request}: {pool}/{{{','.join(names)}}}"
                     for (request, pool), names in pools.items())


def _at(seconds: float | None) -> str:
    return "-" if seconds is None else f"+{format_duration(seconds)}"


def _nodes(nodes: Sequence[tuple[str, str]]) -> str:
    counts: dict[str, int] = {}
    for _, node in nodes:
        counts[node] = counts.get(node, 0) + 1
    return ",".join(node if n == 1 else f"{node}×{n}" for node, n in counts.items())


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
