"""`draq doctor`: a preflight and health check of a live cluster, decided from plain data (the CLI reads
the cluster into `ClusterFacts`; `diagnose` turns them into findings, each with the command that fixes it)."""

from admission.core.doctor.checks import DRAQ_CRDS, WEBHOOK_CONFIGURATIONS, diagnose, service_of
from admission.core.doctor.facts import ClusterFacts, Right, ServiceHealth, last_cycle_from_metrics
from admission.core.doctor.report import Check, DoctorReport, Finding, render_report
from admission.core.doctor.rights import REQUIRED_RIGHTS

__all__ = ["DRAQ_CRDS", "REQUIRED_RIGHTS", "WEBHOOK_CONFIGURATIONS", "Check", "ClusterFacts", "DoctorReport",
           "Finding", "Right", "ServiceHealth", "diagnose", "last_cycle_from_metrics", "render_report",
           "service_of"]
