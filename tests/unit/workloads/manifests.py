"""Workload objects and their pods with owner references as their controllers write them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NS = "team-a"
GPU_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "train"}},
    "spec": {"containers": [{"name": "main", "image": "trainer:1",
                             "resources": {"requests": {"cpu": "2"}}}],
             "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]},
}


def owner_ref(api_version: str, kind: str, name: str, uid: str = "") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid or f"uid-{name}",
            "controller": True, "blockOwnerDeletion": True}


def obj(api_version: str, kind: str, name: str, spec: Mapping[str, Any] | None = None,
        owner: dict[str, Any] | None = None, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}", "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": dict(spec or {})}


def pod(name: str, owner: dict[str, Any] | None = None, labels: Mapping[str, str] | None = None,
        spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return obj("v1", "Pod", name, {**GPU_TEMPLATE["spec"], **(spec or {})}, owner, labels)


def job_spec(parallelism: int = 1, completions: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"parallelism": parallelism, "template": GPU_TEMPLATE}
    if completions is not None:
        spec["completions"] = completions
    return spec


class Store:
    """Owner objects by (kind, name), as a cache would serve them."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects}
        self.reads: list[tuple[str, str]] = []

    def owner(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.reads.append((kind, name))
        return self.objects.get((kind, namespace, name))
