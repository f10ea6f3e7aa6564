"""Reading back what the operator wrote on a released member: the node it was pinned to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admission.core.cycle.pinning import NODE_NAME_FIELD


def pinned_node(affinity: Mapping[str, Any] | None) -> str | None:
    """The node a pod was pinned to by `pinned_affinity`, if any."""
    node_affinity = (affinity or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for requirement in term.get("matchFields") or []:
            values = requirement.get("values") or []
            if requirement.get("key") == NODE_NAME_FIELD and requirement.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return None
