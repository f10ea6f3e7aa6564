"""The operator's Prometheus metrics, rendered from the pure core's figures (`admission.core.telemetry`).

Everything describing the cluster as the last cycle saw it (queues, groups, devices, gaps) is kept as
one snapshot and rendered at scrape time by a collector, so a deleted queue or a released device
leaves no stale series behind; only the leader renders it. Events (cycles, releases) go to histograms
and counters. Names and labels are listed in docs/metrics.md, with their cardinality. The accounting
gaps come from the gap model (`admission.core.gaps.find_gaps`, the same as `draq gaps`) over a cycle's
reading, within a time budget: after a computation that took t seconds, the next one waits for the
first cycle t / GAP_BUDGET seconds later.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from admission.core.allocator import DomainFigure, Snapshot, domain_figures
from admission.core.cycle import STEPS, Admit, CycleResult, GroupDecision, GroupView
from admission.core.gaps import GapInput, find_gaps
from admission.core.labels import GROUP_LABEL
from admission.core.quota import LocalQueue
from admission.core.telemetry import (
    AllocatedDevice,
    GapFigures,
    GroupFigures,
    LocalQueueFigure,
    QueueFigure,
    QueueInfo,
    allocated_devices,
    gap_figures,
    group_figures,
    local_queue_figures,
    pod_queues,
    published_devices,
    queue_figures,
    queue_infos,
    release_latency,
)
from admission.kube.clock import SYSTEM_CLOCK, Clock
from admission.operator.reading import Reading

log = logging.getLogger(__name__)

GROUP_OUTCOMES = ("evaluated", "parked", "woken")  # `CycleStats`
CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LATENCY_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0,
                   86400.0)

GAP_BUDGET = 0.1
"""The share of the operator's time the gap report may take (it reads every pod and claim)."""
FIGURES_BUDGET = 0.05
"""The share of the operator's time the cluster's figures may take: they read every group, so with thousands
pending they are refreshed every few cycles rather than after each one (a scrape every 15 s or more sees
figures at most a few seconds old)."""
DEFER_SECONDS = 5.0
"""How long the figures and the gap report may be left to a later pass while changes keep arriving (each pass
that ends with a change already waiting): a burst's admissions do not wait for them, and a scrape sees them at
most this much older than their budgets allow."""


def reading_gaps(reading: Reading) -> GapFigures:
    """The gap model over what the cycle read, the cached native ResourceQuotas included (as `draq gaps`
    reads them)."""
    return gap_figures(find_gaps(gap_input(reading)))


def gap_input(reading: Reading) -> GapInput:
    cycle = reading.cycle
    return GapInput(cycle.snapshot, cycle.gates, cycle.units, reading.cluster_queues, cycle.local_queues,
                    tuple(g.pod_group for g in cycle.groups if g.pod_group is not None),
                    cycle.namespace_labels or {}, resource_quotas=reading.resource_quotas,
                    matches=cycle.matches)


class KeptGaps:
    """`reading_gaps`, computed again only when one of its inputs is another object than last time: the
    reader keeps every object it did not see change (`docs/operator.md`, "The cache and the snapshot"), so
    a pass with nothing new, however many groups wait, costs a comparison per object."""

    def __init__(self) -> None:
        self._last: tuple[GapInput, GapFigures] | None = None

    def __call__(self, reading: Reading) -> GapFigures:
        data = gap_input(reading)
        if self._last is not None and same_input(self._last[0], data):
            return self._last[1]
        figures = gap_figures(find_gaps(data))
        self._last = (data, figures)
        return figures


def same_input(before: GapInput, now: GapInput) -> bool:
    """Every field the same object, or a collection of the same objects (mappings: the same keys, each to the
    same object); namespace labels, rebuilt from the cache each reading, equal."""
    return (before.snapshot is now.snapshot and before.gates == now.gates and before.matches is now.matches
            and _same_items(before.units, now.units) and _same_items(before.cluster_queues, now.cluster_queues)
            and _same_items(before.pod_groups, now.pod_groups)
            and _same_items(before.resource_quotas, now.resource_quotas)
            and _same_values(before.local_queues, now.local_queues)
            and before.namespace_labels == now.namespace_labels and before.notes == now.notes)


