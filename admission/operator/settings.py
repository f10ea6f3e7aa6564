"""What `draq run` can tell the operator. Each default is written here once; `draq run`'s options take theirs
from `DEFAULTS`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from admission.core.leadership import DEFAULT_LEASE_NAME, ElectionTiming
from admission.core.workloads import DEFAULT_FRAMEWORKS


@dataclass(frozen=True, slots=True)
class OperatorSettings:
    kubeconfig: Path | None = None
    context: str | None = None
    # Kubernetes release whose DRA behaviour the allocator follows (default gates of that release).
    kubernetes_version: str | None = None
    # DRA feature gates overriding that release's defaults (`draq run --feature-gates`), e.g. a beta gate the
    # cluster switched on.
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    # `draq run --native-gangs`: with `off` the operator neither watches nor creates scheduling.k8s.io objects
    # (the chart then grants no right to them).
    native_gangs: str = "auto"
    # The longest quiet time after a change before a cycle runs while passes follow each other (as long as
    # the last pass took, up to this), so a burst of pod creations is decided at once (an idle operator waits
    # only `loop.IDLE_SETTLE_SECONDS`).
    debounce_seconds: float = 0.15
    # A cycle also runs this often without changes (e.g. to re-evaluate after a failed write).
    resync_seconds: float = 30.0
    # A group parked after an evaluation (`core.cycle.parking`) is evaluated again at least this often, even
    # when no change that could alter its answer was seen (a safety net for a missed change).
    park_safety_seconds: float = 60.0
    # Leader election: only the holder of this Lease runs cycles (admission.core.leadership.ElectionTiming).
    leader_election: bool = True
    lease_namespace: str = "draq-system"
    lease_name: str = DEFAULT_LEASE_NAME
    lease_seconds: float = 15.0
    renew_deadline_seconds: float | None = None  # default: two thirds of the lease
    retry_period_seconds: float | None = None  # default: 2/15 of the lease
    # The PodGroup record seal's key: a Secret of this name in lease_namespace (draq's namespace).
    seal_secret: str = "draq-seal-key"
    identity: str = ""  # default: POD_NAME, else the host name (stable across restarts)
    # An admitted group not all bound within this many seconds is evicted and requeued (a ClusterQueue's
    # spec.bindTimeoutSeconds overrides it).
    bind_timeout_seconds: int = 300
    # The workload integrations whose top-level objects are read (`core.workloads.FRAMEWORKS`).
    frameworks: tuple[str, ...] = DEFAULT_FRAMEWORKS

    def election_timing(self) -> ElectionTiming:
        return ElectionTiming.for_lease(self.lease_seconds, self.renew_deadline_seconds, self.retry_period_seconds)


DEFAULTS = OperatorSettings()
