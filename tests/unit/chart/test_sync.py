"""The chart's derived files equal their sources (scripts/chart.py): the CRDs, the dashboards, the webhook
configurations generated from the code, and the values table in the chart's README."""

from __future__ import annotations

import yaml

from admission.webhook.configurations import WebhookTarget, configurations
from tests.unit.chart.support import CHART, REPO, chart_script


def test_nothing_derived_has_drifted_from_its_source() -> None:
    problems = chart_script().problems()
    assert problems == [], "\n".join(problems) + "\nrun: .venv/bin/python scripts/chart.py sync"


def test_the_chart_carries_exactly_the_repository_crds() -> None:
    repo = {p.name: p.read_bytes() for p in (REPO / "crds").glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert sorted(repo) == sorted(chart) and len(repo) == 5
    assert repo == chart


def test_the_chart_carries_exactly_the_repository_dashboards() -> None:
    repo = {p.name: p.read_bytes() for p in (REPO / "dashboards").glob("*.json")}
    chart = {p.name: p.read_bytes() for p in (CHART / "dashboards").glob("*.json")}
    assert repo == chart


def test_the_webhook_template_has_every_webhook_of_the_code_with_its_policies() -> None:
    template = (CHART / "templates" / "webhook-configurations.yaml").read_text()
    code = configurations(WebhookTarget(service_namespace="ns", service_name="svc"), b"", "ns")
    for configuration in code:
        assert f"kind: {configuration['kind']}\n" in template
        for webhook in configuration["webhooks"]:
            at = template.index(f"- name: {webhook['name']}\n")
            following = template[at:].split("\n- name: ")[0] + "\n"
            assert f"failurePolicy: {webhook['failurePolicy']}\n" in following, webhook["name"]
            assert f"timeoutSeconds: {webhook['timeoutSeconds']}\n" in following, webhook["name"]


def test_a_changed_values_comment_changes_the_table() -> None:
    script = chart_script()
    text = (CHART / "values.yaml").read_text()
    table = script.values_table(text)
    assert "| `replicaCount` | int | `2` |" in table
    changed = text.replace("# -- Replicas.", "# -- How many replicas.")
    assert script.values_table(changed) != table and "How many replicas." in script.values_table(changed)


def test_undocumented_values_are_reported() -> None:
    values, undocumented = chart_script().documented_values("a:\n  # -- documented\n  b: 1\n  c: 2\n")
    assert [(v.key, v.default, v.description) for v in values] == [("a.b", 1, "documented")]
    assert undocumented == ["a.c"]


def test_a_documented_map_is_one_row_with_its_whole_default() -> None:
    values, undocumented = chart_script().documented_values(
        "# -- limits\nresources:\n  limits:\n    cpu: 1\n")
    assert [(v.key, v.type, v.default) for v in values] == [("resources", "object", {"limits": {"cpu": 1}})]
    assert undocumented == []


def test_the_readme_table_lists_every_documented_value() -> None:
    readme = (CHART / "README.md").read_text()
    values, _ = chart_script().documented_values((CHART / "values.yaml").read_text())
    assert len(values) > 40
    for value in values:
        assert f"| `{value.key}` |" in readme
    assert yaml.safe_load((CHART / "Chart.yaml").read_text())["name"] == "draq"
