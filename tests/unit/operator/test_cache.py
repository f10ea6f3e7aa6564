"""The operator's cache never brings a deleted object back: a write's answer (or a term's listing) that
arrives after the object's delete event is refused, by uid, or by resourceVersion where there is none;
a recreated object of the same name is taken; deletions are remembered only for a short time."""

from __future__ import annotations

import copy
from typing import Any

from admission.core.features import gates_for
from admission.core.models import ObjectRef
from admission.operator.cache import ASSUME_SECONDS, DELETED_SECONDS, OperatorCache
from admission.operator.reading import CacheReader
from tests.support.builders import pod_group
from tests.support.clock import FakeClock

NS = "team"


def cache_and_clock() -> tuple[OperatorCache, FakeClock]:
    clock = FakeClock()
    return OperatorCache(None, clock), clock  # type: ignore[arg-type]  # no API: events are applied by hand


def version(obj: dict[str, Any], resource_version: int, uid: str | None = "uid-1") -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = str(resource_version)
    if uid is None:
        obj["metadata"].pop("uid", None)
    else:
        obj["metadata"]["uid"] = uid
    return obj


def names(cache: OperatorCache, kind: str = "PodGroup") -> list[str]:
    return [o["metadata"]["name"] for o in cache.objects(kind)]


def group(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return pod_group("g", 2, "lq", namespace=NS, status=status)


def test_a_write_answered_after_the_delete_event_is_not_assumed() -> None:
    cache, clock = cache_and_clock()
    pods = cache.reflectors["PodGroup"]
    pods.apply_event("ADDED", version(group(), 10))
    # The operator's status write was applied at 11; the object was deleted at 12, and the watch
    # delivered that before the write's answer came back.
    pods.apply_event("DELETED", version(group(), 12))
    assert cache.assume("PodGroup", version(group({"phase": "Admitted"}), 11)) is False
    assert names(cache) == []
    clock.advance(ASSUME_SECONDS / 2)
    assert names(cache) == []
    assert cache.assumed("PodGroup") == {}


def test_the_reader_does_not_see_a_deleted_object_assumed_late() -> None:
    cache, _ = cache_and_clock()
    reader = CacheReader(cache, gates_for("1.35"))
    pods = cache.reflectors["PodGroup"]
    pods.apply_event("ADDED", version(group(), 10))
    assert [g.key for g in reader.read().cycle.groups] == [f"{NS}/g"]
    pods.apply_event("DELETED", version(group(), 12))
    cache.assume("PodGroup", version(group({"phase": "Admitted"}), 11))
    reading = reader.read()
    assert reading.cycle.groups == ()
    assert ObjectRef("PodGroup", NS, "g") not in reading.manifests


def test_a_term_listing_older_than_a_delete_event_does_not_bring_it_back() -> None:
    cache, _ = cache_and_clock()
    pods = cache.reflectors["PodGroup"]
    pods.apply_event("ADDED", version(group(), 10))
    pods.apply_event("DELETED", version(group(), 12))
    cache.assume("PodGroup", version(group(), 10))  # what a list made before the deletion answered
    assert names(cache) == []


def test_an_object_assumed_before_its_deletion_goes_with_it() -> None:
    cache, _ = cache_and_clock()
    pods = cache.reflectors["PodGroup"]
    pods.apply_event("ADDED", version(group(), 10))
    assert cache.assume("PodGroup", version(group({"phase": "Admitted"}), 11)) is True
    assert names(cache) == ["g"]
    pods.apply_event("DELETED", version(group(), 12))
    assert names(cache) == []


def test_a_recreated_object_of_the_same_name_is_assumed() -> None:
    cache, _ = cache_and_clock()
    pods = cache.reflectors["PodGroup"]
    pods.apply_event("ADDED", version(group(), 10))
    pods.apply_event("DELETED", version(group(), 12))
    # A label-defined group's PodGroup created again (Writer.ensure_pod_group): a new uid.
    assert cache.assume("PodGroup", version(group(), 13, uid="uid-2")) is True
    assert names(cache) == ["g"]
    # Still: the old one's late answer is refused, whatever its version.
    cache.reflectors["PodGroup"].apply_event("ADDED", version(group(), 14, uid="uid-2"))
    assert cache.assume("PodGroup", version(group({"phase": "Admitted"}), 11)) is False
    assert [o["metadata"]["uid"] for o in cache.objects("PodGroup")] == ["uid-2"]


def test_without_uids_the_resource_version_decides() -> None:
    cache, _ = cache_and_clock()
    pods = cache.reflectors["PodGroup"]
    pods.apply_event("ADDED", version(group(), 10, uid=None))
    pods.apply_event("DELETED", version(group(), 12, uid=None))
    assert cache.assume("PodGroup", version(group(), 12, uid=None)) is False
    assert cache.assume("PodGroup", version(group(), 11, uid="uid-1")) is False
    assert names(cache) == []
    assert cache.assume("PodGroup", version(group(), 13, uid=None)) is True  # created after the deletion
    assert names(cache) == ["g"]


def test_deletions_are_remembered_for_a_short_time_only() -> None:
    cache, clock = cache_and_clock()
    pods = cache.reflectors["PodGroup"]
    for index in range(50):
        obj = pod_group(f"g{index}", 1, "lq", namespace=NS)
        pods.apply_event("ADDED", version(obj, 100 + index, uid=f"uid-{index}"))
        pods.apply_event("DELETED", version(obj, 200 + index, uid=f"uid-{index}"))
    clock.advance(DELETED_SECONDS / 2)
    late = version(pod_group("g0", 1, "lq", namespace=NS), 150, uid="uid-0")
    assert cache.assume("PodGroup", late) is False
    clock.advance(DELETED_SECONDS / 2 + 1)
    assert cache.assume("PodGroup", late) is True  # too late to be an answer to a write made before
    assert cache._deleted["PodGroup"] == {} and not cache._expiring


def test_deletions_of_one_kind_do_not_refuse_another() -> None:
    cache, _ = cache_and_clock()
    cache.reflectors["PodGroup"].apply_event("ADDED", version(group(), 10))
    cache.reflectors["PodGroup"].apply_event("DELETED", version(group(), 12))
    member = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g", "namespace": NS, "uid": "uid-1",
                                                              "resourceVersion": "11"}, "spec": {}}
    assert cache.assume("Pod", member) is True
