"""A reflector lists page by page, and starts over when a continue token expires mid-list."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from admission.core.errors import DraqError
from admission.kube import kinds
from admission.kube.client import KubeApiError
from admission.kube.reflector import LIST_PAGE, Reflector, start_all, stop_all, without_managed_fields


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "7",
                         "managedFields": [{"manager": "kubectl"}]}}


class PagedApi:
    """Serves `total` pods `limit` at a time; the continue tokens listed in `expired` answer 410 once."""

    def __init__(self, total: int, expired: set[str] | None = None) -> None:
        self.pods = [pod(f"p{i}") for i in range(total)]
        self.requests: list[dict[str, str]] = []
        self.expired = expired or set()

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        params = dict(params or {})
        self.requests.append(params)
        token = params.get("continue")
        if token in self.expired:
            self.expired.discard(token)
            raise KubeApiError("GET", path, 410, "The provided continue parameter is too old")
        start, limit = int(token or 0), int(params["limit"])
        rest = start + limit < len(self.pods)
        meta = {"resourceVersion": "42", **({"continue": str(start + limit)} if rest else {})}
        return {"metadata": meta, "items": self.pods[start:start + limit]}

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300) -> AsyncIterator[
            dict[str, Any]]:
        await asyncio.Event().wait()
        yield {}


def listed(api: PagedApi) -> Reflector:
    async def go() -> Reflector:
        reflector = Reflector(api, kinds.PODS, without_managed_fields(kinds.PODS))  # type: ignore[arg-type]
        task = asyncio.create_task(reflector.run())
        await asyncio.wait_for(reflector.synced.wait(), 5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return reflector
    return asyncio.run(go())


def test_the_list_is_read_page_by_page_and_projected() -> None:
    api = PagedApi(2 * LIST_PAGE + 3)
    reflector = listed(api)
    assert [r.get("continue") for r in api.requests] == [None, str(LIST_PAGE), str(2 * LIST_PAGE)]
    assert all(r["limit"] == str(LIST_PAGE) for r in api.requests)
    assert len(reflector.store) == 2 * LIST_PAGE + 3
    assert "managedFields" not in reflector.store[("ns", "p0")]["metadata"]
    assert reflector.store[("ns", "p0")]["kind"] == "Pod"


def test_an_expired_continue_token_lists_again_from_the_start() -> None:
    api = PagedApi(2 * LIST_PAGE + 3, expired={str(2 * LIST_PAGE)})
    reflector = listed(api)
    tokens = [r.get("continue") for r in api.requests]
    assert tokens == [None, str(LIST_PAGE), str(2 * LIST_PAGE), None, str(LIST_PAGE), str(2 * LIST_PAGE)]
    assert len(reflector.store) == 2 * LIST_PAGE + 3


def test_a_first_page_that_fails_is_not_retried_here() -> None:
    class Failing(PagedApi):
        async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
            raise KubeApiError("GET", path, 410, "Gone")

    reflector = Reflector(Failing(1), kinds.PODS, without_managed_fields(kinds.PODS))  # type: ignore[arg-type]
    with pytest.raises(KubeApiError):
        asyncio.run(reflector._list())


class SlowPages(PagedApi):
    """Each page takes `delay` seconds: the whole list takes longer than the start timeout."""

    def __init__(self, total: int, delay: float) -> None:
        super().__init__(total)
        self.delay = delay

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        await asyncio.sleep(self.delay)
        return await super().get(path, params)


def test_a_list_still_receiving_pages_is_waited_for_past_the_start_timeout() -> None:
    api = SlowPages(4 * LIST_PAGE, delay=0.1)

    async def go() -> int:
        reflector = Reflector(api, kinds.PODS, without_managed_fields(kinds.PODS))  # type: ignore[arg-type]
        tasks = await start_all([reflector], timeout=0.25)  # the list takes 0.4 s
        await stop_all(tasks)
        return len(reflector.store)

    assert asyncio.run(go()) == 4 * LIST_PAGE


def test_a_list_without_progress_fails_after_the_timeout() -> None:
    class Hanging(PagedApi):
        async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
            await asyncio.Event().wait()
            return {}

    async def go() -> None:
        reflector = Reflector(Hanging(1), kinds.PODS, without_managed_fields(kinds.PODS))  # type: ignore[arg-type]
        with pytest.raises(DraqError, match="could not list Pod from the API server within 0s"):
            await start_all([reflector], timeout=0.2)

    asyncio.run(go())


def test_each_page_is_announced_once_projected() -> None:
    seen: list[int] = []

    class Counting(Reflector):
        def page_listed(self) -> None:
            seen.append(self.pages)

    api = PagedApi(2 * LIST_PAGE + 1)

    async def go() -> None:
        reflector = Counting(api, kinds.PODS, without_managed_fields(kinds.PODS))  # type: ignore[arg-type]
        await reflector._list()

    asyncio.run(go())
    assert seen == [1, 2, 3]


def test_the_operator_cache_moves_listed_objects_out_of_the_collectors_view() -> None:
    import gc

    from admission.operator.cache import OperatorCache

    cache = OperatorCache(PagedApi(LIST_PAGE + 1))  # type: ignore[arg-type]
    gc.unfreeze()
    try:
        asyncio.run(cache.reflectors["Pod"]._list())
        assert gc.get_freeze_count() > 0
        assert len(cache.reflectors["Pod"].store) == LIST_PAGE + 1
    finally:
        gc.unfreeze()
