#!/usr/bin/env python3
"""draq's Grafana dashboards, built with grafana-foundation-sdk's typed builders (generated for Grafana
11.6; the JSON model imports into Grafana 11 and 12).

    python dashboards/build.py          # writes dashboards/*.json
    python dashboards/build.py --check  # exits 1 when a committed file differs from what is built

tests/unit/test_dashboards.py checks that the committed JSON is what this script writes and that every
query is valid PromQL (promtool); e2e/test_metrics.py runs every query against a real Prometheus
scraping draq and DCGM-shaped GPU telemetry. Metric names: docs/metrics.md.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import bargauge, dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.builders.common import StackingConfig, VizLegendOptions
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import LegendDisplayMode, LegendPlacement, StackingMode
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableRefresh, VariableSort
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

HERE = Path(__file__).resolve().parent
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
CQ = 'cluster_queue=~"$cluster_queue"'
UNIT = 'unit=~"$unit"'
LQ = f'namespace=~"$namespace", local_queue=~"$local_queue", {CQ}'
VARIABLES = ("cohort", "cluster_queue", "unit", "namespace", "local_queue", "job")
RATE = "$__rate_interval"
TAGS = ["draq", "kubernetes", "dra"]

# ----- the join of per-device telemetry with draq's allocations --------------------------------------
# draq_allocated_device_info carries the device's UUID (label uuid) and its holder; DCGM exporter keys GPUs
# by UUID (label UUID). One row per UUID and ClusterQueue, so the join is many-to-one.
HOLDERS = ('max by (UUID, cluster_queue) (label_replace(draq_allocated_device_info{uuid!="", ' + CQ + '}, '
           '"UUID", "$1", "uuid", "(.+)"))')
ALL_HOLDERS = 'max by (UUID) (label_replace(draq_allocated_device_info{uuid!=""}, "UUID", "$1", "uuid", "(.+)"))'


def per_queue(dcgm_metric: str) -> str:
    """A DCGM series per GPU, with the ClusterQueue of the claim that holds the GPU."""
    return f"{dcgm_metric} * on (UUID) group_left (cluster_queue) {HOLDERS}"


def outside_queues(expr: str) -> str:
    """Devices held by pods draq does not manage carry cluster_queue="": name them."""
    return f'label_replace({expr}, "cluster_queue", "(outside queues)", "cluster_queue", "")'


# ----- panel builders ---------------------------------------------------------------------------------
class Layout:
    """Panel ids in the order panels are added (Grafana needs them unique within a dashboard)."""

    def __init__(self) -> None:
        self.next_id = 0

    def id(self) -> int:
        self.next_id += 1
        return self.next_id


def query(expr: str, legend: str = "", *, ref: str = "A", instant: bool = False) -> prometheus.Dataquery:
    target = prometheus.Dataquery().expr(expr).ref_id(ref)
    if legend:
        target = target.legend_format(legend)
    if instant:
        target = target.instant().format(PromQueryFormat.TABLE)
    return target


def series(layout: Layout, title: str, description: str, unit: str, *targets: prometheus.Dataquery,
           stacked: bool = False, width: int = 12) -> timeseries.Panel:
    panel = (timeseries.Panel().id(layout.id()).title(title).description(description).datasource(DATASOURCE)
             .unit(unit).height(8).span(width).fill_opacity(10 if not stacked else 60)
             .legend(VizLegendOptions().display_mode(LegendDisplayMode.TABLE).placement(LegendPlacement.BOTTOM)
                     .show_legend(True)))
    if stacked:
        panel = panel.stacking(StackingConfig().mode(StackingMode.NORMAL))
    for target in targets:
        panel = panel.with_target(target)
    return panel


def single(layout: Layout, title: str, description: str, unit: str, expr: str, width: int = 6) -> stat.Panel:
    return (stat.Panel().id(layout.id()).title(title).description(description).datasource(DATASOURCE).unit(unit)
            .height(4).span(width).with_target(query(expr)))


def listing(layout: Layout, title: str, description: str, expr: str, width: int = 24) -> table.Panel:
    return (table.Panel().id(layout.id()).title(title).description(description).datasource(DATASOURCE)
            .height(8).span(width).filterable(True).with_target(query(expr, instant=True)))


def bars(layout: Layout, title: str, description: str, unit: str, expr: str, legend: str,
         width: int = 12) -> bargauge.Panel:
    return (bargauge.Panel().id(layout.id()).title(title).description(description).datasource(DATASOURCE)
            .unit(unit).min(0).height(8).span(width).with_target(query(expr, legend)))


def per_unit(panel: timeseries.Panel) -> timeseries.Panel:
    """One panel per QuotaUnit (Grafana repeats it for each value of $unit): one axis, one kind of amount."""
    return panel.repeat("unit").repeat_direction("h").max_per_row(3)


def section(layout: Layout, title: str) -> dashboard.Row:
    return dashboard.Row(title).id(layout.id())


def variable(name: str, label: str, query_text: str, *, any_value: bool = True) -> dashboard.QueryVariable:
    """A multi-value variable over a label's values. "All" means any value (the regex .*), or, for a variable
    narrowed by another (`any_value=False`), every value listed (so a chosen cohort narrows "All" queues)."""
    found = (dashboard.QueryVariable(name).label(label).datasource(DATASOURCE).query(query_text)
             .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.ALPHABETICAL_ASC).multi(True)
             .include_all(True))
    return found.all_value(".*") if any_value else found


def base(uid: str, title: str, description: str, *, with_job: bool = False,
         with_scopes: bool = False) -> dashboard.Dashboard:
    """The variables: cohort narrows ClusterQueue; with scopes, also QuotaUnit (panels repeated per unit),
    namespace and LocalQueue."""
    board = (dashboard.Dashboard(title).uid(uid).description(description).tags(TAGS).editable()
             .refresh("30s").time("now-3h", "now").timezone("browser")
             .with_variable(dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus"))
             .with_variable(variable("cohort", "Cohort", "label_values(draq_cluster_queue_info, cohort)"))
             .with_variable(variable("cluster_queue", "ClusterQueue",
                                     'label_values(draq_cluster_queue_info{cohort=~"$cohort"}, cluster_queue)',
                                     any_value=False)))
    if with_scopes:
        board = (board
                 .with_variable(variable("unit", "QuotaUnit", f"label_values(draq_cluster_queue_usage{{{CQ}}}, unit)",
                                         any_value=False))
                 .with_variable(variable("namespace", "Namespace",
                                         f"label_values(draq_local_queue_usage{{{CQ}}}, namespace)"))
                 .with_variable(variable("local_queue", "LocalQueue", "label_values(draq_local_queue_usage"
                                         f'{{namespace=~"$namespace", {CQ}}}, local_queue)', any_value=False)))
    if with_job:
        board = board.with_variable(variable("job", "Job", "label_values(draq_leader, job)"))
    return board


# ----- the dashboards -----------------------------------------------------------------------------------
def queues() -> dashboard.Dashboard:
    layout = Layout()
    usage_share = (f"draq_cluster_queue_usage{{{CQ}, {UNIT}}} / on (cluster_queue, unit) "
                   f"draq_cluster_queue_nominal_quota{{{CQ}, {UNIT}}}")
    return (
        base("draq-queues", "draq / Queues", "Per ClusterQueue and QuotaUnit: usage against the nominal quota, "
             "borrowing within the cohort, usage per LocalQueue and namespace, groups by phase, why pending groups "
             "wait, and admission latency.", with_scopes=True)
        .with_row(section(layout, "Quota"))
        .with_panel(bars(layout, "Usage of the nominal quota", "Charged to admitted and running groups, as a "
                         "share of the nominal quota (above 100 %: borrowed from the cohort).", "percentunit",
                         usage_share, "{{cluster_queue}} / {{unit}}"))
        .with_panel(series(layout, "Usage of the nominal quota over time", "Usage / nominal quota per "
                           "ClusterQueue and QuotaUnit.", "percentunit",
                           query(usage_share, "{{cluster_queue}} / {{unit}}")))
        .with_panel(per_unit(series(layout, "Usage, reserved and nominal quota: $unit", "In the unit's base "
                                    "amount (devices, bytes, counter units). Reserved: admitted groups not bound "
                                    "yet.", "short",
                                    query(f"draq_cluster_queue_usage{{{CQ}, {UNIT}}}", "usage {{cluster_queue}}"),
                                    query(f"draq_cluster_queue_reserved{{{CQ}, {UNIT}}}", "reserved {{cluster_queue}}",
                                          ref="B"),
                                    query(f"draq_cluster_queue_nominal_quota{{{CQ}, {UNIT}}}",
                                          "nominal {{cluster_queue}}", ref="C"), width=8)))
        .with_panel(per_unit(series(layout, "Borrowed from the cohort: $unit", "Usage beyond the nominal quota, "
                                    "lent by other ClusterQueues of the cohort.", "short",
                                    query(f"draq_cluster_queue_borrowed{{{CQ}, {UNIT}}}", "{{cluster_queue}}"),
                                    width=8)))
        .with_panel(listing(layout, "ClusterQueues", "Cohort and queueing strategy of each ClusterQueue.",
                            f"draq_cluster_queue_info{{{CQ}}}"))
        .with_row(section(layout, "LocalQueues and namespaces"))
        .with_panel(per_unit(series(layout, "Usage per LocalQueue: $unit", "Charged to each LocalQueue's admitted "
                                    "and running groups, in the unit's base amount.", "short",
                                    query(f"sum by (namespace, local_queue) (draq_local_queue_usage{{{LQ}, {UNIT}}})",
                                          "{{namespace}}/{{local_queue}}"), stacked=True, width=8)))
        .with_panel(per_unit(series(layout, "Usage per namespace: $unit", "Charged to the groups of each "
                                    "namespace (all its LocalQueues), in the unit's base amount.", "short",
                                    query(f"sum by (namespace) (draq_local_queue_usage{{{LQ}, {UNIT}}})",
                                          "{{namespace}}"), stacked=True, width=8)))
        .with_panel(listing(layout, "LocalQueues", "Usage and reserved amount of each LocalQueue per unit.",
                            f"draq_local_queue_usage{{{LQ}, {UNIT}}}"))
        .with_row(section(layout, "Groups"))
        .with_panel(series(layout, "Pending groups by reason", "Why pending groups wait (the reason of their "
                           "Admitted=False condition).", "short",
                           query(f"sum by (reason) (draq_pending_pod_groups{{{CQ}}}) > 0", "{{reason}}"),
                           stacked=True))
        .with_panel(series(layout, "Groups by phase", "Pending, Admitted (released, not all bound), Running and "
                           "Evicted (waiting to be requeued) groups.", "short",
                           query(f"sum by (phase) (draq_pod_groups{{{CQ}}})", "{{phase}}"), stacked=True))
        .with_panel(listing(layout, "Pending groups per ClusterQueue and reason", "Groups waiting now, by queue "
                            "and reason (kubectl describe podgroups says more).",
                            f"sum by (cluster_queue, reason) (draq_pending_pod_groups{{{CQ}}}) > 0", width=12))
        .with_panel(series(layout, "Admissions", "Groups admitted and released per second.", "ops",
                           query(f"sum by (cluster_queue) (rate(draq_admissions_total{{{CQ}}}[{RATE}]))",
                                 "{{cluster_queue}}")))
        .with_panel(series(layout, "Admission latency (creation to release)", "From a group's creation to the "
                           "removal of its gates: median and 95th percentile.", "s",
                           query("histogram_quantile(0.5, sum by (le, cluster_queue) "
                                 f"(rate(draq_admission_latency_seconds_bucket{{{CQ}}}[{RATE}])))",
                                 "p50 {{cluster_queue}}"),
                           query("histogram_quantile(0.95, sum by (le, cluster_queue) "
                                 f"(rate(draq_admission_latency_seconds_bucket{{{CQ}}}[{RATE}])))",
                                 "p95 {{cluster_queue}}", ref="B"), width=24))
    )


def devices() -> dashboard.Dashboard:
    layout = Layout()
    allocated = "count by (driver, pool, device) (draq_allocated_device_info)"
    per_queue_devices = ("count by (cluster_queue) (count by (cluster_queue, driver, pool, device) "
                         f"(draq_allocated_device_info{{{CQ}}}))")
    per_node = ("(count by (node) (count by (node, driver, pool, device) (draq_allocated_device_info)) "
                "or sum by (node) (draq_devices) * 0) / sum by (node) (draq_devices)")
    return (
        base("draq-devices", "draq / DRA devices and accounting gaps", "Devices the drivers publish, who holds "
             "the allocated ones, and where DRA allocations, draq's charges and other accounting disagree.")
        .with_row(section(layout, "Devices"))
        .with_panel(single(layout, "Published devices", "Devices in the ResourceSlices' current pools.", "short",
                           "sum(draq_devices)"))
        .with_panel(single(layout, "Allocated devices", "Devices in some claim's allocation.", "short",
                           f"count({allocated}) or vector(0)"))
        .with_panel(single(layout, "Allocated outside every queue", "Devices held by claims of pods draq does not "
                           "manage (or of no pod).", "short",
                           'count(count by (driver, pool, device) (draq_allocated_device_info{cluster_queue=""})) '
                           "or vector(0)"))
        .with_panel(single(layout, "Accounting gaps", "Gaps the gap model finds (as draq gaps reports them).",
                           "short", "sum(draq_accounting_gaps)"))
        .with_panel(series(layout, "Allocated devices per ClusterQueue", "Devices held by the claims of each "
                           "queue's pods.", "short", query(outside_queues(per_queue_devices), "{{cluster_queue}}"),
                           stacked=True))
        .with_panel(bars(layout, "Allocated share per node", "Allocated / published devices.", "percentunit",
                         per_node, "{{node}}"))
        .with_panel(listing(layout, "Allocated devices", "Each allocated device with its UUID, claim, pod and "
                            "queue.", f"draq_allocated_device_info{{{CQ}}}"))
        .with_row(section(layout, "Accounting gaps"))
        .with_panel(series(layout, "Accounting gaps by kind", "Number of gaps of each kind (docs/gaps.md).",
                           "short", query("sum by (kind) (draq_accounting_gaps)", "{{kind}}"), stacked=True))
        .with_panel(listing(layout, "Gap sizes", "Total size of the gaps of each kind, per measure (a QuotaUnit "
                            "or a resource name), in that measure's base amount.", "draq_accounting_gap_size",
                            width=12))
        .with_row(section(layout, "Topology domains"))
        .with_panel(bars(layout, "Largest gang each domain can still take", "Whole-node pods (of the level's "
                         "largest node, draq_topology_level_pod_devices devices each) the domain's free devices "
                         "can still hold, one per node (docs/topology.md).", "short",
                         "draq_topology_domain_largest_gang_pods", "{{topology}} {{level}} {{domain}}"))
        .with_panel(bars(layout, "Stranded free devices per domain", "Free devices of the domain that no "
                         "whole-node pod can use: its fragmentation.", "short",
                         "draq_topology_domain_stranded_devices", "{{topology}} {{level}} {{domain}}"))
        .with_panel(series(layout, "Free devices per domain", "Devices of each domain neither allocated nor "
                           "promised to an admitted group.", "short",
                           query("draq_topology_domain_free_devices", "{{topology}} {{level}} {{domain}}")))
    )


def gpu_utilisation() -> dashboard.Dashboard:
    layout = Layout()
    util = per_queue("DCGM_FI_DEV_GPU_UTIL")
    return (
        base("draq-gpu-utilisation", "draq / GPU utilisation per queue", "DCGM exporter's per-GPU telemetry "
             "(DCGM_FI_DEV_*, keyed by UUID) joined with draq's allocations: how busy each queue keeps the GPUs "
             "it holds. Needs GPU telemetry in the same Prometheus.")
        .with_panel(series(layout, "GPU utilisation per ClusterQueue", "Mean utilisation of the GPUs each queue's "
                           "claims hold.", "percent", query(f"avg by (cluster_queue) ({util})", "{{cluster_queue}}")))
        .with_panel(series(layout, "Idle allocated GPUs", "GPUs a queue holds that are below 5 % utilisation.",
                           "short", query(f"count by (cluster_queue) (({util}) < 5) or count by (cluster_queue) "
                                          f"({util}) * 0", "{{cluster_queue}}"), stacked=True))
        .with_panel(series(layout, "GPUs held per ClusterQueue (with telemetry)", "Allocated GPUs whose telemetry "
                           "is present, per queue.", "short", query(f"count by (cluster_queue) ({util})",
                                                                   "{{cluster_queue}}"), stacked=True))
        .with_panel(series(layout, "Framebuffer memory used per ClusterQueue", "DCGM_FI_DEV_FB_USED summed over "
                           "the queue's GPUs.", "decmbytes",
                           query(f"sum by (cluster_queue) ({per_queue('DCGM_FI_DEV_FB_USED')})", "{{cluster_queue}}"),
                           stacked=True))
        .with_panel(series(layout, "Power per ClusterQueue", "DCGM_FI_DEV_POWER_USAGE summed over the queue's "
                           "GPUs.", "watt",
                           query(f"sum by (cluster_queue) ({per_queue('DCGM_FI_DEV_POWER_USAGE')})",
                                 "{{cluster_queue}}"), stacked=True))
        .with_panel(series(layout, "GPUs with telemetry that no claim holds", "GPUs DCGM reports that no DRA "
                           "claim holds (idle, or used outside DRA, e.g. through a device plugin).", "short",
                           query(f"count(DCGM_FI_DEV_GPU_UTIL unless on (UUID) {ALL_HOLDERS}) or vector(0)",
                                 "GPUs")))
        .with_panel(listing(layout, "GPUs and their holders", "Utilisation of each allocated GPU with its node, "
                            "ClusterQueue, namespace and pod.",
                            "DCGM_FI_DEV_GPU_UTIL * on (UUID) group_left (cluster_queue, namespace, pod) max by "
                            "(UUID, cluster_queue, namespace, pod) (label_replace(draq_allocated_device_info"
                            f'{{uuid!="", {CQ}}}, "UUID", "$1", "uuid", "(.+)"))'))
    )


def controller() -> dashboard.Dashboard:
    layout = Layout()
    job = 'job=~"$job"'
    return (
        base("draq-controller", "draq / Controller health", "The admission loop (cycles, allocator and charging "
             "time, leadership) and the webhooks (latency, reviews, denials).", with_job=True)
        .with_row(section(layout, "Operator"))
        .with_panel(single(layout, "Leading replicas", "Replicas holding the operator Lease (1 expected).",
                           "short", f"sum(draq_leader{{{job}}})"))
        .with_panel(single(layout, "Since the last cycle", "Time since the last admission cycle completed (the "
                           "loop runs at least every 30 s while it leads).", "s",
                           f"time() - max(draq_cycle_last_completed_timestamp_seconds{{{job}}})"))
        .with_panel(single(layout, "Targets up", "draq processes Prometheus scrapes successfully.", "short",
                           f"sum(up{{{job}}})"))
        .with_panel(single(layout, "Resident memory", "Largest resident memory of a draq process.", "bytes",
                           f"max(process_resident_memory_bytes{{{job}}})"))
        .with_panel(series(layout, "Cycle duration", "One reconcile pass with an admission cycle, writes "
                           "included: median and 99th percentile.", "s",
                           query("histogram_quantile(0.5, sum by (le) "
                                 f"(rate(draq_cycle_duration_seconds_bucket{{{job}}}[{RATE}])))", "p50"),
                           query("histogram_quantile(0.99, sum by (le) "
                                 f"(rate(draq_cycle_duration_seconds_bucket{{{job}}}[{RATE}])))", "p99", ref="B")))
        .with_panel(series(layout, "Allocator and charging time per cycle", "Mean time a cycle spends placing "
                           "gangs (allocator) and computing charges (charging).", "s",
                           query(f"sum by (step) (rate(draq_cycle_step_duration_seconds_sum{{{job}}}[{RATE}])) / "
                                 f"sum by (step) (rate(draq_cycle_step_duration_seconds_count{{{job}}}[{RATE}]))",
                                 "{{step}}")))
        .with_panel(series(layout, "Cycles", "Admission cycles per second.", "ops",
                           query(f"sum(rate(draq_cycle_duration_seconds_count{{{job}}}[{RATE}]))", "cycles")))
        .with_panel(series(layout, "CPU", "CPU seconds per second of each draq process.", "percentunit",
                           query(f"rate(process_cpu_seconds_total{{{job}}}[{RATE}])", "{{instance}}")))
        .with_row(section(layout, "Webhooks"))
        .with_panel(series(layout, "Webhook latency", "Time to answer an AdmissionReview: 99th percentile per "
                           "webhook.", "s",
                           query("histogram_quantile(0.99, sum by (le, webhook) "
                                 f"(rate(draq_webhook_request_duration_seconds_bucket{{{job}}}[{RATE}])))",
                                 "p99 {{webhook}}")))
        .with_panel(series(layout, "Reviews", "AdmissionReviews answered per second, by webhook and answer.",
                           "ops", query(f"sum by (webhook, allowed) (rate(draq_webhook_reviews_total{{{job}}}"
                                        f"[{RATE}]))", "{{webhook}} allowed={{allowed}}"), stacked=True))
        .with_panel(series(layout, "Denials by reason", "Denied reviews per second by webhook, kind, operation "
                           "and reason.", "ops",
                           query(f"sum by (webhook, kind, operation, reason) (rate(draq_webhook_denials_total"
                                 f"{{{job}}}[{RATE}]))", "{{webhook}} {{kind}} {{operation}}: {{reason}}"),
                           width=24))
    )


DASHBOARDS: dict[str, Callable[[], dashboard.Dashboard]] = {
    "draq-queues.json": queues,
    "draq-devices.json": devices,
    "draq-gpu-utilisation.json": gpu_utilisation,
    "draq-controller.json": controller,
}


# ----- output and checks ---------------------------------------------------------------------------------
def render(board: dashboard.Dashboard) -> str:
    return json.dumps(board.build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def generated() -> dict[str, str]:
    return {name: render(build()) for name, build in DASHBOARDS.items()}


def panel_queries(document: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL) of every query of every panel, rows' panels included."""
    for panel in document.get("panels") or []:
        for inner in [panel, *(panel.get("panels") or [])]:
            for target in inner.get("targets") or []:
                if target.get("expr"):
                    yield str(inner.get("title", "")), str(target["expr"])


def concrete(expr: str, rate_interval: str = "1m") -> str:
    """The query as Grafana sends it with every variable at "All" (regex .*)."""
    expr = expr.replace("$__rate_interval", rate_interval).replace("$__interval", rate_interval)
    return re.sub(r"\$(" + "|".join(VARIABLES) + r")\b", ".*", expr)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, text in generated().items():
        path = HERE / name
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print("out of date (run python dashboards/build.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
