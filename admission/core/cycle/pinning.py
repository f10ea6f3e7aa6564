"""Pinning a released member to its planned node.

While a pod is still gated, Kubernetes lets its required node affinity be narrowed (terms may gain
requirements, none may be changed or dropped). draq adds `metadata.name In [node]` to every term as
it removes the gate, in the same patch, so the scheduler binds the member where the plan put it and
another group cannot take the node the plan relied on.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

NODE_NAME_FIELD = "metadata.name"


def pin_requirement(node: str) -> dict[str, Any]:
    return {"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}


def pinned_affinity(affinity: Mapping[str, Any] | None, node: str) -> dict[str, Any]:
    """The pod's `spec.affinity` with every required node-affinity term narrowed to `node` (a term is
    added when there is none); everything else is kept as it is."""
    pinned: dict[str, Any] = copy.deepcopy(dict(affinity or {}))
    node_affinity = pinned.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        terms = [{}]
    for term in terms:
        fields = term.setdefault("matchFields", [])
        if pin_requirement(node) not in fields:
            fields.append(pin_requirement(node))
    required["nodeSelectorTerms"] = terms
    return pinned
