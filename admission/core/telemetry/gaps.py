"""Accounting gaps for metrics: how many gaps of each kind, and how large, per kind and measure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from admission.core.gaps import GapKind, GapReport


@dataclass(frozen=True, slots=True)
class GapFigures:
    counts: Mapping[str, int]  # kind -> gaps found (every kind, zeros included)
    sizes: Mapping[tuple[str, str], float]  # (kind, measure) -> sum of the gaps' absolute sizes


def gap_figures(report: GapReport) -> GapFigures:
    """Sizes add up per measure (a QuotaUnit or a resource name), never across measures: devices and
    bytes do not add. A signed gap (ChargeDiffers, NativeQuotaCounts) counts by its absolute size."""
    counts = {kind.value: 0 for kind in GapKind}
    sizes: dict[tuple[str, str], float] = {}
    for gap in report.gaps:
        counts[gap.kind.value] += 1
        key = (gap.kind.value, gap.measure)
        sizes[key] = sizes.get(key, 0.0) + float(abs(gap.size))
    return GapFigures(counts, sizes)
