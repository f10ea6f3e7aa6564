"""What the chart's unit tests share: the chart's paths, `scripts/chart.py` loaded as a module, and a
small RBAC evaluator (which rule grants a request)."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "draq"


@cache
def chart_script() -> ModuleType:
    """scripts/chart.py (not a package: loaded from its path)."""
    spec = importlib.util.spec_from_file_location("draq_chart_script", REPO / "scripts" / "chart.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Request:
    """One API request as RBAC sees it."""

    verb: str
    group: str
    resource: str  # with "/subresource" when there is one
    namespace: str
    name: str

    def describe(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource}{named}{where}"


def request_of(method: str, path: str) -> Request | None:
    """The RBAC request of an API call (None for discovery paths, which every authenticated user may read)."""
    parts = path.split("?")[0].strip("/").split("/")
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    if not rest:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource += "/" + rest[2]
    verb = {"GET": "get" if name else "list", "WATCH": "watch", "POST": "create", "PATCH": "patch",
            "PUT": "update", "DELETE": "delete"}[method]
    return Request(verb, group, resource, namespace, name)


def grants(rule: dict[str, Any], request: Request) -> bool:
    names = rule.get("resourceNames") or []
    return (request.group in rule.get("apiGroups", []) and request.resource in rule.get("resources", [])
            and request.verb in rule.get("verbs", []) and (not names or request.name in names))


def allowed(request: Request, cluster_rules: list[dict[str, Any]], namespace_rules: list[dict[str, Any]],
            namespace: str) -> bool:
    """Whether a ClusterRole with `cluster_rules` and a Role in `namespace` with `namespace_rules` grant it."""
    if any(grants(rule, request) for rule in cluster_rules):
        return True
    return request.namespace == namespace and any(grants(rule, request) for rule in namespace_rules)
