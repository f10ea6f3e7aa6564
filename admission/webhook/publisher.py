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

    def __init__(self, api: Client, build: Build, create: bool = True) -> None:
        self._api = api
        self._build = build
        # False: only fill configurations someone else created (the Helm chart creates them empty, so
        # that `helm uninstall` removes them); a missing one is reported, never created.
        self._create = create
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
            if not self._create:
                raise MissingConfiguration(
                    f"{configuration['kind']} {name} does not exist and --adopt-webhook-configurations says its "
                    "owner (the Helm chart) creates it: helm upgrade the release to restore it") from None
            await self._api.create(collection_path(configuration), configuration)
            log.info("created %s %s", configuration["kind"], name)
            return
        if _contains(current.get("webhooks"), configuration["webhooks"]):
            return
        replacement = {**configuration, "metadata": _kept_metadata(current.get("metadata"), configuration["metadata"])}
        await self._api.replace(path, replacement)
        log.info("updated %s %s", configuration["kind"], name)


class MissingConfiguration(Exception):
    """A configuration draq fills but does not create is absent."""


def _kept_metadata(current: Any, wanted: dict[str, Any]) -> dict[str, Any]:
    """draq's labels and annotations over the current ones (an owner's, such as Helm's, stay)."""
    current = current if isinstance(current, dict) else {}
    merged = {**wanted, "resourceVersion": current.get("resourceVersion", "")}
    for key in ("labels", "annotations"):
        both = {**(current.get(key) or {}), **(wanted.get(key) or {})}
        if both:
            merged[key] = both
    return merged


def _contains(actual: Any, wanted: Any) -> bool:
    """Whether `actual` has everything `wanted` has (the API server adds defaulted fields)."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(_contains(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return (isinstance(actual, list) and len(actual) == len(wanted)
                and all(_contains(a, w) for a, w in zip(actual, wanted, strict=True)))
    return bool(actual == wanted)
