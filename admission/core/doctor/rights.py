"""The requests draq's operator cannot work without, asked of the API server for its ServiceAccount.

A subset of the chart's rule files (`charts/draq/files/rbac/`): reading what it decides on, and the
writes of an admission (a unit test keeps every entry granted by those files).
"""

from __future__ import annotations

from admission.core.doctor.facts import Right
from admission.core.labels import API_GROUP
from admission.core.leadership import DEFAULT_LEASE_NAME

_READ = ("list", "watch")

REQUIRED_RIGHTS: tuple[Right, ...] = (
    *(Right(verb, "", "pods") for verb in ("get", *_READ, "patch", "delete")),
    *(Right(verb, "", resource) for resource in ("nodes", "namespaces") for verb in _READ),
    Right("create", "", "events"),
    *(Right(verb, "resource.k8s.io", resource) for resource in ("deviceclasses", "resourceslices", "resourceclaims",
                                                                "resourceclaimtemplates") for verb in _READ),
    *(Right(verb, API_GROUP, resource) for resource in ("clusterqueues", "localqueues", "quotaunits", "podgroups")
      for verb in _READ),
    Right("create", API_GROUP, "podgroups"),
    *(Right("patch", API_GROUP, resource, "status") for resource in ("podgroups", "clusterqueues", "quotaunits")),
    Right("get", "batch", "jobs"),
    Right("update", "coordination.k8s.io", "leases", in_draq_namespace=True, name=DEFAULT_LEASE_NAME),
)
