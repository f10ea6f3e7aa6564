"""What `draq run` can tell the operator."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class OperatorSettings:
    kubeconfig: Path | None = None
    context: str | None = None
    # Kubernetes release whose DRA behaviour the allocator follows (default gates of that release).
    kubernetes_version: str | None = None
    # Quiet time after a change before a cycle runs, so a burst of pod creations is decided at once.
    debounce_seconds: float = 0.15
    # A cycle also runs this often without changes (e.g. to re-evaluate after a failed write).
    resync_seconds: float = 30.0
    # Leader election: only the holder of this Lease runs cycles.
    leader_election: bool = True
    lease_namespace: str = "draq-system"
    lease_name: str = "draq-operator"
    lease_seconds: float = 15.0
    identity: str = ""  # default: hostname and process id
    # An admitted group not all bound within this many seconds is evicted and requeued (a ClusterQueue's
    # spec.bindTimeoutSeconds overrides it).
    bind_timeout_seconds: int = 300