def _same_items(before: tuple[object, ...], now: tuple[object, ...]) -> bool:
    return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))


def _same_values(before: Mapping[str, object], now: Mapping[str, object]) -> bool:
    return before.keys() == now.keys() and all(before[key] is value for key, value in now.items())


@dataclass(frozen=True, slots=True)
class ClusterFigures:
    """What the last cycle saw, ready to render."""

    queues: tuple[QueueInfo, ...] = ()
    units: tuple[QueueFigure, ...] = ()
    local_units: tuple[LocalQueueFigure, ...] = ()
    groups: GroupFigures = field(default_factory=lambda: GroupFigures({}, {}))
    published: Mapping[tuple[str, str], int] = field(default_factory=dict)
    allocated: tuple[AllocatedDevice, ...] = ()
    domains: tuple[DomainFigure, ...] = ()


def cluster_figures(reading: Reading, result: CycleResult, kept: KeptFigures | None = None) -> ClusterFigures:
    """The figures of a cycle; with `kept`, those whose inputs are the same objects as last time are reused."""
    cycle = reading.cycle
    kept = kept or KeptFigures()
    queue_names = tuple(q.name for q in reading.cluster_queues)
    return ClusterFigures(
        queues=queue_infos(result.state),
        units=queue_figures(result.state),
        local_units=local_queue_figures(result.state, cycle.local_queues),
        groups=kept.groups(cycle.groups, result.decisions, cycle.local_queues, queue_names),
        published=kept.published(cycle.snapshot),
        allocated=kept.allocated(cycle.snapshot, cycle.groups, cycle.local_queues),
        domains=domain_figures(cycle.snapshot, cycle.gates, cycle.topologies.values(), result.usage))


class KeptFigures:
    """The figures that read every group or device, each made again only when an input differs from last
    time (the snapshot: is another object; the rest: another value, which for the objects the reader kept is
    told by identity at once). With thousands of groups waiting and nothing new, a cycle's figures cost
    comparisons."""

    def __init__(self) -> None:
        self._groups: tuple[tuple[object, ...], GroupFigures] | None = None
        self._published: tuple[Snapshot, Mapping[tuple[str, str], int]] | None = None
        self._allocated: tuple[Snapshot, tuple[object, ...], tuple[AllocatedDevice, ...]] | None = None

    def groups(self, groups: tuple[GroupView, ...], decisions: tuple[GroupDecision, ...],
               local_queues: Mapping[str, LocalQueue], queue_names: tuple[str, ...]) -> GroupFigures:
        inputs = (groups, decisions, local_queues, queue_names)
        if self._groups is not None and self._groups[0] == inputs:
            return self._groups[1]
        figures = group_figures(groups, decisions, local_queues, queue_names)
        self._groups = (inputs, figures)
        return figures

    def published(self, snapshot: Snapshot) -> Mapping[tuple[str, str], int]:
        if self._published is None or self._published[0] is not snapshot:
            self._published = (snapshot, published_devices(snapshot))
        return self._published[1]

    def allocated(self, snapshot: Snapshot, groups: tuple[GroupView, ...],
                  local_queues: Mapping[str, LocalQueue]) -> tuple[AllocatedDevice, ...]:
        known = self._allocated
        if known is None or known[0] is not snapshot or known[1] != (groups, local_queues):
            consuming = pod_queues(_consuming_groups(snapshot, groups), local_queues)
            known = self._allocated = (snapshot, (groups, local_queues), allocated_devices(snapshot, consuming))
        return known[2]


def _consuming_groups(snapshot: Snapshot, groups: tuple[GroupView, ...]) -> list[GroupView]:
    """The groups with a member that an allocated claim is reserved for: the only pods `allocated_devices`
    looks up (a group's pods map to its queues alone, so the other groups' pods need not be made)."""
    keys = set()
    for claim in snapshot.allocated_claims():
        for consumer in claim.reserved_for:
            pod = snapshot.pods.get(f"{claim.namespace}/{consumer.name}")
            if pod is not None and GROUP_LABEL in pod.labels:
                keys.add(f"{pod.namespace}/{pod.labels[GROUP_LABEL]}")
    return [g for g in groups if g.key in keys] if keys else []


