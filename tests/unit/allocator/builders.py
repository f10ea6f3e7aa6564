"""Allocator helpers on top of tests.support.builders: an Allocator over manifests, slices of GPUs, results."""

from __future__ import annotations

from typing import Any

from admission.core.allocator import Allocator, Snapshot
from admission.core.features import FeatureGates, exactly
from tests.support.builders import Manifest, device, models, resource_slice


def gpus(node_name: str, n: int, **attributes: Any) -> Manifest:
    """Slice `<node>-gpus` of `n` devices `gpu-<i>` with an `index` attribute (and any others given)."""
    return resource_slice(node_name, *(device(f"gpu-{i}", {"index": i, **attributes}) for i in range(n)),
                          name=f"{node_name}-gpus")


def allocator(*manifests: dict[str, Any], gates: FeatureGates | None = None, budget: int | None = None,
              ) -> Allocator:
    return Allocator(Snapshot.from_models(models(*manifests)), gates or exactly("1.36", []), budget=budget)


def devices_of(outcome: Any, claim_key: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for result in outcome.allocations[claim_key].results:
        found.setdefault(result.request, []).append(result.device_id)
    return found
