"""Leader election against the fake API and a fake clock: acquire, renew, respect another holder's lease
(measured on the standby's own clock), take over a killed leader within the lease plus one standby
poll, never have two replicas in a term at once, stop deciding at the renew deadline counted from
before the renewal was sent, take the Lease back at once after a restart under the same identity,
release on a clean stop, and the fence that keeps writes inside a term."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from admission.core.errors import InvalidInput
from admission.core.labels import INCARNATION_ANNOTATION
from admission.core.leadership import ElectionTiming, Epoch
from admission.kube.client import KubeApiError
from admission.kube.clock import micro_timestamp
from admission.operator.leader import (
    FAILING_RETRY,
    STANDBY_POLL,
    FencedClient,
    LeaderElector,
    LeadershipLost,
    default_identity,
)
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi

LEASE, DEADLINE, RETRY = 15.0, 10.0, 2.0
PATH = "/apis/coordination.k8s.io/v1/namespaces/draq-system/leases/draq-operator"


def elector(api: Any, clock: FakeClock, identity: str = "draq-0", incarnation: str | None = None) -> LeaderElector:
    return LeaderElector(api, "draq-system", "draq-operator", identity, ElectionTiming(LEASE, DEADLINE, RETRY), clock,
                         incarnation)


def lease(holder: str, renewed: dt.datetime, incarnation: str = "other") -> dict[str, object]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "draq-operator", "namespace": "draq-system",
                         "annotations": {INCARNATION_ANNOTATION: incarnation}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": int(LEASE),
                     "renewTime": micro_timestamp(renewed), "leaseTransitions": 3}}


def spec(api: FakeApi) -> dict[str, Any]:
    found = api.get_object("Lease", "draq-system", "draq-operator")
    assert found is not None
    return dict(found["spec"])


def run(go: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(go())  # type: ignore[arg-type]


def test_the_first_replica_creates_the_lease_and_leads() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        one = elector(api, clock, incarnation="run-1")
        await one.step()
        assert one.leading.is_set() and not one.deposed.is_set() and one.term == 1
        assert spec(api)["holderIdentity"] == "draq-0"
        assert spec(api)["renewTime"] == micro_timestamp(clock.now())
        assert one.current_epoch() == Epoch("draq-0", 0, "")
        found = api.get_object("Lease", "draq-system", "draq-operator")
        assert found is not None and found["metadata"]["annotations"][INCARNATION_ANNOTATION] == "run-1"

    run(go)


def test_a_live_lease_is_respected_for_a_lease_duration_on_the_standbys_own_clock() -> None:
    async def go() -> None:
        clock = FakeClock()
        api = FakeApi()
        # The holder's clock is five minutes behind: by its renewTime the Lease expired long ago.
        api.add(lease("draq-1", clock.now() - dt.timedelta(minutes=5)))
        one = elector(api, clock)
        for _ in range(10):  # the holder keeps renewing: the standby never takes over
            await one.step()
            assert not one.leading.is_set()
            clock.advance(RETRY)
            await api.merge_patch(PATH, {"spec": {"renewTime": micro_timestamp(clock.now() - dt.timedelta(minutes=5))}})
        last_renewal = clock.monotonic()
        await one.step()  # first sees the last renewal now
        clock.advance(LEASE - 0.5)
        await one.step()
        assert not one.leading.is_set()
        clock.advance(0.5)
        await one.step()
        assert one.leading.is_set() and clock.monotonic() - last_renewal == LEASE
        assert spec(api)["holderIdentity"] == "draq-0" and spec(api)["leaseTransitions"] == 4

    run(go)


def test_a_lease_renewed_in_the_future_still_expires_when_it_stops_changing() -> None:
    async def go() -> None:
        clock = FakeClock()
        api = FakeApi()
        api.add(lease("draq-1", clock.now() + dt.timedelta(hours=1)))  # the holder's clock is an hour ahead
        one = elector(api, clock)
        await one.step()
        clock.advance(LEASE)
        await one.step()
        assert one.leading.is_set()

    run(go)


def test_two_replicas_racing_for_an_expired_lease_cannot_both_win() -> None:
    async def go() -> None:
        clock = FakeClock()
        api = FakeApi()
        api.add(lease("gone", clock.now()))
        one, two = elector(api, clock, "draq-0"), elector(api, clock, "draq-1")
        await one.step()
        await two.step()
        clock.advance(LEASE + 1)
        stale = await api.get(PATH)
        await one.step()
        original_get = api.get

        async def read_before_the_other_wrote(path: str, params: object = None) -> dict[str, object]:
            return stale  # both read the same expired Lease; the second replace carries a stale version

        api.get = read_before_the_other_wrote  # type: ignore[method-assign]
        await two.step()
        api.get = original_get  # type: ignore[method-assign]
        assert one.leading.is_set() and not two.leading.is_set()
        assert spec(api)["holderIdentity"] == "draq-0"

    run(go)


def test_the_renew_deadline_counts_from_before_the_renewal_was_sent() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        one = elector(api, clock)
        await one.step()
        original_get = api.get

        async def slow_get(path: str, params: object = None) -> dict[str, object]:
            clock.advance(3.0)  # the renewal's first request takes 3 s to answer
            return await original_get(path)

        api.get = slow_get  # type: ignore[method-assign]
        clock.advance(RETRY)
        sent = clock.monotonic()
        await one.step()
        assert one.may_write()
        clock.advance(sent + DEADLINE - clock.monotonic() - 0.01)
        assert one.may_write()
        clock.advance(0.01)  # the deadline after the send, though only 7 s after the answer
        assert not one.may_write() and one.deposed.is_set()
        with pytest.raises(LeadershipLost, match="renew deadline"):
            one.current_epoch()

    run(go)


def test_failed_renewals_end_the_term_at_the_renew_deadline() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        one = elector(api, clock)
        await one.step()
        api.fail = lambda method, path: KubeApiError(method, path, 503, "the API server is away")
        clock.advance(RETRY)
        await one.step()
        assert one.leading.is_set()  # renewed 2 s ago: still within the renew deadline
        assert one._pause() == FAILING_RETRY  # the API server is away: try again soon, not a retry period later
        clock.advance(DEADLINE - 2 * RETRY)
        assert one._pause() == pytest.approx(FAILING_RETRY)
        clock.advance(RETRY)
        await one.step()
        assert not one.leading.is_set() and one.deposed.is_set()

    run(go)


class Replica:
    """One elector in a small simulation: steps when its pause says, on a client that may be cut off."""

    def __init__(self, api: FakeApi, clock: FakeClock, identity: str) -> None:
        self.cut_off = False
        self.alive = True
        outer = self

        class Link:
            def server_time(self) -> dt.datetime | None:
                return api.server_time()

            def __getattr__(self, name: str) -> Any:
                method = getattr(api, name)

                async def call(*args: Any, **kwargs: Any) -> Any:
                    if outer.cut_off:
                        raise OSError("connection timed out")
                    return await method(*args, **kwargs)
                return call

        self.elector = elector(Link(), clock, identity)
        self.next = 0.0


def simulate(api: FakeApi, clock: FakeClock, replicas: list[Replica], until: float,
             at: dict[float, Callable[[], None]], check: Callable[[], None]) -> None:
    """Step every live replica at the times its own pause gives, run the scheduled faults, and check
    after every step."""
    async def go() -> None:
        faults = sorted(at.items())
        while clock.monotonic() < until:
            live = [r for r in replicas if r.alive]
            replica = min(live, key=lambda r: r.next)
            moment = min(replica.next, faults[0][0]) if faults else replica.next
            clock.advance(max(moment - clock.monotonic(), 0.0))
            if faults and faults[0][0] <= replica.next:
                faults.pop(0)[1]()
                check()
                continue
            await replica.elector.step()
            check()
            replica.next = clock.monotonic() + replica.elector._pause()

    run(go)


@pytest.mark.parametrize("offset", [0.0, 0.3, 1.1, 1.9])
@pytest.mark.parametrize("killed_at", [7.0, 8.05, 9.99])
def test_a_killed_leader_is_replaced_within_the_lease_plus_one_standby_poll(offset: float, killed_at: float) -> None:
    api, clock = FakeApi(), FakeClock()
    leader, standby = Replica(api, clock, "draq-0"), Replica(api, clock, "draq-1")
    standby.next = offset
    renewals: list[float] = []
    versions: list[str] = []
    took_over: list[float] = []

    def record() -> None:
        found = api.get_object("Lease", "draq-system", "draq-operator")
        if found is None:
            return
        version = found["metadata"]["resourceVersion"]
        if found["spec"]["holderIdentity"] == "draq-0" and version not in versions:
            versions.append(version)
            renewals.append(clock.monotonic())
        if standby.elector.leading.is_set() and not took_over:
            took_over.append(clock.monotonic())

    def kill() -> None:
        leader.alive = False

    simulate(api, clock, [leader, standby], 40.0, {killed_at: kill}, record)
    assert took_over, "the standby never took over"
    last_renewal = max(renewals)
    poll = min(RETRY, STANDBY_POLL)  # the standby sees the last renewal at most this late
    assert last_renewal <= killed_at and took_over[0] - last_renewal <= LEASE + poll + 0.01
    assert took_over[0] - killed_at <= LEASE + poll


@pytest.mark.parametrize("cut_at", [5.0, 6.5, 9.3])
def test_a_leader_cut_off_from_the_api_stops_before_anyone_else_starts(cut_at: float) -> None:
    api, clock = FakeApi(), FakeClock()
    leader, standby = Replica(api, clock, "draq-0"), Replica(api, clock, "draq-1")
    standby.next = 0.7
    overlaps: list[float] = []
    stopped: list[float] = []

    def check() -> None:
        if leader.elector.may_write() and standby.elector.may_write():
            overlaps.append(clock.monotonic())
        if not leader.elector.may_write() and leader.elector.term and not stopped:
            stopped.append(clock.monotonic())

    def cut() -> None:
        leader.cut_off = True

    simulate(api, clock, [leader, standby], 60.0, {cut_at: cut}, check)
    assert overlaps == []
    assert standby.elector.leading.is_set() and stopped
    epoch = standby.elector.current_epoch()
    assert epoch is not None and epoch.holder == "draq-1" and epoch.transitions == 1


def test_a_restart_under_the_same_identity_takes_the_lease_back_at_once_in_a_new_term() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        first = elector(api, clock, "draq-0", incarnation="run-1")
        await first.step()
        before = first.current_epoch()
        clock.advance(1.0)
        restarted = elector(api, clock, "draq-0", incarnation="run-2")  # the first one was killed
        await restarted.step()
        after = restarted.current_epoch()
        assert before is not None and after is not None
        assert after.holder == "draq-0" and after.transitions == before.transitions + 1
        # Were the first still alive, it steps down on its next renewal and does not take the Lease back.
        clock.advance(RETRY)
        await first.step()
        assert not first.leading.is_set()
        for _ in range(3):
            clock.advance(RETRY)
            await restarted.step()
            await first.step()
        assert restarted.leading.is_set() and not first.leading.is_set()
        assert spec(api)["leaseTransitions"] == after.transitions

    run(go)


def test_a_leader_that_stepped_down_leads_again_only_in_a_new_term() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        one = elector(api, clock)
        await one.step()
        clock.advance(DEADLINE)  # no renewal in time, nobody else took over
        assert not one.may_write()
        await one.step()
        epoch = one.current_epoch()
        assert epoch is not None and epoch.transitions == 1 and one.term == 2

    run(go)


def test_release_on_a_clean_stop_lets_another_replica_take_over_at_once() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        one, two = elector(api, clock, "draq-0"), elector(api, clock, "draq-1")
        await one.step()
        await two.step()
        assert not two.leading.is_set()
        await one.release()
        assert not one.leading.is_set() and spec(api)["holderIdentity"] == ""
        with pytest.raises(LeadershipLost):
            one.current_epoch()
        clock.advance(RETRY)
        await two.step()
        assert two.leading.is_set()

    run(go)


def test_run_renews_every_retry_period() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        one = elector(api, clock)
        task = asyncio.create_task(one.run())
        while len(clock.sleeps) < 3:
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert clock.sleeps[:3] == [RETRY] * 3
        renewals = [w for w in api.writes if w.method == "PUT"]
        assert len(renewals) >= 2

    run(go)


def test_the_fence_sends_no_write_outside_a_term_and_lets_reads_through() -> None:
    async def go() -> None:
        api, clock = FakeApi(), FakeClock()
        one = elector(api, clock)
        fenced = FencedClient(api, one)
        pods = "/api/v1/namespaces/team/pods"
        with pytest.raises(LeadershipLost):
            await fenced.create(pods, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
        await one.step()
        await fenced.create(pods, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
        clock.advance(DEADLINE)
        writes = len(api.writes)
        for write in (fenced.merge_patch(f"{pods}/p", {"metadata": {"labels": {"a": "b"}}}),
                      fenced.json_patch(f"{pods}/p", []), fenced.replace(f"{pods}/p", {}), fenced.delete(f"{pods}/p")):
            with pytest.raises(LeadershipLost):
                await write
        assert len(api.writes) == writes
        assert (await fenced.get(f"{pods}/p"))["metadata"]["name"] == "p"

    run(go)


@pytest.mark.parametrize(("timing", "option"), [
    (ElectionTiming(4.5, 3, 1), "--lease-seconds"),
    (ElectionTiming(0, 0.5, 0.1), "--lease-seconds"),
    (ElectionTiming(5, 5, 1), "--renew-deadline"),
    (ElectionTiming(5, 3, 3), "--retry-period"),
    (ElectionTiming(5, 3, 0), "--retry-period"),
])
def test_timing_that_cannot_work_is_refused_naming_the_option(timing: ElectionTiming, option: str) -> None:
    problem = timing.problem()
    assert problem is not None and problem[0] == option
    with pytest.raises(InvalidInput, match=option):
        LeaderElector(FakeApi(), "draq-system", "draq-operator", "draq-0", timing, FakeClock())


def test_default_timing_scales_with_the_lease() -> None:
    assert ElectionTiming.for_lease(15) == ElectionTiming(15, 10, 2)
    assert ElectionTiming.for_lease(6, retry_period=0.5) == ElectionTiming(6, 4, 0.5)
    assert ElectionTiming.for_lease(15).problem() is None


def test_the_identity_is_the_pod_name_else_the_host_name() -> None:
    assert default_identity({"POD_NAME": "draq-7f9c-x2"}, "node-1") == "draq-7f9c-x2"
    assert default_identity({}, "draq-7f9c-x2") == "draq-7f9c-x2"


def written_at(manifest: dict[str, Any], at: dt.datetime) -> dict[str, Any]:
    """The Lease as the API server answers it: the time of its last write in managedFields (whole seconds)."""
    manifest["metadata"]["managedFields"] = [{"manager": "Python", "operation": "Update",
                                              "time": at.strftime("%Y-%m-%dT%H:%M:%SZ")}]
    return manifest


def test_a_new_replica_counts_the_expiry_from_the_last_write_by_the_servers_clock() -> None:
    async def go() -> None:
        clock, api = FakeClock(), FakeApi()
        server_now = dt.datetime(2026, 3, 1, 12, 0, 10, tzinfo=dt.UTC)
        # Last renewed 10 s ago by the server's clock (the replica's own clock is months off: it does not matter).
        api.add(written_at(lease("draq-1", clock.now()), server_now - dt.timedelta(seconds=10)))
        api.server_now = server_now
        one = elector(api, clock)
        await one.step()
        assert not one.leading.is_set()  # certainly unwritten for 9 s: 6 s to go
        clock.advance(LEASE - 9 - 0.01)
        await one.step()
        assert not one.leading.is_set()
        clock.advance(0.01)
        await one.step()
        assert one.leading.is_set() and spec(api)["holderIdentity"] == "draq-0"

    run(go)


def test_without_the_servers_clock_a_new_replica_waits_a_whole_lease() -> None:
    async def go() -> None:
        clock, api = FakeClock(), FakeApi()
        api.add(written_at(lease("draq-1", clock.now()), clock.now() - dt.timedelta(minutes=5)))
        one = elector(api, clock)  # api.server_now is None: the age is unknown
        await one.step()
        clock.advance(LEASE - 0.01)
        await one.step()
        assert not one.leading.is_set()
        clock.advance(0.01)
        await one.step()
        assert one.leading.is_set()

    run(go)
