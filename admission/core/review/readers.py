"""Small readers of admission objects that never raise on hostile shapes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admission.core.review.envelope import JsonObject


def mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def labels_of(obj: JsonObject | None) -> Mapping[str, str]:
    labels = mapping(mapping(obj).get("metadata")).get("labels")
    if not isinstance(labels, Mapping):
        return {}
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}


def gates_of(pod: JsonObject | None) -> list[str]:
    gates = mapping(mapping(pod).get("spec")).get("schedulingGates")
    if not isinstance(gates, list):
        return []
    return [str(mapping(g).get("name")) for g in gates if isinstance(mapping(g).get("name"), str)]


def controller_owner(obj: JsonObject | None) -> Mapping[str, Any]:
    owners = mapping(mapping(obj).get("metadata")).get("ownerReferences")
    for owner in owners if isinstance(owners, list) else []:
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return owner
    return {}
