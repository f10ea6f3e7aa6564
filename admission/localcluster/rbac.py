"""draq's RBAC as the Helm chart grants it, for `draq demo` and the tests: built from the chart's own rule
files (`charts/draq/files/rbac/`), the one source both use, so the demo runs with exactly the chart's rights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from admission.core.workloads import DEFAULT_FRAMEWORKS

REPO = Path(__file__).resolve().parents[2]
RULES_DIR = REPO / "charts" / "draq" / "files" / "rbac"
RBAC_API = "rbac.authorization.k8s.io/v1"


class MissingChart(RuntimeError):
    """The chart's rule files are not there (draq installed from a wheel, not run from a clone)."""


@dataclass(frozen=True, slots=True)
class Rights:
    """Which optional parts of draq's rights to grant (the chart's values that choose them)."""

    native_gangs: bool = True  # operator.nativeGangs != off
    webhook_configurations: bool = True  # webhook.configurations == draq
    leader_election: bool = True  # leaderElection.enabled
    draq_ca: bool = True  # certificates.mode == draq
    frameworks: tuple[str, ...] = DEFAULT_FRAMEWORKS  # integrations.frameworks

    def cluster_files(self) -> list[str]:
        return ["cluster.yaml", *(["native-gangs.yaml"] if self.native_gangs else []),
                *(["webhook-configurations.yaml"] if self.webhook_configurations else []),
                *(integration_file(name) for name in self.frameworks)]

    def namespace_files(self) -> list[str]:
        return ["seal-key.yaml", *(["leader-election.yaml"] if self.leader_election else []),
                *(["ca-secret.yaml"] if self.draq_ca else [])]


def integration_file(framework: str) -> str:
    """The rule file of one integration (`integrations.frameworks`), as the chart names it."""
    return f"integrations/{framework.replace('/', '_')}.yaml"


def rules(*files: str, rules_dir: Path = RULES_DIR) -> list[dict[str, Any]]:
    """The rules of the given rule files, in order."""
    found: list[dict[str, Any]] = []
    for name in files:
        path = rules_dir / name
        try:
            loaded = yaml.safe_load(path.read_text())
        except FileNotFoundError:
            raise MissingChart(f"{path} is missing: run from a clone of the repository") from None
        if not isinstance(loaded, list) or not all(isinstance(rule, dict) for rule in loaded):
            raise ValueError(f"{path}: expected a list of RBAC rules")
        found += loaded
    return found


def manifests(namespace: str, service_account: str = "draq", name: str = "draq",
              rights: Rights | None = None) -> list[dict[str, Any]]:
    """The ServiceAccount, ClusterRole(+Binding) and Role(+Binding) the chart renders for these rights."""
    rights = rights or Rights()
    labels = {"app.kubernetes.io/name": "draq"}
    subject = [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]
    found: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": service_account, "namespace": namespace, "labels": labels}},
        {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": {"name": name, "labels": labels},
         "rules": rules(*rights.cluster_files())},
        {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": {"name": name, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": subject},
    ]
    namespaced = rules(*rights.namespace_files())
    if namespaced:
        found += [
            {"apiVersion": RBAC_API, "kind": "Role", "metadata": {"name": name, "namespace": namespace,
                                                                  "labels": labels},
             "rules": namespaced},
            {"apiVersion": RBAC_API, "kind": "RoleBinding", "metadata": {"name": name, "namespace": namespace,
                                                                         "labels": labels},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
             "subjects": subject},
        ]
    return found
