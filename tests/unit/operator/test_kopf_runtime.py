"""kopf's part in `draq run`: startup, cleanup and login, and no handler on any resource, so it lists and
watches nothing; it keeps no state on any object (no progress, no diff base, no finalizer), and peering is
off. A new spec of draq's kinds is acknowledged on the leader from what the operator's own reflectors see."""

from __future__ import annotations

import asyncio
import inspect
import ssl
from typing import Any

import kopf

from admission.core.labels import API_GROUP, API_VERSION
from admission.kube import kinds
from admission.kube.client import Credentials
from admission.kube.connection import Connection, connection_of
from admission.localcluster import rbac
from admission.operator import Operator, OperatorSettings
from admission.operator.runtime import (
    RECONFIGURABLE,
    Lifecycle,
    NoDiffBase,
    NoProgress,
    Reconfigured,
    kopf_registry,
    kopf_settings,
)
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.chart.support import Request, allowed

from .operator_world import cluster


def queue(generation: int, uid: str = "u-1") -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue",
            "metadata": {"name": "research", "uid": uid, "generation": generation}, "spec": {}}


def operator(leader_election: bool = False) -> Operator:
    return Operator(OperatorSettings(leader_election=leader_election, identity="draq-a"), api=cluster(),
                    clock=FakeClock())


def test_the_operators_reflectors_wake_the_loop_and_post_the_event() -> None:
    """One watch of draq's kinds: the operator's reflector wakes the loop on every event and tells the
    Reconfigured acknowledgement, which posts its Event (cluster-scoped objects' Events go to `default`)."""
    api = FakeApi()
    api.add(queue(1))
    found = Operator(OperatorSettings(leader_election=False, identity="draq-a"), api=api, clock=FakeClock())
    Reconfigured(found).observe()

    async def scenario() -> list[Any]:
        await found.cache.start(timeout=5)
        try:
            found.cache.changed.clear()
            await api.merge_patch(kinds.CLUSTER_QUEUES.object_path(None, "research"),
                                  {"metadata": {"generation": 2}, "spec": {"cohort": "all"}})
            for _ in range(200):
                if api.writes_to("/events"):
                    break
                await asyncio.sleep(0.01)
            assert found.cache.changed.is_set()
            return api.writes_to("/events")
        finally:
            await found.cache.stop()

    [posted] = asyncio.run(scenario())  # the listing at generation 1 is a first sight: no Event
    assert posted.path == "/api/v1/namespaces/default/events"
    assert (posted.body["reason"], posted.body["involvedObject"]["name"]) == ("Reconfigured", "research")
    assert posted.body["message"] == (
        "ClusterQueue spec generation 2 seen by draq (draq-a); the next admission cycle decides with it")


def test_an_observer_that_fails_does_not_stop_the_cache() -> None:
    found = operator()

    def broken(event_type: str | None, body: Any) -> None:
        raise RuntimeError("observer bug")

    found.cache.observe(["ClusterQueue"], broken)
    found.cache.reflectors["ClusterQueue"].apply_event("ADDED", queue(1))
    assert [o["metadata"]["name"] for o in found.cache.objects("ClusterQueue")] == ["research"]
    assert found.cache.changed.is_set()


def test_a_new_generation_is_acknowledged_once() -> None:
    wake = Reconfigured(operator())
    assert wake(None, queue(1)) is None  # the initial listing
    assert wake("MODIFIED", queue(1)) is None  # a status write: same generation
    assert wake("MODIFIED", queue(2)) == (
        "ClusterQueue spec generation 2 seen by draq (draq-a); the next admission cycle decides with it")
    assert wake("MODIFIED", queue(2)) is None
    assert wake("MODIFIED", queue(1)) is None  # an older copy arriving late
    assert wake("DELETED", queue(2)) is None
    assert wake("ADDED", queue(1)) is None  # made again under the same uid: first sight


