"""The gap report as text: the accounts, native quota, then each gap with its explanation."""

from __future__ import annotations

from collections.abc import Sequence

from admission.core.gaps.report import GapReport
from admission.core.quota import format_amount


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell, two spaces apart (as kubectl prints)."""
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    return ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in (header, *rows)]


def render_text(report: GapReport) -> str:
    lines: list[str] = []
    if report.accounts:
        lines += ["ACCOUNTS (held: what pods really hold; charged: what draq recorded on PodGroups)"]
        lines += table(("NAMESPACE", "CLUSTERQUEUE", "UNIT", "HELD", "CHARGED"),
                       [(a.namespace, a.cluster_queue or "-", a.unit, format_amount(a.held), format_amount(a.charged))
                        for a in report.accounts])
        lines.append("")
    if report.native:
        lines += ["NATIVE QUOTA (used: what the ResourceQuota counts; held: what the namespace really holds)"]
        lines += table(("NAMESPACE", "RESOURCEQUOTA", "RESOURCE", "HARD", "USED", "HELD"),
                       [(n.namespace, n.quota, n.resource, format_amount(n.hard), format_amount(n.used),
                         format_amount(n.held)) for n in report.native])
        lines.append("")
    lines += _gaps(report)
    if report.notes:
        lines += ["", "notes:", *(f"  {note}" for note in report.notes)]
    return "\n".join(lines)


def _gaps(report: GapReport) -> list[str]:
    if not report.gaps:
        return ["no gaps found"]
    lines = [f"GAPS ({len(report.gaps)})"]
    lines += table(("#", "KIND", "NAMESPACE", "CLUSTERQUEUE", "NODE", "MEASURE", "SIZE"),
                   [(str(i), g.kind.value, g.namespace or "-", g.cluster_queue or "-", g.node or "-", g.measure,
                     format_amount(g.size)) for i, g in enumerate(report.gaps, 1)])
    lines.append("")
    for index, gap in enumerate(report.gaps, 1):
        lines.append(f"{index}. {gap.message}")
    return lines
