"""A pod's effective resource requests, as the scheduler and ResourceQuota count them: `nodefit.pod_requests`
(sidecars, init containers, pod-level resources, overhead; requests defaulted from limits)."""

from admission.core.nodefit.requests import pod_requests

__all__ = ["pod_requests"]