class OperatorMetrics:
    """Registers the operator's metrics in `registry`; the loop calls `cycle` and `released`."""

    def __init__(self, registry: CollectorRegistry, leading: Callable[[], bool],
                 gaps: Callable[[Reading], GapFigures] | None = None, gap_budget: float = GAP_BUDGET,
                 clock: Clock = SYSTEM_CLOCK, figures_budget: float = FIGURES_BUDGET) -> None:
        self.figures = ClusterFigures()
        self.gap_figures: GapFigures | None = None
        self.leading = leading
        self._gaps = gaps or KeptGaps()
        self._gap_budget = gap_budget
        self._clock = clock
        self._gaps_due = 0.0  # the clock's monotonic time from which the gaps may be computed again
        self._figures_budget = figures_budget
        self._figures_due = 0.0  # the same for the cluster's figures
        self._updated = -DEFER_SECONDS  # the clock's monotonic time of the last pass that updated them (`cycle`)
        self._kept_figures = KeptFigures()
        self._cycle = Histogram("draq_cycle_duration_seconds", "Duration of one reconcile pass that ran an "
                                "admission cycle, writes included.", registry=registry, buckets=CYCLE_BUCKETS)
        self._steps = Histogram("draq_cycle_step_duration_seconds", "Time one admission cycle spent in a step: "
                                "the allocator (placing gangs) or charging (quota charges).", ["step"],
                                registry=registry, buckets=CYCLE_BUCKETS)
        self._last = Gauge("draq_cycle_last_completed_timestamp_seconds", "When the last admission cycle "
                           "completed (Unix time).", registry=registry)
        self._groups = Counter("draq_cycle_groups_total", "Pending groups an admission cycle reached in their turn: "
                               "evaluated (placed and charged), parked (given their last Wait again) or woken (parked "
                               "by the last cycle and evaluated by this one).", ["outcome"], registry=registry)
        self._parked = Gauge("draq_parked_groups", "Pending groups parked after the last admission cycle.",
                             registry=registry)
        self._admissions = Counter("draq_admissions_total", "Groups admitted and released.", ["cluster_queue"],
                                   registry=registry)
        self._latency = Histogram("draq_admission_latency_seconds", "From a group's creation to its release "
                                  "(gates removed).", ["cluster_queue"], registry=registry, buckets=LATENCY_BUCKETS)
        leader = Gauge("draq_leader", "1 while this replica holds the operator Lease (or runs without leader "
                       "election), else 0.", registry=registry)
        leader.set_function(lambda: 1.0 if leading() else 0.0)
        for step in STEPS:
            self._steps.labels(step)
        for outcome in GROUP_OUTCOMES:
            self._groups.labels(outcome)
        registry.register(_FiguresCollector(self))

    def cycle(self, reading: Reading, result: CycleResult, seconds: float, completed_at: dt.datetime,
              hurry: bool = False) -> None:
        """After a cycle: its duration and steps, and a new snapshot of the cluster's figures. With `hurry` (a
        change is already waiting for the next pass), the figures and the gap report are left to a later pass
        unless they are `DEFER_SECONDS` old: the next admission does not wait for them."""
        self._cycle.observe(seconds)
        for step, spent in result.step_seconds.items():
            self._steps.labels(step).observe(spent)
        self._last.set(completed_at.timestamp())
        stats = result.stats
        for outcome, groups in zip(GROUP_OUTCOMES, (stats.evaluated, stats.parked, stats.woken), strict=True):
            self._groups.labels(outcome).inc(groups)
        self._parked.set(stats.parked_after)
        now = self._clock.monotonic()
        if hurry and now - self._updated < DEFER_SECONDS:
            return
        self._updated = now
        self._update_figures(reading, result)
        self._update_gaps(reading)

    def _update_figures(self, reading: Reading, result: CycleResult) -> None:
        started = self._clock.monotonic()
        if started < self._figures_due:
            return
        try:
            self.figures = cluster_figures(reading, result, self._kept_figures)
        except Exception:  # metrics must never stop admission; the old figures stay
            log.exception("computing the metrics' figures failed")
        else:
            for info in self.figures.queues:  # every queue's series exist from the start (rates see a first 0)
                self._admissions.labels(info.cluster_queue)
                self._latency.labels(info.cluster_queue)
        finished = self._clock.monotonic()
        self._figures_due = finished + (finished - started) / self._figures_budget

    def _update_gaps(self, reading: Reading) -> None:
        started = self._clock.monotonic()
        if started < self._gaps_due:
            return
        try:
            self.gap_figures = self._gaps(reading)
        except Exception:  # the gap report must never stop admission; the last figures stay
            log.exception("computing the accounting gaps failed")
        finished = self._clock.monotonic()
        self._gaps_due = finished + (finished - started) / self._gap_budget

    def released(self, group: GroupView, admit: Admit, now: dt.datetime) -> None:
        """A group's admission was recorded and its members released."""
        self._admissions.labels(admit.cluster_queue).inc()
        latency = release_latency(group, now)
        if latency is not None:
            self._latency.labels(admit.cluster_queue).observe(latency)


