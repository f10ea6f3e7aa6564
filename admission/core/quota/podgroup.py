"""PodGroup: a gang with its recorded admission (charge and plan), parsed from and written to status."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from admission.core.models import ObjectRef, TopologyRequest, parse_topology_request
from admission.core.models._fields import Fields
from admission.core.quota.amounts import NONE, Amounts, format_amount
from admission.core.quota.reconcile import Reconciliation
from admission.core.quota.units import check_kind


class Phase(StrEnum):
    PENDING = "Pending"
    ADMITTED = "Admitted"
    RUNNING = "Running"
    FINISHED = "Finished"
    EVICTED = "Evicted"


@dataclass(frozen=True, slots=True)
class PlannedClaim:
    """A claim's planned devices: request -> `driver/pool/device` entries."""

    name: str
    devices: tuple[tuple[str, str], ...] = ()


SLOT_SEPARATOR = "#"  # cannot occur in a pod's name, so a slot's name never collides with a member's


@dataclass(frozen=True, slots=True)
class Slot:
    """A member of a declared shape, reserved by the plan: its role, its index in the role, and its node.
    `pod` names the member that took it; an open slot (no pod yet) still holds its node room and devices."""

    role: str
    index: int
    node: str
    pod: str = ""

    @property
    def name(self) -> str:
        """`<role>#<index>`: the slot's name in plans, and the prefix of its claims' names there."""
        return f"{self.role}{SLOT_SEPARATOR}{self.index}"

    @property
    def open(self) -> bool:
        return not self.pod


@dataclass(frozen=True, slots=True)
class Plan:
    nodes: tuple[tuple[str, str], ...] = ()  # pod name -> node
    claims: tuple[PlannedClaim, ...] = ()
    slots: tuple[Slot, ...] = ()  # the declared members, when the group was admitted from its declared shape

    @property
    def open_slots(self) -> tuple[Slot, ...]:
        return tuple(slot for slot in self.slots if slot.open)


@dataclass(frozen=True, slots=True)
class PodGroup:
    namespace: str
    name: str
    min_member: int
    queue: str
    priority: int | None = None  # spec.priority: may lower the priority its pods' class gives, never raise it
    phase: Phase = Phase.PENDING
    charge: Amounts = NONE
    borrowed: Amounts = NONE
    cluster_queue: str = ""
    admitted_at: str = ""
    plan: Plan = field(default_factory=Plan)
    evictions: int = 0  # times the group was evicted for not being bound in time
    requeue_at: str = ""  # RFC 3339: an evicted group is not admitted again before this
    suspended: tuple[ObjectRef, ...] = ()  # owners draq suspended at eviction, resumed at requeue_at
    topology: TopologyRequest | None = None  # spec.topology: the level its members must (or should) share

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def holds_quota(self) -> bool:
        """Admitted or running groups are charged to their ClusterQueue."""
        return self.phase in (Phase.ADMITTED, Phase.RUNNING)


def parse_pod_group(manifest: Mapping[str, Any], default_namespace: str = "default") -> PodGroup:
    fields = check_kind(manifest, "PodGroup")
    meta, spec, status = fields.map("metadata"), fields.map("spec"), fields.map("status")
    min_member = spec.int("minMember", required=True)
    if min_member < 1:
        raise spec.fail("minMember", f"must be at least 1, got {min_member}")
    phase = status.str("phase") or Phase.PENDING.value
    if phase not in {p.value for p in Phase}:
        raise status.fail("phase", f"unknown phase {phase!r}; expected one of " + ", ".join(p.value for p in Phase))
    charge, borrowed = [], []
    for entry in status.maps("charge"):
        unit = entry.str("unit", required=True)
        charge.append((unit, entry.quantity("amount").value))
        if entry.has("borrowed"):
            borrowed.append((unit, entry.quantity("borrowed").value))
    plan = status.map("plan")
    nodes = tuple((p.str("name", required=True), p.str("node")) for p in plan.maps("pods"))
    claims = tuple(PlannedClaim(c.str("name", required=True),
                                tuple((d.str("request", required=True), d.str("device", required=True))
                                      for d in c.maps("devices")))
                   for c in plan.maps("claims"))
    slots = tuple(Slot(s.str("role", required=True), s.int("index", required=True), s.str("node"), s.str("pod"))
                  for s in plan.maps("slots"))
    return PodGroup(
        namespace=meta.str("namespace") or default_namespace, name=meta.str("name", required=True),
        min_member=min_member, queue=spec.str("queue", required=True),
        priority=spec.int("priority") if spec.has("priority") else None,
        phase=Phase(phase), charge=Amounts.of(charge), borrowed=Amounts.of(borrowed),
        cluster_queue=status.str("clusterQueue"), admitted_at=status.str("admittedAt"),
        plan=Plan(nodes, claims, slots), evictions=status.int("evictions"), requeue_at=status.str("requeueAt"),
        suspended=_suspended(status, meta.str("namespace") or default_namespace),
        topology=parse_topology_request(spec.map("topology")))


def _suspended(status: Fields, namespace: str) -> tuple[ObjectRef, ...]:
    """`status.suspended` ({kind, name}), and the Jobs of `status.suspendedJobs` (written by earlier releases)."""
    found = [ObjectRef(e.str("kind", required=True), namespace, e.str("name", required=True))
             for e in status.maps("suspended")]
    found += [ObjectRef("Job", namespace, name) for name in status.str_list("suspendedJobs")]
    return tuple(sorted(set(found), key=str))


def suspended_status(refs: Iterable[ObjectRef]) -> list[dict[str, str]] | None:
    """The `status.suspended` list of a PodGroup (None clears it)."""
    return [{"kind": r.kind, "name": r.name} for r in sorted(set(refs), key=str)] or None


def charge_status(charge: Amounts, borrowed: Amounts = NONE) -> list[dict[str, str]]:
    """The `status.charge` list of a PodGroup."""
    entries = []
    for unit, amount in charge:
        entry = {"unit": unit, "amount": format_amount(amount)}
        if borrowed.get(unit):
            entry["borrowed"] = format_amount(borrowed.get(unit))
        entries.append(entry)
    return entries


def reconciliation_status(result: Reconciliation) -> list[dict[str, str]]:
    """The `status.reconciliation` list of a PodGroup: one entry per unit that differs."""
    return [{"unit": d.unit, "charged": format_amount(d.charged), "allocated": format_amount(d.allocated)}
            for d in result.differences]


