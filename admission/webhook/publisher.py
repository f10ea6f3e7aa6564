"""Keeps draq's webhook configurations in the cluster equal to what the code generates."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from admission.kube.client import Client, KubeApiError
from admission.webhook.configurations import collection_path, object_path

log = logging.getLogger(__name__)

Build = Callable[[bytes], list[dict[str, Any]]]


class ConfigurationPublisher:
    """Creates or replaces the configurations; `apply(bundle)` is cheap when nothing changed."""

    def __init__(self, api: Client, build: Build) -> None:
        self._api = api
        self._build = build
        self._applied: list[dict[str, Any]] | None = None

    async def apply(self, ca_bundle: bytes) -> bool:
        """Make the cluster's configurations match; True if anything was written."""
        wanted = self._build(ca_bundle)
        if wanted == self._applied:
            return False
        for configuration in wanted:
            await self._apply_one(configuration)
        self._applied = wanted
        return True

    def forget(self) -> None:
        """Write on the next `apply` even if unchanged here (someone may have edited the cluster's copy)."""
        self._applied = None

    async def delete(self) -> None:
        for configuration in self._build(b""):
            try:
                await self._api.delete(object_path(configuration))
            except KubeApiError as err:
                if err.status != 404:
                    raise
        self._applied = None

    async def _apply_one(self, configuration: dict[str, Any]) -> None:
        path = object_path(configuration)
        name = configuration["metadata"]["name"]
        try:
            current = await self._api.get(path)
        except KubeApiError as err:
            if err.status != 404:
                raise
            await self._api.create(collection_path(configuration), configuration)
            log.info("created %s %s", configuration["kind"], name)
            return
        if _contains(current.get("webhooks"), configuration["webhooks"]):
            return
        version = current.get("metadata", {}).get("resourceVersion", "")
        replacement = {**configuration, "metadata": {**configuration["metadata"], "resourceVersion": version}}
        await self._api.replace(path, replacement)
        log.info("updated %s %s", configuration["kind"], name)


def _contains(actual: Any, wanted: Any) -> bool:
    """Whether `actual` has everything `wanted` has (the API server adds defaulted fields)."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(_contains(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return (isinstance(actual, list) and len(actual) == len(wanted)
                and all(_contains(a, w) for a, w in zip(actual, wanted, strict=True)))
    return bool(actual == wanted)
