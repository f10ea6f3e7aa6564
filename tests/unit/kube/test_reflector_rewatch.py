"""A watch the server ends is resumed from the last version seen; only an expired version lists again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from admission.kube import kinds
from admission.kube.reflector import Reflector, without_managed_fields


class ScriptedApi:
    """Lists once per call, and serves each watch from a script of event batches (one batch per watch)."""

    def __init__(self, batches: list[list[dict[str, Any]]]) -> None:
        self.lists = 0
        self.store: set[tuple[str, str]] = set()
        self.watched_from: list[str] = []
        self._batches = batches
        self.done = asyncio.Event()

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        self.lists += 1
        return {"metadata": {"resourceVersion": "10"}, "items": [pod("a", "10")]}

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300) -> AsyncIterator[
            dict[str, Any]]:
        self.watched_from.append(resource_version)
        if not self._batches:
            self.done.set()
            await asyncio.Event().wait()
        for event in self._batches.pop(0):
            yield event


def pod(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


def run(batches: list[list[dict[str, Any]]]) -> ScriptedApi:
    api = ScriptedApi(batches)

    async def go() -> None:
        reflector = Reflector(api, kinds.PODS, without_managed_fields(kinds.PODS))  # type: ignore[arg-type]
        task = asyncio.create_task(reflector.run())
        await asyncio.wait_for(api.done.wait(), 5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        api.store = set(reflector.store)

    asyncio.run(go())
    return api


def test_a_watch_ended_by_the_server_resumes_from_the_last_version_without_listing() -> None:
    api = run([[{"type": "ADDED", "object": pod("b", "11")},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}}],
               []])
    assert api.lists == 1
    assert api.watched_from == ["10", "15", "15"]
    assert api.store == {("ns", "a"), ("ns", "b")}


def test_an_expired_version_lists_again() -> None:
    api = run([[{"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}], []])
    assert api.lists == 2
    assert api.watched_from == ["10", "10", "10"]
