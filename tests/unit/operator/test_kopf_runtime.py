"""kopf's part in `draq run`: its handlers on draq's kinds wake the loop and acknowledge a new spec on the
leader; it keeps no state on any object (no progress, no diff base, no finalizer), and peering is off."""

from __future__ import annotations

import asyncio
import inspect
import ssl
from typing import Any

import kopf

from admission.core.labels import API_GROUP, API_VERSION
from admission.kube.client import Credentials
from admission.kube.connection import Connection, connection_of
from admission.localcluster import rbac
from admission.operator import Operator, OperatorSettings
from admission.operator.runtime import (
    WATCHED,
    Lifecycle,
    NoDiffBase,
    NoProgress,
    Wakeup,
    kopf_registry,
    kopf_settings,
)
from tests.support.clock import FakeClock
from tests.unit.chart.support import Request, allowed

from .operator_world import cluster


def queue(generation: int, uid: str = "u-1") -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue",
            "metadata": {"name": "research", "uid": uid, "generation": generation}, "spec": {}}


def operator(leader_election: bool = False) -> Operator:
    return Operator(OperatorSettings(leader_election=leader_election, identity="draq-a"), api=cluster(),
                    clock=FakeClock())


def test_every_event_wakes_the_loop() -> None:
    found = operator()
    wake = Wakeup(found)
    for event_type in (None, "ADDED", "MODIFIED", "DELETED"):
        found.cache.changed.clear()
        wake(event_type, queue(1))
        assert found.cache.changed.is_set(), event_type


def test_a_new_generation_is_acknowledged_once() -> None:
    wake = Wakeup(operator())
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
    wake = Wakeup(standby)
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


def test_only_watching_handlers_on_draqs_kinds() -> None:
    """Changing handlers (create/update/delete) would need kopf's storages and may add finalizers; draq has
    none, and watches nothing but its own four kinds, with handlers that run on the event loop."""
    found = operator()
    registry = kopf_registry(Lifecycle(found, [], asyncio.Event()), Wakeup(found),
                             lambda: Connection("https://127.0.0.1:6443", None, False, None, None, None, None))
    watching = registry._watching.get_all_handlers()
    assert sorted(str(h.id) for h in watching) == sorted(f"wake-on-{kind}" for kind in WATCHED)
    assert all(h.selector is not None and h.selector.group == "draq.io" for h in watching)
    # kopf runs plain functions in its thread pool; the wake-up must run on the loop, as a coroutine.
    assert all(inspect.iscoroutinefunction(h.fn) for h in watching)
    assert not registry._changing.get_all_handlers()
    assert not registry._indexing.get_all_handlers()


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


def test_the_charts_rights_cover_what_kopf_does() -> None:
    """kopf lists and watches draq's kinds across namespaces and posts Events (in `default` for draq's
    cluster-scoped kinds, in the object's namespace otherwise); nothing else."""
    rights = rbac.Rights()
    cluster_rules = rbac.rules(*rights.cluster_files())
    requests = [Request(verb, API_GROUP, plural, "", "") for plural in WATCHED.values() for verb in ("list", "watch")]
    requests += [Request("create", "", "events", namespace, "") for namespace in ("default", "team")]
    assert [r.describe() for r in requests if not allowed(r, cluster_rules, [], "draq-system")] == []
