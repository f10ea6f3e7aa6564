"""values.yaml against values.schema.json: the defaults pass, and the mistakes the schema is there for fail."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
import yaml

from tests.unit.chart.support import CHART

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())


def with_values(**changes: Any) -> dict[str, Any]:
    """The defaults with dotted keys changed, e.g. with_values(**{"webhook.configurations": "chart"})."""
    values = copy.deepcopy(DEFAULTS)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target = values
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return values


def problems(values: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [error.message for error in validator.iter_errors(values)]


def test_the_schema_is_a_valid_schema_and_the_defaults_pass() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert problems(DEFAULTS) == []


def test_every_top_level_value_is_in_the_schema_and_nothing_else() -> None:
    assert set(DEFAULTS) == set(SCHEMA["properties"])
    assert SCHEMA["additionalProperties"] is False


def test_the_non_default_sets_of_the_chart_tests_pass() -> None:
    cert_manager = with_values(**{"certificates.mode": "cert-manager", "webhook.configurations": "chart",
                                  "replicaCount": 1, "leaderElection.enabled": False})
    assert problems(cert_manager) == []
    everything = with_values(**{"metrics.serviceMonitor.enabled": True, "dashboards.enabled": True,
                                "networkPolicy.enabled": True, "networkPolicy.apiServerCIDRs": ["10.0.0.1/32"],
                                "queues.create": True, "operator.nativeGangs": "off"})
    assert problems(everything) == []


@pytest.mark.parametrize(("changes", "complaint"), [
    ({"replicaCount": 0}, "less than the minimum"),
    ({"webhook.configurations": "helm"}, "is not one of"),
    ({"certificates.mode": "vault"}, "is not one of"),
    ({"operator.nativeGangs": "yes"}, "is not one of"),
    ({"operator.bindTimeoutSeconds": 5}, "less than the minimum"),
    ({"image.digest": "latest"}, "does not match"),
    ({"networkPolicy.apiServerCIDRs": ["10.0.0.1"]}, "does not match"),
    ({"metrics.serviceMonitor.interval": "soon"}, "does not match"),
    ({"replicas": 3}, "Additional properties are not allowed"),
    ({"webhook.configurations": "chart"}, "'cert-manager' was expected"),
    ({"admissionPolicies.validationActions": ["Deny", "Warn"]}, "should not be valid under"),
    ({"admissionPolicies.validationActions": ["Block"]}, "is not one of"),
    ({"admissionPolicies.validationActions": []}, "should be non-empty"),
])
def test_mistakes_are_refused(changes: dict[str, Any], complaint: str) -> None:
    found = problems(with_values(**changes))
    assert any(complaint in p for p in found), found
