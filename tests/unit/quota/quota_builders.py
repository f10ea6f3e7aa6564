"""Builders for quota test objects: short, readable manifests and models."""

from __future__ import annotations

from typing import Any

from admission.core.quantity import parse_quantity
from admission.core.quota.queues import ClusterQueue, UnitQuota


def quota(unit: str, nominal: str | int, borrowing: str | int | None = None,
          lending: str | int | None = None) -> UnitQuota:
    return UnitQuota(unit, parse_quantity(nominal),
                     None if borrowing is None else parse_quantity(borrowing),
                     None if lending is None else parse_quantity(lending))


def cq(name: str, *quotas: UnitQuota, cohort: str | None = None) -> ClusterQueue:
    return ClusterQueue(name, tuple(quotas), cohort)


def manifest(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "draq.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}
