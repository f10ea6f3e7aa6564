"""Releases, evictions and suspensions carry the term's epoch in the annotation draq.io/epoch, in the same
write, so that draq's webhook can refuse them when they reach the API server after the term ended; a pod
is deleted only at the version its stamp produced. Without leader election no stamp is written and one
left behind is removed. Outside a term nothing is sent."""

from __future__ import annotations

import asyncio
import json

import pytest

from admission.core.labels import EPOCH_ANNOTATION, GATE
from admission.core.leadership import Epoch, annotated_epoch
from admission.core.models import ObjectRef
from admission.kube.client import KubeApiError
from admission.operator.cache import OperatorCache
from admission.operator.leader import LeadershipLost
from admission.operator.writer import Writer
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS, member

EPOCH = Epoch("draq-1", 5, "u-1")
KEY_PATH = "/metadata/annotations/draq.io~1epoch"


class Term:
    """A fence in a term with `EPOCH` until `end()`."""

    def __init__(self) -> None:
        self.over = False

    def current_epoch(self) -> Epoch | None:
        if self.over:
            raise LeadershipLost("the term ended")
        return EPOCH


class NoTerm:
    def current_epoch(self) -> Epoch | None:
        return None


def writer(api: FakeApi, fence: Term | NoTerm) -> Writer:
    return Writer(api, OperatorCache(api, FakeClock()), FakeClock(), fence)


def stamp_of(api: FakeApi, kind: str, name: str) -> Epoch | None:
    found = api.get_object(kind, NS, name)
    assert found is not None
    return annotated_epoch(found)


def test_a_release_is_stamped_in_the_same_patch() -> None:
    api = FakeApi()
    api.add(member("p", "g"))
    assert asyncio.run(writer(api, Term()).ungate(NS, "p", None, node="n1"))
    [patch] = [w.body for w in api.writes]
    assert {"op": "add", "path": "/metadata/annotations", "value": {EPOCH_ANNOTATION: EPOCH.to_annotation()}} in patch
    assert stamp_of(api, "Pod", "p") == EPOCH


def test_a_release_of_an_annotated_pod_adds_only_the_stamp() -> None:
    api = FakeApi()
    pod = member("p", "g")
    pod["metadata"]["annotations"] = {"team.io/owner": "ana"}
    api.add(pod)
    assert asyncio.run(writer(api, Term()).ungate(NS, "p", None))
    assert {"op": "add", "path": KEY_PATH, "value": EPOCH.to_annotation()} in api.writes[0].body
    found = api.get_object("Pod", NS, "p")
    assert found is not None and found["metadata"]["annotations"]["team.io/owner"] == "ana"


def test_without_leader_election_a_stamp_left_behind_is_removed() -> None:
    api = FakeApi()
    pod = member("p", "g")
    pod["metadata"]["annotations"] = {EPOCH_ANNOTATION: json.dumps(EPOCH.to_status())}
    api.add(pod, member("q", "g"))
    release = writer(api, NoTerm())
    assert asyncio.run(release.ungate(NS, "p", None)) and asyncio.run(release.ungate(NS, "q", None))
    assert {"op": "remove", "path": KEY_PATH} in api.writes[0].body
    assert not [op for op in api.writes[1].body if "annotations" in op["path"]]  # nothing to remove
    assert stamp_of(api, "Pod", "p") is None


def test_an_eviction_stamps_the_pod_then_deletes_it_at_that_version() -> None:
    api = FakeApi()
    api.add(member("p", "g", gated=False))
    assert asyncio.run(writer(api, Term()).delete_pod(NS, "p"))
    stamp, delete = api.writes
    assert stamp.method == "PATCH" and stamp.body == {"metadata": {"annotations": {
        EPOCH_ANNOTATION: EPOCH.to_annotation()}}}
    assert delete.method == "DELETE" and delete.body == {"resourceVersion": "2"}
    assert api.get_object("Pod", NS, "p") is None


def test_an_eviction_stamps_again_when_the_pod_changed_before_the_deletion() -> None:
    api = FakeApi()
    api.add(member("p", "g", gated=False))
    failed: list[str] = []

    def kubelet_first(method: str, path: str) -> KubeApiError | None:
        if method == "DELETE" and not failed:
            failed.append(path)
            return KubeApiError(method, path, 409, "precondition failed")
        return None

    api.fail = kubelet_first
    assert asyncio.run(writer(api, Term()).delete_pod(NS, "p"))
    assert [w.method for w in api.writes] == ["PATCH", "PATCH", "DELETE"]
    assert not asyncio.run(writer(api, Term()).delete_pod(NS, "p"))  # gone: False


def test_a_suspension_is_stamped_in_the_same_patch() -> None:
    api = FakeApi()
    api.add({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": NS},
             "spec": {"suspend": False}})
    assert asyncio.run(writer(api, Term()).suspend(ObjectRef("Job", NS, "j"), True))
    assert api.writes[0].body == {"metadata": {"annotations": {EPOCH_ANNOTATION: EPOCH.to_annotation()}},
                                  "spec": {"suspend": True}}
    assert stamp_of(api, "Job", "j") == EPOCH


def test_outside_a_term_nothing_is_sent() -> None:
    api = FakeApi()
    api.add(member("p", "g"), member("q", "g", gated=False))
    term = Term()
    term.over = True
    out = writer(api, term)
    with pytest.raises(LeadershipLost):
        asyncio.run(out.ungate(NS, "p", None))
    with pytest.raises(LeadershipLost):
        asyncio.run(out.delete_pod(NS, "q"))
    assert api.writes == []
    pod = api.get_object("Pod", NS, "p")
    assert pod is not None and pod["spec"]["schedulingGates"] == [{"name": GATE}]
