"""What `draq doctor` found: one check per concern, each problem with the command that fixes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Finding:
    problem: str
    fix: str  # the command (or the one step) that fixes it


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    summary: str  # what was seen
    findings: tuple[Finding, ...] = ()
    checked: bool = True  # False: could not be looked at (not a finding; the summary says why)

    @property
    def ok(self) -> bool:
        return not self.findings


@dataclass(frozen=True, slots=True)
class DoctorReport:
    checks: tuple[Check, ...]
    notes: tuple[str, ...] = ()

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for check in self.checks for f in check.findings)

    @property
    def exit_code(self) -> int:
        """0 when nothing was found, 1 otherwise (2, could not connect, is the shell's)."""
        return 1 if self.findings else 0

    def to_dict(self) -> dict[str, Any]:
        return {"ok": not self.findings, "checks": [
            {"name": c.name, "ok": c.ok, "checked": c.checked, "summary": c.summary,
             "findings": [{"problem": f.problem, "fix": f.fix} for f in c.findings]} for c in self.checks],
            "notes": list(self.notes)}


def render_report(report: DoctorReport) -> str:
    lines = []
    for check in report.checks:
        state = "FAIL" if not check.ok else "ok  " if check.checked else "skip"
        lines.append(f"{state} {check.name}: {check.summary}")
        for finding in check.findings:
            lines.append(f"     - {finding.problem}")
            lines.append(f"       fix: {finding.fix}")
    lines.extend(f"note: {note}" for note in report.notes)
    count = len(report.findings)
    lines.append("no findings" if not count else f"{count} finding{'s' if count != 1 else ''}")
    return "\n".join(lines)
