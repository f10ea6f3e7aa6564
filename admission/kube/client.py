"""draq's one Kubernetes API client: asynchronous, JSON in, JSON out, over aiohttp.

Credentials come from the `kubernetes` package's kubeconfig / in-cluster loaders (which handle
client certificates, tokens and exec plugins); requests go through one aiohttp session, and
responses stay plain dicts (no model objects: decoding those is the expensive part).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import os
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from admission.core.errors import DraqError


class KubeApiError(DraqError):
    """The API answered with an error status; `status` is the HTTP status code."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        self.status = status
        super().__init__(f"{method} {path}: HTTP {status}: {message}")


@dataclass(frozen=True, slots=True)
class Credentials:
    host: str
    ssl_context: ssl.SSLContext
    configuration: Any  # kubernetes.client.Configuration: asked for a fresh token per request

    def headers(self) -> dict[str, str]:
        """Header credentials (bearer tokens, refreshed by exec plugins), as the kubernetes client sends them."""
        settings = self.configuration.auth_settings()
        return {str(s["key"]).title(): str(s["value"]) for s in settings.values()
                if s.get("in") == "header" and s.get("value")}


def load_credentials(kubeconfig: Path | None = None, context: str | None = None) -> Credentials:
    """From a kubeconfig file (or `$KUBECONFIG`, `~/.kube/config`), else the in-cluster account."""
    configuration = k8s_client.Configuration()
    try:
        if kubeconfig is None and _in_cluster():
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig) if kubeconfig else None,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
    except (k8s_config.ConfigException, OSError) as err:
        raise DraqError(f"kubeconfig {kubeconfig or '(default)'}: {err}") from err
    context_ = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if not configuration.verify_ssl:
        context_.check_hostname = False
        context_.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context_.load_cert_chain(configuration.cert_file, configuration.key_file)
    return Credentials(configuration.host.rstrip("/"), context_, configuration)


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.environ.get("KUBECONFIG") and not (
        Path.home() / ".kube" / "config"
    ).exists()


class Client(Protocol):
    """What the operator and the webhooks need from the API; `KubeApi` is the real one, and unit tests
    of the shell's own logic use a small in-memory fake of it."""

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]: ...

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]: ...

    async def merge_patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]: ...

    async def json_patch(self, path: str, operations: list[dict[str, Any]]) -> dict[str, Any]: ...

    async def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]: ...

    async def delete(self, path: str, resource_version: str | None = None) -> dict[str, Any]:
        """Delete; with `resource_version`, only while the object is still at that version (409 otherwise)."""
        ...

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300) -> AsyncIterator[
        dict[str, Any]
    ]: ...

    async def close(self) -> None: ...

    def server_time(self) -> dt.datetime | None:
        """The API server's clock as of its latest answer (its `Date` header, whole seconds); None before
        any answer, or for a client that does not know it."""
        ...


class KubeApi:
    """GET / list / watch / create / patch with plain JSON; one session for the process."""

    def __init__(self, credentials: Credentials, timeout: float = 30.0) -> None:
        self._credentials = credentials
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._watch_session: aiohttp.ClientSession | None = None
        self._server_time: dt.datetime | None = None

    def server_time(self) -> dt.datetime | None:
        return self._server_time

    async def __aenter__(self) -> KubeApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _http(self) -> aiohttp.ClientSession:
        """Requests: at most 16 at once."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._credentials.ssl_context, limit=16)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    def _watches(self) -> aiohttp.ClientSession:
        """Watches, apart from requests: each holds its connection for minutes, and a cache watches as many
        kinds as are enabled, so they must never wait for (or starve) the requests' connections."""
        if self._watch_session is None or self._watch_session.closed:
            connector = aiohttp.TCPConnector(ssl=self._credentials.ssl_context, limit=0)
            self._watch_session = aiohttp.ClientSession(connector=connector)
        return self._watch_session

    async def close(self) -> None:
        for session in (self._session, self._watch_session):
            if session is not None:
                await session.close()

    async def request(
        self, method: str, path: str, body: Mapping[str, Any] | list[dict[str, Any]] | None = None,
        params: Mapping[str, str] | None = None, content_type: str = "application/json",
    ) -> dict[str, Any]:
        headers = {**self._credentials.headers(), "Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body)
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        try:
            async with self._http().request(
                method, self._credentials.host + path, data=data, params=params, headers=headers, timeout=timeout
            ) as response:
                text = await response.text()
                self._server_time = _date(response.headers.get("Date")) or self._server_time
        except aiohttp.ClientError as err:
            if isinstance(err, OSError):
                raise
            # The server went away mid-request (restarted, connection reset): a connection error like the
            # others, which callers retry, rather than an aiohttp type they do not expect.
            raise ConnectionError(f"{method} {path}: {type(err).__name__}: {err}") from err
        if response.status >= 400:
            raise KubeApiError(method, path, response.status, _status_message(text))
        result = json.loads(text) if text else {}
        return result if isinstance(result, dict) else {}

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        return await self.request("GET", path, params=params)

    async def get_text(self, path: str) -> str:
        """A plain-text GET (a Service's /metrics through the API server's proxy)."""
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        try:
            async with self._http().get(self._credentials.host + path, headers=self._credentials.headers(),
                                        timeout=timeout) as response:
                text = await response.text()
        except aiohttp.ClientError as err:
            if isinstance(err, OSError):
                raise
            raise ConnectionError(f"GET {path}: {type(err).__name__}: {err}") from err
        if response.status >= 400:
            raise KubeApiError("GET", path, response.status, _status_message(text))
        return text

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, body)

    async def merge_patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, body, content_type="application/merge-patch+json")

    async def json_patch(self, path: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        """An RFC 6902 patch; a failed `test` operation answers 422, a conflict 409."""
        return await self.request("PATCH", path, operations, content_type="application/json-patch+json")

    async def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("PUT", path, body)

    async def delete(self, path: str, resource_version: str | None = None) -> dict[str, Any]:
        options = None
        if resource_version:
            options = {"apiVersion": "v1", "kind": "DeleteOptions",
                       "preconditions": {"resourceVersion": resource_version}}
        return await self.request("DELETE", path, options)

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300) -> AsyncIterator[
        dict[str, Any]
    ]:
        """Watch events (`{"type": ..., "object": ...}`) from a resourceVersion until the server ends it."""
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        timeout = aiohttp.ClientTimeout(total=None, sock_read=timeout_seconds + 30)
        async with self._watches().get(
            self._credentials.host + path, params=params, headers=self._credentials.headers(), timeout=timeout
        ) as response:
            if response.status >= 400:
                raise KubeApiError("WATCH", path, response.status, _status_message(await response.text()))
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    event = json.loads(line) if line.strip() else None
                    if isinstance(event, dict):
                        yield event


def _date(header: str | None) -> dt.datetime | None:
    if not header:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo is not None else None


def _status_message(text: str) -> str:
    try:
        status = json.loads(text)
    except ValueError:
        return text[:300]
    return str(status.get("message", text[:300])) if isinstance(status, dict) else text[:300]
