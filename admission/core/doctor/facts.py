"""What `draq doctor` reads from a cluster, as plain data: the shell fills it in, the checks decide."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

JsonObject = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Right:
    """One request draq's operator makes: `verb` on `group`/`resource`[/`subresource`], cluster-wide or in
    draq's namespace (`in_draq_namespace`), optionally on one object `name`."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    in_draq_namespace: bool = False
    name: str = ""

    def describe(self) -> str:
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        qualified = f"{what}.{self.group}" if self.group else what
        return f"{self.verb} {qualified}" + (f" {self.name}" if self.name else "")


@dataclass(frozen=True, slots=True)
class ServiceHealth:
    """A Service a webhook points at: whether it exists and how many ready endpoints back it."""

    exists: bool
    ready_endpoints: int = 0


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """Everything the checks look at. `None` means "could not be read" where a check must tell that apart
    from "absent" (a missing Lease is None too: the shell reads a 404 as absent)."""

    draq_namespace: str
    service_account: str
    now: float  # seconds since the epoch, the API server's clock where known
    server_version: str | None
    served: frozenset[str]  # "group/version/resource" ("v1/pods" for the core group)
    crds: Mapping[str, JsonObject]  # draq.io CRDs by name
    webhook_configurations: Mapping[str, JsonObject | None]  # "Kind/name" -> the object, None when absent
    services: Mapping[tuple[str, str], ServiceHealth]  # (namespace, name) of every Service a webhook names
    urls_reachable: Mapping[str, bool]  # every webhook URL -> whether a TCP connection was accepted
    namespaces: Sequence[JsonObject]
    local_queues: Sequence[JsonObject]
    cluster_queues: Sequence[JsonObject]
    quota_units: Sequence[JsonObject]
    missing_rights: Sequence[Right] | None  # None: the caller may not ask (SubjectAccessReview refused)
    lease: JsonObject | None
    last_cycle: float | None  # draq_cycle_last_completed_timestamp_seconds; None when unknown
    metrics_source: str = ""  # where last_cycle was read ("" when no metrics endpoint was reached)
    notes: Sequence[str] = field(default_factory=tuple)  # what the shell could not look at, and why


LAST_CYCLE_METRIC = "draq_cycle_last_completed_timestamp_seconds"


def last_cycle_from_metrics(text: str) -> float | None:
    """When the last admission cycle ended, from a /metrics page; None before the first (the gauge is 0)."""
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == LAST_CYCLE_METRIC:
            try:
                when = float(value.strip())
            except ValueError:
                return None
            return when if when > 0 else None
    return None
