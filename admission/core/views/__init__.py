"""What the everyday commands show: usage against quota per queue (`draq queues`) and why a group waits
(`draq why`). Pure: manifests in, reports and text out."""

from admission.core.views.queues import QueueReport, QueueUsage, UnitUsage, queue_report, render_queues
from admission.core.views.why import Why, group_of_pod, why

__all__ = ["QueueReport", "QueueUsage", "UnitUsage", "Why", "group_of_pod", "queue_report", "render_queues", "why"]
