"""The operator's metrics and probes, against the in-memory fake API: what a cycle exports, what a release
counts, when the loop is live and ready, and the probe port's answers."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import cast

import pytest
from aiohttp import ClientSession
from prometheus_client import CollectorRegistry

from admission.core.cycle import CycleResult, CycleStats
from admission.core.telemetry import GapFigures
from admission.kube.probes import Probes, start_probe_server
from admission.operator import Operator, OperatorSettings
from admission.operator import metrics as metrics_module
from admission.operator.health import LoopHealth, operator_checks
from admission.operator.metrics import (
    ClusterFigures,
    KeptFigures,
    KeptGaps,
    OperatorMetrics,
    cluster_figures,
    reading_gaps,
)
from admission.operator.reading import Reading
from tests.support.builders import draq_object
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS

from .operator_world import bind_as_planned, cluster, submit


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def operator_on(api: FakeApi, registry: CollectorRegistry, clock: FakeClock | None = None) -> Operator:
    operator = Operator(OperatorSettings(leader_election=False, kubernetes_version="1.35"), api=api,
                        clock=clock or FakeClock(), registry=registry)
    await operator.cache.start(timeout=5)
    return operator


def test_a_cycle_exports_quota_usage_groups_and_the_release() -> None:
    async def go() -> None:
        api = cluster(gpus=8)
        submit(api, "a-first", 2, 4)  # served first (same creation time, earlier name)
        submit(api, "b-later", 1, 4)
        registry = CollectorRegistry()
        operator = await operator_on(api, registry)
        await operator.reconcile()
        assert value(registry, "draq_cluster_queue_nominal_quota", cluster_queue="main", unit="gpus") == 8
        assert value(registry, "draq_cluster_queue_usage", cluster_queue="main", unit="gpus") == 8
        assert value(registry, "draq_cluster_queue_reserved", cluster_queue="main", unit="gpus") == 8
        assert value(registry, "draq_cluster_queue_borrowed", cluster_queue="main", unit="gpus") == 0
        local = {"namespace": "team", "local_queue": "lq", "cluster_queue": "main", "unit": "gpus"}
        assert value(registry, "draq_local_queue_usage", **local) == 8
        assert value(registry, "draq_local_queue_reserved", **local) == 8
        assert value(registry, "draq_pod_groups", cluster_queue="main", phase="Admitted") == 1
        assert value(registry, "draq_pending_pod_groups", cluster_queue="main", reason="QuotaExceeded") == 1
        assert value(registry, "draq_admissions_total", cluster_queue="main") == 1
        assert value(registry, "draq_admission_latency_seconds_count", cluster_queue="main") == 1
        assert value(registry, "draq_cycle_duration_seconds_count") == 1
        assert value(registry, "draq_cycle_step_duration_seconds_count", step="allocator") == 1
        groups = {o: value(registry, "draq_cycle_groups_total", outcome=o) for o in ("evaluated", "parked", "woken")}
        assert groups == {"evaluated": 2, "parked": 0, "woken": 0}
        assert value(registry, "draq_parked_groups") == 1  # b-later, over quota
        assert value(registry, "draq_devices", node="node-0", driver="gpu.example.com") == 4
        assert value(registry, "draq_leader") == 1
        assert value(registry, "draq_accounting_gaps", kind="OutsideQueues") == 0  # every kind has a series
        await operator.cache.stop()

    asyncio.run(go())


def test_allocated_devices_name_their_claim_pod_and_queue() -> None:
    async def go() -> None:
        api = cluster(gpus=8)
        submit(api, "train", 1, 2)
        registry = CollectorRegistry()
        operator = await operator_on(api, registry)
        await operator.reconcile()
        await bind_as_planned(api, "train-0", "train")
        await api.merge_patch(f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/train-0-gpu-x1",
                              {"status": {"reservedFor": [{"resource": "pods", "name": "train-0", "uid": "u"}]}})
        await asyncio.sleep(0.05)
        await operator.reconcile()
        rows = [s.labels for m in registry.collect() for s in m.samples if s.name == "draq_allocated_device_info"]
        assert len(rows) == 2
        assert {(r["claim"], r["pod"], r["cluster_queue"], r["local_queue"], r["namespace"]) for r in rows} == {
            ("train-0-gpu-x1", "train-0", "main", "lq", NS)}
        assert {r["node"] for r in rows} <= {"node-0", "node-1"} and all(r["node"] for r in rows)
        await operator.cache.stop()

    asyncio.run(go())


def test_a_pass_running_too_long_or_changes_left_pending_make_the_loop_unhealthy() -> None:
    clock = FakeClock()
    health = LoopHealth(clock, stall_seconds=60)
    assert health.stall(leading=True, changes_pending=True) == ""
    clock.advance(61)
    assert "pending for 61s" in health.stall(leading=True, changes_pending=True)
    assert health.stall(leading=False, changes_pending=True) == ""  # a standby has nothing to do
    with health.running_pass():
        clock.advance(30)
        assert health.stall(leading=True, changes_pending=True) == ""
        clock.advance(31)
        assert "running for 61s" in health.stall(leading=True, changes_pending=True)
    assert health.stall(leading=True, changes_pending=True) == ""  # a pass ended: pending counts anew
    assert health.completed == 1


def test_probes_answer_ok_or_503_with_the_failing_checks_and_serve_metrics() -> None:
    async def go() -> None:
        registry = CollectorRegistry()
        api = cluster()
        operator = await operator_on(api, registry)
        live, ready = operator_checks(operator)
        server = await start_probe_server(Probes(registry, live=[("operator", live)], ready=[("operator", ready)]),
                                          "127.0.0.1", 0)
        base = f"http://127.0.0.1:{server.port}"
        async with ClientSession() as http:
            async with http.get(f"{base}/readyz") as answer:
                assert answer.status == 503 and "first admission cycle" in await answer.text()
            await operator.reconcile()
            operator.health.completed += 1  # what the loop's running_pass does around reconcile
            async with http.get(f"{base}/readyz") as answer:
                assert answer.status == 200 and await answer.text() == "ok\n"
            async with http.get(f"{base}/healthz") as answer:
                assert answer.status == 200
            async with http.get(f"{base}/metrics") as answer:
                assert answer.status == 200 and "draq_cycle_duration_seconds_count 1.0" in await answer.text()
        await server.stop()
        await operator.cache.stop()

    asyncio.run(go())


def test_only_the_leader_describes_the_cluster() -> None:
    async def go() -> None:
        api = cluster(gpus=8)
        submit(api, "train", 1, 4)
        registry = CollectorRegistry()
        operator = await operator_on(api, registry)
        await operator.reconcile()
        leading = [True]
        operator.metrics.leading = lambda: leading[0]
        assert value(registry, "draq_cluster_queue_usage", cluster_queue="main", unit="gpus") == 4
        leading[0] = False
        assert value(registry, "draq_cluster_queue_usage", cluster_queue="main", unit="gpus") is None
        assert value(registry, "draq_cycle_duration_seconds_count") == 1  # what this replica did stays
        await operator.cache.stop()

    asyncio.run(go())


def test_the_gap_report_keeps_to_its_time_budget_on_the_injected_clock() -> None:
    clock = FakeClock()
    computed: list[float] = []

    def gaps(reading: Reading) -> GapFigures:
        computed.append(clock.monotonic())
        clock.advance(0.5)  # the report takes half a second
        return GapFigures({}, {})

    metrics = OperatorMetrics(CollectorRegistry(), lambda: True, gaps=gaps, gap_budget=0.1, clock=clock)
    reading = cast(Reading, None)
    metrics._update_gaps(reading)  # 0.5 s at a 10% budget: not again for 5 s after it finished
    clock.advance(4.9)
    metrics._update_gaps(reading)
    assert computed == [0.0]
    clock.advance(0.1)
    metrics._update_gaps(reading)
    assert computed == [0.0, 5.5]


def test_the_cluster_figures_keep_to_their_time_budget_on_the_injected_clock(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    computed: list[float] = []

    def figures(reading: Reading, result: CycleResult, kept: object = None) -> ClusterFigures:
        computed.append(clock.monotonic())
        clock.advance(0.2)  # thousands of groups: the figures take 0.2 s
        return ClusterFigures()

    monkeypatch.setattr(metrics_module, "cluster_figures", figures)
    metrics = OperatorMetrics(CollectorRegistry(), lambda: True, figures_budget=0.1, clock=clock)
    reading, result = cast(Reading, None), cast(CycleResult, None)
    metrics._update_figures(reading, result)  # 0.2 s at a 10% budget: not again for 2 s after it finished
    clock.advance(1.9)
    metrics._update_figures(reading, result)
    assert computed == [0.0]
    clock.advance(0.2)
    metrics._update_figures(reading, result)
    assert computed == [0.0, pytest.approx(2.3)]


def test_a_pass_with_a_change_waiting_leaves_the_figures_to_a_later_pass_for_at_most_the_deferral(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    computed: list[float] = []

    def gaps(reading: Reading) -> GapFigures:
        computed.append(clock.monotonic())
        return GapFigures({}, {})

    monkeypatch.setattr(metrics_module, "cluster_figures", lambda *args: ClusterFigures())
    metrics = OperatorMetrics(CollectorRegistry(), lambda: True, gaps=gaps, gap_budget=1.0, clock=clock)
    reading, result = cast(Reading, None), cast(CycleResult, SimpleNamespace(step_seconds={}, stats=CycleStats()))
    metrics.cycle(reading, result, 0.1, clock.now(), hurry=True)  # never updated yet: updated now
    clock.advance(1)
    metrics.cycle(reading, result, 0.1, clock.now(), hurry=True)  # a change waits: left to a later pass
    assert computed == [0.0]
    clock.advance(1)
    metrics.cycle(reading, result, 0.1, clock.now())  # nothing waits: updated
    clock.advance(metrics_module.DEFER_SECONDS)
    metrics.cycle(reading, result, 0.1, clock.now(), hurry=True)  # deferred as long as it may be: updated
    assert computed == [0.0, 2.0, 2.0 + metrics_module.DEFER_SECONDS]


def test_each_topology_domain_exports_its_free_devices_and_largest_gang() -> None:
    async def go() -> None:
        api = cluster(gpus=8)
        hosts = {"name": "host", "nodeLabel": "kubernetes.io/hostname"}
        api.add(draq_object("Topology", "layout", {"levels": [hosts]}))
        submit(api, "train", 1, 3)
        registry = CollectorRegistry()
        operator = await operator_on(api, registry)
        await operator.reconcile()
        labels = {"topology": "layout", "level": "host"}
        free = {n: value(registry, "draq_topology_domain_free_devices", domain=n, **labels)
                for n in ("node-0", "node-1")}
        # The admitted group's three promised GPUs are taken on one node: one GPU is left there, stranded.
        assert sorted(free.values()) == [1, 4]
        busy = min(free, key=lambda n: free[n] or 0)
        assert value(registry, "draq_topology_domain_largest_gang_pods", domain=busy, **labels) == 0
        assert value(registry, "draq_topology_domain_stranded_devices", domain=busy, **labels) == 1
        assert value(registry, "draq_topology_domain_devices", domain=busy, **labels) == 4
        assert value(registry, "draq_topology_level_pod_devices", **labels) == 4
        await operator.cache.stop()

    asyncio.run(go())


def test_kept_figures_and_gaps_are_reused_while_nothing_changes_and_equal_fresh_ones_after() -> None:
    async def go() -> None:
        api = cluster(gpus=8)
        submit(api, "train", 1, 2)
        operator = await operator_on(api, CollectorRegistry())
        await operator.reconcile()
        await asyncio.sleep(0.05)
        await operator.reconcile()  # sees what the first pass wrote
        kept_gaps, kept_figures = KeptGaps(), KeptFigures()
        reading = operator.reader.read()
        result = await operator._decide(reading.cycle)
        gaps, figures = kept_gaps(reading), cluster_figures(reading, result, kept_figures)
        again = operator.reader.read()  # nothing changed: the same objects
        assert kept_gaps(again) is gaps
        assert cluster_figures(again, await operator._decide(again.cycle), kept_figures).groups is figures.groups
        await bind_as_planned(api, "train-0", "train")
        await asyncio.sleep(0.05)
        changed = operator.reader.read()
        changed_result = await operator._decide(changed.cycle)
        assert kept_gaps(changed) == reading_gaps(changed)
        assert cluster_figures(changed, changed_result, kept_figures) == cluster_figures(changed, changed_result)
        await operator.cache.stop()

    asyncio.run(go())
