"""What the API server serves: asked once at start, for features that depend on the cluster."""

from __future__ import annotations

import logging

from admission.kube.client import Client, KubeApiError
from admission.kube.paths import Resource

log = logging.getLogger(__name__)


async def serves(api: Client, resource: Resource) -> bool:
    """Whether the API server serves `resource` (its group/version is enabled and lists it)."""
    prefix = resource.list_path().rsplit("/", 1)[0]
    try:
        listing = await api.get(prefix)
    except KubeApiError as err:
        if err.status in (403, 404):
            return False
        raise
    return any(isinstance(r, dict) and r.get("name") == resource.plural for r in listing.get("resources") or [])
