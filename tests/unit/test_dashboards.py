"""The Grafana dashboards: the committed JSON is what dashboards/build.py writes, every query is valid
PromQL (promtool) and names only metrics draq exports (or DCGM's, Prometheus' own and process metrics)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from admission.core.telemetry import GapFigures
from admission.operator.metrics import OperatorMetrics
from admission.webhook.metrics import WebhookMetrics
from tests.support.dashboards import DASHBOARDS, load_builder
from tests.support.environment import in_ci

OTHER_METRICS = {"up", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE",
                 "process_resident_memory_bytes", "process_cpu_seconds_total"}


BUILD = load_builder()


def committed() -> dict[str, dict[str, Any]]:
    return {name: json.loads((DASHBOARDS / name).read_text()) for name in BUILD.DASHBOARDS}


def all_queries() -> list[tuple[str, str, str]]:
    return [(name, title, expr) for name, document in committed().items()
            for title, expr in BUILD.panel_queries(document)]


def test_the_committed_dashboards_are_what_the_script_builds() -> None:
    generated = BUILD.generated()
    assert sorted(generated) == sorted(p.name for p in DASHBOARDS.glob("*.json"))
    for name, text in generated.items():
        assert (DASHBOARDS / name).read_text() == text, f"{name} is stale: run python dashboards/build.py"


def test_each_dashboard_has_its_own_uid_unique_panel_ids_and_the_datasource_variable() -> None:
    documents = committed()
    assert len({d["uid"] for d in documents.values()}) == len(documents)
    for name, document in documents.items():
        ids = [p["id"] for p in document["panels"]]
        assert len(ids) == len(set(ids)), name
        assert document["templating"]["list"][0]["type"] == "datasource"
        for panel in document["panels"]:
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], (name, panel["title"])


def exported_names() -> set[str]:
    registry = CollectorRegistry()
    operator = OperatorMetrics(registry, lambda: True)
    operator.gap_figures = GapFigures({}, {})
    WebhookMetrics(registry)
    names = set()
    for family in registry.collect():
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(family.type, ("",))
        names.update(family.name + suffix for suffix in suffixes)
    return names


def test_queries_name_only_metrics_that_exist() -> None:
    known = exported_names() | OTHER_METRICS
    for name, title, expr in all_queries():
        used = set(re.findall(r"\b(draq_[a-z_]+|DCGM_[A-Z_]+|process_[a-z_]+|up(?=\{))", expr))
        assert used, f"{name}, panel {title!r}: no metric"
        unknown = {m for m in used if m not in known}
        assert not unknown, f"{name}, panel {title!r}: {sorted(unknown)}"


@pytest.fixture(scope="module")
def promtool() -> str:
    """promtool, or a skip where it is not installed; under CI (which installs it, `make test` running
    scripts/install-deps.sh) a missing promtool fails the test instead of hiding it."""
    found = shutil.which("promtool")
    if found is None:
        missing = "promtool is not installed (scripts/install-deps.sh installs Debian's prometheus package)"
        if in_ci():
            pytest.fail(f"{missing}; CI must check the dashboards' queries")
        pytest.skip(missing)
    return found


def check_rules(promtool: str, tmp_path: Path, exprs: list[str]) -> subprocess.CompletedProcess[str]:
    rules = [{"record": f"draq_dashboard_check:query_{i}", "expr": expr} for i, expr in enumerate(exprs)]
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    return subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)


def test_every_panel_query_is_valid_promql(promtool: str, tmp_path: Path) -> None:
    queries = all_queries()
    result = check_rules(promtool, tmp_path, [BUILD.concrete(expr) for _, _, expr in queries])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(queries)} rules found" in result.stdout
    broken = check_rules(promtool, tmp_path, ['sum by (cluster_queue (draq_cluster_queue_usage)'])
    assert broken.returncode != 0  # the check does look at the queries


AMOUNTS = re.compile(r"draq_(cluster_queue_(usage|reserved|nominal_quota|borrowed|borrowing_limit|lending_limit)|"
                     r"local_queue_(usage|reserved))\b")


def test_amounts_in_units_are_drawn_one_unit_per_panel() -> None:
    """GPU counts and bytes never share an axis: a graph of raw amounts is repeated per $unit and reads only
    that unit; shares of the quota (percentunit) may show every unit together."""
    checked = 0
    for name, document in committed().items():
        for panel in document["panels"]:
            exprs = [t["expr"] for t in panel.get("targets") or []]
            if panel["type"] != "timeseries" or not any(AMOUNTS.search(e) for e in exprs):
                continue
            if panel["fieldConfig"]["defaults"].get("unit") == "percentunit":
                continue
            checked += 1
            assert panel.get("repeat") == "unit" and "$unit" in panel["title"], (name, panel["title"])
            assert all('unit=~"$unit"' in e for e in exprs if AMOUNTS.search(e)), (name, panel["title"])
    assert checked >= 4


def test_the_queues_dashboard_can_be_narrowed_by_every_scope() -> None:
    document = committed()["draq-queues.json"]
    names = [v["name"] for v in document["templating"]["list"]]
    assert names == ["datasource", "cohort", "cluster_queue", "unit", "namespace", "local_queue"]
    by_name = {v["name"]: v for v in document["templating"]["list"]}
    assert '{cohort=~"$cohort"}' in by_name["cluster_queue"]["query"]
    assert 'namespace=~"$namespace"' in by_name["local_queue"]["query"]
    scoped = [e for _, e in BUILD.panel_queries(document) if "draq_local_queue_usage" in e]
    assert scoped and all('namespace=~"$namespace", local_queue=~"$local_queue"' in e for e in scoped)
