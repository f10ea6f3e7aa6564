"""A kind the API server does not serve (a CRD not installed, an API behind a feature gate): the reflector asks
again every `retry_absent_after` seconds, and an answer that it is still absent is no change. Before, each
retry was a change, and on a cluster without DeviceTaintRules every parked group was evaluated again every
10 s (any change to taint rules could give room)."""

from __future__ import annotations

import asyncio

from admission.kube import kinds
from admission.kube.client import KubeApiError
from admission.kube.reflector import Reflector, without_managed_fields
from tests.support.fake_api import FakeApi


def test_a_kind_still_absent_is_no_change_and_one_served_later_is() -> None:
    async def go() -> None:
        api = FakeApi()
        resource = kinds.DEVICE_TAINT_RULES
        served = False

        def absent(method: str, path: str) -> KubeApiError | None:
            return None if served else KubeApiError(method, path, 404, "the server could not find the resource")
        api.fail = absent
        changes: list[int] = []
        reflector = Reflector(api, resource, without_managed_fields(resource),  # type: ignore[arg-type]
                              on_change=lambda: changes.append(1), retry_absent_after=0.01)
        task = asyncio.create_task(reflector.run())
        await asyncio.wait_for(reflector.synced.wait(), 5)
        generation = reflector.generation
        await asyncio.sleep(0.2)  # many retries, all still absent
        assert len(changes) == 1 and reflector.generation == generation
        served = True
        await asyncio.sleep(0.1)
        assert len(changes) == 2  # served now (empty): listed once, a change
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
