"""NodeAffinity, as the scheduler filters nodes: `spec.nodeSelector` (every label equal) and the required
node affinity (terms ORed, requirements within a term ANDed; `matchFields` on `metadata.name`)."""

from __future__ import annotations

from collections.abc import Mapping

from admission.core.models import NodeSelector


def matches_node_selector(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def matches_node_affinity(selector: Mapping[str, str], required: NodeSelector | None,
                          labels: Mapping[str, str], name: str) -> bool:
    """Both the node selector and the required node affinity (when the pod has one) match the node."""
    if not matches_node_selector(selector, labels):
        return False
    return required is None or required.matches(labels, name)
