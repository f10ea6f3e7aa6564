"""The chart's integrations: values choose them, and the RBAC grants each only the rights its kinds need."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from admission.core.workloads import DEFAULT_FRAMEWORKS, FRAMEWORKS, enabled_kinds
from admission.localcluster.rbac import RULES_DIR, integration_file
from tests.unit.chart.support import CHART

HELM = shutil.which("helm") or next(iter(sorted(Path.home().glob(".cache/draq/helm/*/helm"))), None)


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for rule in rules for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def needed(framework: str) -> set[tuple[str, str, str]]:
    """Read every kind of the integration (and of those it requires); patch those with a suspend field."""
    rights = set()
    for kind in enabled_kinds([framework]):
        rights |= {(kind.api_group, kind.plural, verb) for verb in ("get", "list", "watch")}
        if kind.suspendable:
            rights.add((kind.api_group, kind.plural, "patch"))
    return rights


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_integration_grants_exactly_what_its_kinds_need(framework: str) -> None:
    rules = yaml.safe_load((RULES_DIR / integration_file(framework)).read_text())
    assert granted(rules) == needed(framework)


def test_the_values_schema_and_defaults_follow_the_kinds_table() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert schema["properties"]["integrations"]["properties"]["frameworks"]["items"]["enum"] == list(FRAMEWORKS)
    assert tuple(values["integrations"]["frameworks"]) == DEFAULT_FRAMEWORKS


def test_no_rule_file_is_left_without_an_integration() -> None:
    files = {p.name for p in (RULES_DIR / "integrations").glob("*.yaml")}
    assert files == {integration_file(f).removeprefix("integrations/") for f in FRAMEWORKS}


def render(*values: str) -> subprocess.CompletedProcess[str]:
    assert HELM is not None
    args = [str(HELM), "template", "draq", str(CHART), "--namespace", "draq-system"]
    for value in values:
        args += ["--set", value]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def cluster_role(rendered: str) -> list[dict[str, Any]]:
    [role] = [d for d in yaml.safe_load_all(rendered) if d and d.get("kind") == "ClusterRole"]
    return list(role["rules"])


@pytest.mark.skipif(HELM is None, reason="helm is not installed")
def test_the_rendered_role_has_the_chosen_integrations_rights_only() -> None:
    default = render()
    assert default.returncode == 0, default.stderr
    rights = granted(cluster_role(default.stdout))
    assert needed("batch/job") | needed("deployment") | needed("statefulset") <= rights
    assert not any(group == "ray.io" for group, _, _ in rights)
    assert "--integrations=batch/job,deployment,statefulset" in default.stdout
    ray = render("integrations.frameworks={ray.io/rayjob}")
    assert ray.returncode == 0, ray.stderr
    rights = granted(cluster_role(ray.stdout))
    assert needed("ray.io/rayjob") <= rights and ("batch", "jobs", "patch") not in rights


@pytest.mark.skipif(HELM is None, reason="helm is not installed")
def test_an_unknown_integration_fails_the_render() -> None:
    result = render("integrations.frameworks={batch/jobs}")
    assert result.returncode != 0 and "/integrations/frameworks" in result.stderr  # the schema names the value
