"""Figures for metrics and probes, computed from the core's own values: queue quota, usage and
borrowing, groups by phase and by why they wait, release latency, published and allocated devices
(with the UUIDs that per-device telemetry is keyed by), accounting gaps by kind, and the loop's liveness
and readiness.

Pure: the shell renders them (Prometheus metrics, health endpoints).
"""

from admission.core.telemetry.devices import (
    AllocatedDevice,
    PodQueue,
    allocated_devices,
    device_uuid,
    pod_queues,
    published_devices,
)
from admission.core.telemetry.gaps import GapFigures, gap_figures
from admission.core.telemetry.health import loop_stall, loop_unready
from admission.core.telemetry.queues import (
    GROUP_PHASES,
    GroupFigures,
    LocalQueueFigure,
    QueueFigure,
    QueueInfo,
    group_figures,
    local_queue_figures,
    queue_figures,
    queue_infos,
    release_latency,
)
from admission.core.telemetry.reviews import ReviewOutcome, review_outcome

__all__ = [
    "GROUP_PHASES",
    "AllocatedDevice",
    "GapFigures",
    "GroupFigures",
    "LocalQueueFigure",
    "PodQueue",
    "QueueFigure",
    "QueueInfo",
    "ReviewOutcome",
    "allocated_devices",
    "device_uuid",
    "gap_figures",
    "group_figures",
    "local_queue_figures",
    "loop_stall",
    "loop_unready",
    "pod_queues",
    "published_devices",
    "queue_figures",
    "queue_infos",
    "release_latency",
    "review_outcome",
]
