"""Accounting gaps: where DRA allocations, draq's charges, native ResourceQuota, device plugins and
ResourceSlices disagree, per namespace, ClusterQueue and QuotaUnit.

Pure: `read_objects` parses manifests into a `GapInput`; `find_gaps` returns a `GapReport` (accounts,
native quota accounts, gaps, notes); `render_text` prints it. docs/gaps.md describes every kind.
"""

from admission.core.gaps.find import find_gaps
from admission.core.gaps.inputs import SUPPORTED, GapInput, read_objects
from admission.core.gaps.render import render_text
from admission.core.gaps.report import MEANING, Account, Gap, GapKind, GapReport, NativeAccount, parse_kind

__all__ = [
    "MEANING", "SUPPORTED", "Account", "Gap", "GapInput", "GapKind", "GapReport", "NativeAccount", "find_gaps",
    "parse_kind", "read_objects", "render_text",
]
