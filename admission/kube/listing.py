"""One-shot reads of the whole cluster (for reports such as `draq gaps`): every object of a resource,
page by page, typed; and the server's release."""

from __future__ import annotations

import re
from typing import Any

from admission.kube.client import Client, KubeApiError
from admission.kube.paths import Resource
from admission.kube.reflector import typed

PAGE = 500
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)")


async def list_objects(api: Client, resource: Resource, page: int = PAGE) -> list[dict[str, Any]] | None:
    """Every object of `resource` across namespaces, with apiVersion and kind set; None when the API
    server does not serve the resource (HTTP 404, e.g. a CRD that is not installed)."""
    objects: list[dict[str, Any]] = []
    params = {"limit": str(page)}
    while True:
        try:
            listing = await api.get(resource.list_path(), params)
        except KubeApiError as err:
            if err.status == 404:
                return None
            raise
        objects += [dict(typed(resource, item)) for item in listing.get("items") or [] if isinstance(item, dict)]
        token = (listing.get("metadata") or {}).get("continue")
        if not token:
            return objects
        params = {"limit": str(page), "continue": str(token)}


async def server_release(api: Client) -> str | None:
    """`1.35` for a v1.35.x API server; None when /version does not say."""
    try:
        version = await api.get("/version")
    except KubeApiError:
        return None
    found = _RELEASE.match(str(version.get("gitVersion") or ""))
    return f"{found.group(1)}.{found.group(2)}" if found else None
