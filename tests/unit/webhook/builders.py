"""Test builders for AdmissionReviews and webhook pods, plus an in-memory Lookups.

Manifests come from tests.support.builders; `pod` here is a webhook test's usual pod (one busybox
container `c`, in namespace `team-a`).
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from admission.core.labels import DEFAULT_QUEUE_LABEL, MANAGED_LABEL
from admission.core.review.envelope import AdmissionRequest, GroupVersionKind, ReviewBuilder, parse_review
from tests.support import builders as manifests

POD = GroupVersionKind("", "v1", "Pod")
JOB = GroupVersionKind("batch", "v1", "Job")
LOCAL_QUEUE = GroupVersionKind("draq.io", "v1alpha1", "LocalQueue")
CLUSTER_QUEUE = GroupVersionKind("draq.io", "v1alpha1", "ClusterQueue")
CLAIM = GroupVersionKind("resource.k8s.io", "v1", "ResourceClaim")
CLAIM_TEMPLATE = GroupVersionKind("resource.k8s.io", "v1", "ResourceClaimTemplate")
RESOURCES = {"Pod": "pods", "Job": "jobs", "LocalQueue": "localqueues", "ClusterQueue": "clusterqueues",
             "ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates",
             "QuotaUnit": "quotaunits", "JobSet": "jobsets"}


@dataclass
class FakeLookups:
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    cluster_queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    units: dict[str, dict[str, Any]] = field(default_factory=dict)
    jobs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    device_classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    leases: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    owners: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # (kind, ns, name)
    pod_groups: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pending: dict[tuple[str, str], int] = field(default_factory=dict)
    topologies: dict[str, dict[str, Any]] = field(default_factory=dict)
    templates: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.namespaces.get(namespace)

    def local_queue(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.local_queues.get((namespace, name))

    def cluster_queue(self, name: str) -> Mapping[str, Any] | None:
        return self.cluster_queues.get(name)

    def quota_unit(self, name: str) -> Mapping[str, Any] | None:
        return self.units.get(name)

    def topology(self, name: str) -> Mapping[str, Any] | None:
        return self.topologies.get(name)

    def owner(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        if kind == "Job" and (namespace, name) in self.jobs:
            return self.jobs[(namespace, name)]
        return self.owners.get((kind, namespace, name))

    def quota_units(self) -> list[Mapping[str, Any]]:
        return list(self.units.values())

    def device_class(self, name: str) -> Mapping[str, Any] | None:
        return self.device_classes.get(name)

    def lease(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.leases.get((namespace, name))

    def pod_group(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.pod_groups.get((namespace, name))

    def pending_groups(self, namespace: str, local_queue: str) -> int:
        return self.pending.get((namespace, local_queue), 0)

    def claim_template(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.templates.get((namespace, name))

    def with_queue(self, namespace: str, name: str, cluster_queue: str = "cq") -> FakeLookups:
        self.local_queues[(namespace, name)] = manifests.local_queue(name, cluster_queue, namespace)
        self.cluster_queues.setdefault(cluster_queue, manifests.cluster_queue(cluster_queue))
        return self


def cluster(managed: dict[str, str] | None = None) -> FakeLookups:
    """`team-a` managed with LocalQueue `gpu`, `plain` unmanaged, `team-b` with a default queue."""
    lookups = FakeLookups(namespaces={
        "team-a": {MANAGED_LABEL: "true"},
        "team-b": {DEFAULT_QUEUE_LABEL: "batch"},
        "plain": {},
        **(managed or {}),
    })
    return lookups.with_queue("team-a", "gpu").with_queue("team-b", "batch")


def pod(name: str = "p", namespace: str = "team-a", labels: dict[str, str] | None = None,
        gates: list[str] | None = None, owner: dict[str, Any] | None = None,
        generate_name: str | None = None) -> dict[str, Any]:
    """`name=""` leaves the name out; `labels={}` and `gates=[]` are written as empty, None leaves them out."""
    return manifests.pod(name, namespace, labels=labels, gates=gates, owner=owner, generate_name=generate_name,
                         container="c", image="busybox")


def job_owner(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": str(uuid.uuid4()),
            "controller": True, "blockOwnerDeletion": True}


def review(kind: GroupVersionKind, obj: dict[str, Any] | None, operation: str = "CREATE",
           old: dict[str, Any] | None = None, username: str = "alice", namespace: str | None = None,
           uid: str | None = None) -> dict[str, Any]:
    ns = namespace if namespace is not None else (obj or old or {}).get("metadata", {}).get("namespace", "")
    builder = ReviewBuilder(kind, RESOURCES[kind.kind], operation, ns, username)
    return builder.build(uid or str(uuid.uuid4()), obj, old)


def request(kind: GroupVersionKind, obj: dict[str, Any] | None, **kwargs: Any) -> AdmissionRequest:
    return parse_review(review(kind, obj, **kwargs))


def decode_patch(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = response["response"].get("patch")
    return json.loads(base64.b64decode(raw)) if raw else []


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(document: Any, operations: list[dict[str, Any]]) -> Any:
    """A strict RFC 6902 `add`/`replace`/`remove` applier: fails where the API server would."""
    result = copy.deepcopy(document)
    for operation in operations:
        tokens = [_unescape(t) for t in operation["path"].split("/")[1:]]
        parent = result
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if operation["op"] == "add":
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if index > len(parent):
                    raise IndexError(operation["path"])
                parent.insert(index, operation["value"])
            elif isinstance(parent, dict):
                parent[last] = operation["value"]
            else:
                raise TypeError(f"cannot add into {type(parent).__name__} at {operation['path']}")
        elif operation["op"] == "replace":
            if isinstance(parent, list):
                parent[int(last)] = operation["value"]
            else:
                if last not in parent:
                    raise KeyError(operation["path"])
                parent[last] = operation["value"]
        elif operation["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        else:
            raise ValueError(operation["op"])
    return result
