"""What the API server serves: asked once at start, for features that depend on the cluster."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from admission.core.native_gangs import GANG_APIS, GangApi, chosen
from admission.kube import kinds
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


async def served(api: Client, resources: Iterable[Resource]) -> tuple[Resource, ...]:
    """The resources the API server serves, in order (a CRD not installed is left out, and logged)."""
    found = []
    for resource in resources:
        if await serves(api, resource):
            found.append(resource)
        else:
            log.info("%s (%s) is not served: draq does not watch it", resource.plural, resource.api_version)
    return tuple(found)


async def served_gang_api(api: Client) -> GangApi | None:
    """The newest gang API the API server serves (`native_gangs.GANG_APIS`), or None."""
    return chosen([gang for gang in GANG_APIS if await serves(api, kinds.gang_resource(gang))])
