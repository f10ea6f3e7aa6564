"""Leader election's own logic with a fake clock: acquire, renew, respect another holder's lease, take
over an expired one, lose a race, stop leading when renewals fail for a lease, release on stop."""

from __future__ import annotations

import asyncio
import datetime as dt

from admission.kube.client import KubeApiError
from admission.kube.clock import micro_timestamp
from admission.operator.leader import LeaderElector
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi

LEASE = 15.0


def elector(api: FakeApi, clock: FakeClock, identity: str = "draq-0") -> LeaderElector:
    return LeaderElector(api, "draq-system", "draq-operator", identity, LEASE, clock)


def lease(holder: str, renewed: dt.datetime) -> dict[str, object]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "draq-operator", "namespace": "draq-system"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": int(LEASE),
                     "renewTime": micro_timestamp(renewed), "leaseTransitions": 3}}


def spec(api: FakeApi) -> dict[str, object]:
    found = api.get_object("Lease", "draq-system", "draq-operator")
    assert found is not None
    return dict(found["spec"])


def test_the_first_replica_creates_the_lease_and_leads() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        one = elector(api, clock)
        await one.step()
        assert one.leading.is_set()
        assert spec(api)["holderIdentity"] == "draq-0"
        assert spec(api)["renewTime"] == micro_timestamp(clock.now())

    asyncio.run(go())


def test_another_holders_live_lease_is_respected_until_it_expires() -> None:
    async def go() -> None:
        clock = FakeClock()
        api = FakeApi()
        api.add(lease("draq-1", clock.now()))
        one = elector(api, clock)
        await one.step()
        assert not one.leading.is_set()
        clock.advance(LEASE - 1)
        await one.step()
        assert not one.leading.is_set()
        clock.advance(2)  # past renewTime + leaseDurationSeconds
        await one.step()
        assert one.leading.is_set()
        assert spec(api)["holderIdentity"] == "draq-0" and spec(api)["leaseTransitions"] == 4

    asyncio.run(go())


def test_two_replicas_racing_for_an_expired_lease_cannot_both_win() -> None:
    async def go() -> None:
        clock = FakeClock()
        api = FakeApi()
        api.add(lease("gone", clock.now() - dt.timedelta(minutes=5)))
        one, two = elector(api, clock, "draq-0"), elector(api, clock, "draq-1")
        stale = await api.get("/apis/coordination.k8s.io/v1/namespaces/draq-system/leases/draq-operator")
        await one.step()
        original_get = api.get

        async def read_before_the_other_wrote(path: str, params: object = None) -> dict[str, object]:
            return stale  # two read the same expired Lease; the second replace carries a stale version

        api.get = read_before_the_other_wrote  # type: ignore[method-assign]
        await two.step()
        api.get = original_get  # type: ignore[method-assign]
        assert one.leading.is_set() and not two.leading.is_set()
        assert spec(api)["holderIdentity"] == "draq-0"

    asyncio.run(go())


def test_failed_renewals_stop_leading_within_one_lease() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        one = elector(api, clock)
        await one.step()
        api.fail = lambda method, path: KubeApiError(method, path, 503, "the API server is away")
        clock.advance(LEASE / 3)
        await one.step()
        assert one.leading.is_set()  # renewed 5 s ago: still within the lease
        clock.advance(LEASE)
        await one.step()
        assert not one.leading.is_set()

    asyncio.run(go())


def test_release_on_a_clean_stop_lets_another_replica_take_over_at_once() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        one, two = elector(api, clock, "draq-0"), elector(api, clock, "draq-1")
        await one.step()
        await one.release()
        assert not one.leading.is_set() and spec(api)["holderIdentity"] == ""
        await two.step()
        assert two.leading.is_set()

    asyncio.run(go())


def test_run_renews_every_third_of_the_lease() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        one = elector(api, clock)
        task = asyncio.create_task(one.run())
        while len(clock.sleeps) < 3:
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert clock.sleeps[:3] == [LEASE / 3] * 3
        renewals = [w for w in api.writes if w.method == "PUT"]
        assert len(renewals) >= 2

    asyncio.run(go())
