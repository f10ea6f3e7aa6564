"""What the gap report is made of: the accounts it compares and the gaps it finds.

An *account* is one set of numbers that should agree: per namespace, ClusterQueue and QuotaUnit, what
pods really hold and what draq charged; per namespace and ResourceQuota resource, what native quota
counts and what the namespace really holds. A *gap* is one disagreement, with its kind, its size in
the terms of what it is measured in (a QuotaUnit, or a resource name where no unit applies) and the
objects behind it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from enum import StrEnum
from fractions import Fraction
from typing import Any

from admission.core.errors import InvalidInput
from admission.core.quota import format_amount


class GapKind(StrEnum):
    """The kinds of disagreement `draq gaps` finds (docs/gaps.md explains each)."""

    CHARGE_DIFFERS = "ChargeDiffers"
    OUTSIDE_QUEUES = "OutsideQueues"
    ALLOWED_OFF_QUEUE = "AllowedOffQueue"
    BYPASSED_ADMISSION = "BypassedAdmission"
    UNCOUNTED_EXTENDED = "UncountedExtendedResource"
    EXTENDED_VIA_DRA = "ExtendedResourceViaDRA"
    DOUBLE_OFFERED = "DoubleOffered"
    NATIVE_QUOTA_COUNTS = "NativeQuotaCounts"
    NATIVE_QUOTA_LIMIT = "NativeQuotaLimit"


MEANING: dict[GapKind, str] = {
    GapKind.CHARGE_DIFFERS: "a running group's recorded charge differs from what its claims really hold",
    GapKind.OUTSIDE_QUEUES: "devices held by pods outside every queue (or by claims no running pod uses)",
    GapKind.ALLOWED_OFF_QUEUE: "devices held outside every queue in a managed namespace, as its device policy or "
                               "an owner exemption allows",
    GapKind.BYPASSED_ADMISSION: "devices held by pods of a queue that draq did not admit",
    GapKind.UNCOUNTED_EXTENDED: "pods in queues request an extended resource that no QuotaUnit counts",
    GapKind.EXTENDED_VIA_DRA: "the scheduler served an extended resource with DRA devices that the unit "
                              "counting it does not count",
    GapKind.DOUBLE_OFFERED: "a node offers the same hardware through a device plugin and through ResourceSlices",
    GapKind.NATIVE_QUOTA_COUNTS: "a ResourceQuota counts a different amount than the namespace really holds",
    GapKind.NATIVE_QUOTA_LIMIT: "a ResourceQuota allows a namespace less than its ClusterQueue lets it take",
}


def measured(measure: str, value: Fraction) -> str:
    """`gpus 2`, `gpu-memory 160Gi`: an amount as draq writes charges and usage."""
    return f"{measure} {format_amount(value)}"


def parse_kind(text: str) -> GapKind:
    """A kind as named on the command line (any case); InvalidInput naming the known kinds otherwise."""
    for kind in GapKind:
        if kind.value.lower() == text.strip().lower():
            return kind
    raise InvalidInput("--kind", "", f"unknown gap kind {text!r}; known kinds: {', '.join(k.value for k in GapKind)}")


@dataclass(frozen=True, slots=True)
class Gap:
    """One disagreement. `size` is signed where direction matters (ChargeDiffers: allocated minus
    charged; NativeQuotaCounts: quota used minus held) and positive otherwise."""

    kind: GapKind
    measure: str  # a QuotaUnit name, or a resource name (nvidia.com/gpu, <class>.deviceclass.resource.k8s.io/devices)
    size: Fraction
    message: str
    namespace: str = ""
    cluster_queue: str = ""
    node: str = ""
    objects: tuple[str, ...] = ()  # `Kind namespace/name`, e.g. `Pod research/train-0`, `Node h100-0`

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "namespace": self.namespace, "clusterQueue": self.cluster_queue,
                "node": self.node, "measure": self.measure, "size": format_amount(self.size),
                "message": self.message, "objects": list(self.objects)}


@dataclass(frozen=True, slots=True)
class Account:
    """Per namespace, ClusterQueue (`""`: outside every queue) and unit: held by pods vs charged by draq."""

    namespace: str
    cluster_queue: str
    unit: str
    held: Fraction
    charged: Fraction

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "clusterQueue": self.cluster_queue, "unit": self.unit,
                "held": format_amount(self.held), "charged": format_amount(self.charged)}


@dataclass(frozen=True, slots=True)
class NativeAccount:
    """One device resource of one ResourceQuota: its hard limit, what it counts, what is really held."""

    namespace: str
    quota: str
    resource: str
    hard: Fraction
    used: Fraction
    held: Fraction
    used_from: str  # "status" (the quota controller's count) or "computed" (no status: counted as it would)

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "resourceQuota": self.quota, "resource": self.resource,
                "hard": format_amount(self.hard), "used": format_amount(self.used),
                "held": format_amount(self.held), "usedFrom": self.used_from}


@dataclass(frozen=True, slots=True)
class GapReport:
    gaps: tuple[Gap, ...] = ()
    accounts: tuple[Account, ...] = ()
    native: tuple[NativeAccount, ...] = ()
    notes: tuple[str, ...] = ()  # what could not be valued, and why (never silently dropped)

    def filtered(self, namespaces: Collection[str] = (), queues: Collection[str] = (),
                 kinds: Collection[GapKind] = ()) -> GapReport:
        """Only what concerns these namespaces, ClusterQueues and gap kinds (empty: no filter)."""
        def keep(namespace: str, queue: str) -> bool:
            return (not namespaces or namespace in namespaces) and (not queues or queue in queues)
        return replace(
            self,
            gaps=tuple(g for g in self.gaps if keep(g.namespace, g.cluster_queue) and (not kinds or g.kind in kinds)),
            accounts=tuple(a for a in self.accounts if keep(a.namespace, a.cluster_queue)),
            # Native quota is per namespace, not per queue: a queue filter leaves it out.
            native=tuple(n for n in self.native if not queues and keep(n.namespace, "")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"gaps": [g.to_dict() for g in self.gaps], "accounts": [a.to_dict() for a in self.accounts],
                "nativeQuota": [n.to_dict() for n in self.native], "notes": list(self.notes)}
