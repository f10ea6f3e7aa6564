"""Native gang scheduling (Kubernetes 1.35 alpha: `scheduling.k8s.io/v1alpha1` Workload, `spec.workloadRef`
on pods, gates GenericWorkload and GangScheduling).

Where the cluster serves the Workload API, draq can also make each of its groups a native gang: the
mutating webhook sets `spec.workloadRef` at pod creation (the field is immutable afterwards), and the
operator creates the group's Workload with a gang policy of `minMember` pods before it releases the
members. Then even if draq's snapshot was stale, the scheduler binds all members or none; a group
that cannot bind is evicted and requeued by draq's bind timeout.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

WORKLOAD_API_VERSION = "scheduling.k8s.io/v1alpha1"
POD_GROUP = "members"
_MAX_NAME = 253
_INVALID = re.compile(r"[^a-z0-9.-]")


def workload_name(group: str) -> str:
    """A DNS-subdomain name for a group's Workload: the group name when it is one, else a cleaned name
    with a hash suffix (group names are label values, which may hold upper case and `_`)."""
    if re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", group) and len(group) <= _MAX_NAME:
        return group
    digest = hashlib.sha256(group.encode()).hexdigest()[:10]
    cleaned = _INVALID.sub("-", group.lower()).strip("-.")[:40]
    return f"{cleaned}-{digest}" if cleaned else f"group-{digest}"


def workload_ref(group: str) -> dict[str, str]:
    return {"name": workload_name(group), "podGroup": POD_GROUP}


def workload(namespace: str, group: str, min_member: int) -> dict[str, Any]:
    """The Workload of a group: one pod group, scheduled all or nothing with `min_member` pods."""
    return {"apiVersion": WORKLOAD_API_VERSION, "kind": "Workload",
            "metadata": {"name": workload_name(group), "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "draq"}},
            "spec": {"podGroups": [{"name": POD_GROUP, "policy": {"gang": {"minCount": min_member}}}]}}


def referenced_workload(pod: dict[str, Any] | Any) -> str | None:
    """The Workload a pod manifest names in `spec.workloadRef`, if any."""
    spec = pod.get("spec") if isinstance(pod, dict) else None
    ref = spec.get("workloadRef") if isinstance(spec, dict) else None
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) and name else None