def test_only_the_leader_acknowledges() -> None:
    standby = operator(leader_election=True)
    wake = Reconfigured(standby)
    wake(None, queue(1))
    assert wake("MODIFIED", queue(2)) is None
    assert standby.elector is not None
    standby.elector.leading.set()
    assert wake("MODIFIED", queue(3)) is not None


def test_kopf_writes_no_state_on_objects() -> None:
    body = kopf.Body(queue(1))
    patch = kopf.Patch()
    progress, diffbase = NoProgress(), NoDiffBase()
    progress.store(key=kopf.HandlerId("wake"), record={"started": "now"}, body=body, patch=patch)
    progress.touch(body=body, patch=patch, value="x")
    progress.purge(key=kopf.HandlerId("wake"), body=body, patch=patch)
    diffbase.store(body=body, patch=patch, essence=diffbase.build(body=body))
    assert patch == {} and progress.fetch(key=kopf.HandlerId("wake"), body=body) is None
    assert diffbase.fetch(body=body) is None


def test_settings_peering_off_and_draqs_storages() -> None:
    settings = kopf_settings("draq-a")
    assert settings.peering.standalone and settings.peering.clusterwide
    assert isinstance(settings.persistence.progress_storage, NoProgress)
    assert isinstance(settings.persistence.diffbase_storage, NoDiffBase)
    assert (settings.posting.reporting_component, settings.posting.reporting_instance) == ("draq", "draq-a")


def test_kopf_has_no_handler_on_any_resource() -> None:
    """kopf lists and watches the resources its handlers name: with none, draq's kinds are watched once, by
    the operator's reflectors (`docs/operator.md`: 23 watch connections at start became 19)."""
    found = operator()
    registry = kopf_registry(Lifecycle(found, [], asyncio.Event()),
                             lambda: Connection("https://127.0.0.1:6443", None, False, None, None, None, None))
    for handlers in (registry._watching, registry._changing, registry._indexing, registry._spawning,
                     registry._webhooks):
        assert not handlers.get_all_handlers()
    activities = registry._activities.get_all_handlers()
    assert sorted(str(h.activity.value) for h in activities) == ["authentication", "cleanup", "startup"]
    assert all(inspect.iscoroutinefunction(h.fn) for h in activities if str(h.activity.value) != "authentication")


class Configuration:
    ssl_ca_cert = "/pki/ca.crt"
    verify_ssl = True
    cert_file = ""
    key_file = ""

    def auth_settings(self) -> dict[str, Any]:
        return {"BearerToken": {"in": "header", "key": "authorization", "value": "Bearer abc.def"}}


def test_kopf_logs_in_as_draq_does() -> None:
    credentials = Credentials("https://10.0.0.1:443", ssl.create_default_context(), Configuration())
    assert connection_of(credentials) == Connection("https://10.0.0.1:443", "/pki/ca.crt", False, None, None,
                                                    "Bearer", "abc.def")


def test_the_charts_rights_cover_the_reconfigured_events() -> None:
    """The operator's reflectors list and watch draq's kinds across namespaces; the Reconfigured Events go to
    `default` for draq's cluster-scoped kinds, to the object's namespace otherwise."""
    rights = rbac.Rights()
    cluster_rules = rbac.rules(*rights.cluster_files())
    plurals = [res.plural for res in (kinds.QUOTA_UNITS, kinds.CLUSTER_QUEUES, kinds.LOCAL_QUEUES, kinds.POD_GROUPS)]
    assert sorted(res.kind for res in (kinds.QUOTA_UNITS, kinds.CLUSTER_QUEUES, kinds.LOCAL_QUEUES,
                                       kinds.POD_GROUPS)) == sorted(RECONFIGURABLE)
    requests = [Request(verb, API_GROUP, plural, "", "") for plural in plurals for verb in ("list", "watch")]
    requests += [Request("create", "", "events", namespace, "") for namespace in ("default", "team")]
    assert [r.describe() for r in requests if not allowed(r, cluster_rules, [], "draq-system")] == []