class _FiguresCollector(Collector):
    def __init__(self, metrics: OperatorMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        """Only the leader describes the cluster: a standby's figures would be those of its last term."""
        if not self._metrics.leading():
            return
        figures = self._metrics.figures
        yield from queue_families(figures.queues, figures.units)
        yield from local_queue_families(figures.local_units)
        yield from group_families(figures.groups)
        yield from device_families(figures.published, figures.allocated)
        yield from domain_families(figures.domains)
        if self._metrics.gap_figures is not None:
            yield from gap_families(self._metrics.gap_figures)


UNIT_FIGURES: tuple[tuple[str, str, Callable[[QueueFigure], float | None]], ...] = (
    ("nominal_quota", "Nominal quota", lambda f: f.nominal),
    ("borrowing_limit", "Borrowing limit (absent: none)", lambda f: f.borrowing_limit),
    ("lending_limit", "Lending limit (absent: all of the nominal quota)", lambda f: f.lending_limit),
    ("usage", "Charged to admitted and running groups (reserved included)", lambda f: f.used + f.reserved),
    ("reserved", "Charged to admitted groups whose members are not all bound yet", lambda f: f.reserved),
    ("borrowed", "Usage beyond the nominal quota, borrowed from the cohort", lambda f: f.borrowed),
)


def queue_families(queues: Iterable[QueueInfo], units: Iterable[QueueFigure]) -> Iterator[Metric]:
    info = GaugeMetricFamily("draq_cluster_queue_info", "ClusterQueues: cohort and queueing strategy (value 1).",
                             labels=["cluster_queue", "cohort", "queueing_strategy"])
    for queue in queues:
        info.add_metric([queue.cluster_queue, queue.cohort, queue.strategy], 1)
    yield info
    units = list(units)
    for name, text, value in UNIT_FIGURES:
        family = GaugeMetricFamily(f"draq_cluster_queue_{name}", f"{text}, per ClusterQueue and QuotaUnit, in "
                                   "the unit's base amount (devices, bytes, counter units).",
                                   labels=["cluster_queue", "unit"])
        for figure in units:
            amount = value(figure)
            if amount is not None:
                family.add_metric([figure.cluster_queue, figure.unit], amount)
        yield family


LOCAL_FIGURES: tuple[tuple[str, str, Callable[[LocalQueueFigure], float]], ...] = (
    ("usage", "Charged to the LocalQueue's admitted and running groups (reserved included)", lambda f: f.usage),
    ("reserved", "Charged to the LocalQueue's admitted groups whose members are not all bound yet",
     lambda f: f.reserved),
)


def local_queue_families(figures: Iterable[LocalQueueFigure]) -> Iterator[Metric]:
    """Per LocalQueue (and so per namespace) and unit of its ClusterQueue: one series per queue object and
    unit, never per group or pod."""
    figures = list(figures)
    for name, text, value in LOCAL_FIGURES:
        family = GaugeMetricFamily(f"draq_local_queue_{name}", f"{text}, per LocalQueue and QuotaUnit, in the "
                                   "unit's base amount; sum by namespace for a namespace's usage.",
                                   labels=["namespace", "local_queue", "cluster_queue", "unit"])
        for figure in figures:
            family.add_metric([figure.namespace, figure.local_queue, figure.cluster_queue, figure.unit],
                              value(figure))
        yield family


def group_families(groups: GroupFigures) -> Iterator[Metric]:
    phases = GaugeMetricFamily("draq_pod_groups", "Pod groups by ClusterQueue and phase (Pending, Admitted, "
                               "Running, Evicted).", labels=["cluster_queue", "phase"])
    for (queue, phase), count in sorted(groups.phases.items()):
        phases.add_metric([queue, phase], count)
    yield phases
    waiting = GaugeMetricFamily("draq_pending_pod_groups", "Pending pod groups by ClusterQueue and why they wait "
                                "(the WaitReason of their Admitted=False condition).", labels=["cluster_queue",
                                                                                               "reason"])
    for (queue, reason), count in sorted(groups.waiting.items()):
        waiting.add_metric([queue, reason], count)
    yield waiting


def device_families(published: Mapping[tuple[str, str], int],
                    allocated: Iterable[AllocatedDevice]) -> Iterator[Metric]:
    devices = GaugeMetricFamily("draq_devices", "Devices published in ResourceSlices, by node and driver.",
                                labels=["node", "driver"])
    for (node, driver), count in sorted(published.items()):
        devices.add_metric([node, driver], count)
    yield devices
    info = GaugeMetricFamily(
        "draq_allocated_device_info", "One series per allocated device and consuming pod (value 1): the device "
        "(node, driver, pool, device, uuid) and who holds it (namespace, claim, pod, cluster_queue, local_queue).",
        labels=["node", "driver", "pool", "device", "uuid", "namespace", "claim", "pod", "cluster_queue",
                "local_queue"])
    for row in allocated:
        info.add_metric([row.node, row.driver, row.pool, row.device, row.uuid, row.namespace, row.claim, row.pod,
                         row.cluster_queue, row.local_queue], 1)
    yield info


DOMAIN_FIGURES: tuple[tuple[str, str, Callable[[DomainFigure], int]], ...] = (
    ("devices", "Devices in the domain", lambda f: f.devices),
    ("free_devices", "Devices of the domain free (neither allocated nor promised to an admitted group)",
     lambda f: f.free),
    ("largest_gang_pods", "The largest gang the domain can still take, in whole-node pods of the level "
     "(draq_topology_level_pod_devices devices each, one per node)", lambda f: f.largest_gang),
    ("stranded_devices", "Free devices of the domain no whole-node pod can use (its fragmentation)",
     lambda f: f.stranded),
)


def domain_families(domains: Iterable[DomainFigure]) -> Iterator[Metric]:
    domains = list(domains)
    for name, text, value in DOMAIN_FIGURES:
        family = GaugeMetricFamily(f"draq_topology_domain_{name}", f"{text}, per Topology, level and domain (at "
                                   "most 512 domains per level).", labels=["topology", "level", "domain"])
        for figure in domains:
            family.add_metric([figure.topology, figure.level, figure.domain], value(figure))
        yield family
    pods = GaugeMetricFamily("draq_topology_level_pod_devices", "Devices of one whole-node pod of a level: the "
                             "most devices one node gives a domain of it.", labels=["topology", "level"])
    for key, size in sorted({(f.topology, f.level): f.pod_devices for f in domains}.items()):
        pods.add_metric(list(key), size)
    yield pods


def gap_families(gaps: GapFigures) -> Iterator[Metric]:
    counts = GaugeMetricFamily("draq_accounting_gaps", "Accounting gaps found, by kind (as `draq gaps` reports "
                               "them; docs/gaps.md).", labels=["kind"])
    for kind, count in sorted(gaps.counts.items()):
        counts.add_metric([kind], count)
    yield counts
    sizes = GaugeMetricFamily("draq_accounting_gap_size", "Total size of the accounting gaps of a kind, per "
                              "measure (a QuotaUnit, or a resource name), in that measure's base amount.",
                              labels=["kind", "measure"])
    for (kind, measure), size in sorted(gaps.sizes.items()):
        sizes.add_metric([kind, measure], size)
    yield sizes
