"""What the everyday commands show: usage against quota per queue (`draq queues`), why a group waits
(`draq why`), and free room per topology domain (`draq topology`). Pure: manifests in, reports and text out."""

from admission.core.views.queues import QueueReport, QueueUsage, UnitUsage, queue_report, render_queues
from admission.core.views.topology import TopologyReport, render_topology, topology_report
from admission.core.views.why import Why, group_of_pod, why

__all__ = ["QueueReport", "QueueUsage", "TopologyReport", "UnitUsage", "Why", "group_of_pod", "queue_report",
           "render_queues", "render_topology", "topology_report", "why"]
