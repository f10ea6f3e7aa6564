"""The webhook's pending-group counts kept from the PodGroup store's changes equal a count of the whole store."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from admission.webhook.cache import WEBHOOK_RESOURCES, WebhookCache
from admission.webhook.pending import pending_counts
from tests.unit.webhook.test_cache import FakeApi

[(_, PROJECT)] = [w for w in WEBHOOK_RESOURCES if w[0].kind == "PodGroup"]
PHASES = (None, "Pending", "Evicted", "Admitted", "Running", "Finished")


def pod_group(namespace: str, name: str, queue: str, phase: str | None) -> dict[str, Any]:
    return PROJECT({"metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}"},
                    "spec": {"queue": queue, "minMember": 1}, "status": {"phase": phase} if phase else {}})


EVENT = st.tuples(st.sampled_from(("ADDED", "MODIFIED", "DELETED", "RELIST", "COUNT")),
                  st.sampled_from(("a", "b")), st.sampled_from(("g1", "g2", "g3", "g4")),
                  st.sampled_from(("q1", "q2")), st.sampled_from(PHASES))


@settings(max_examples=200, deadline=None)
@given(st.lists(EVENT, max_size=40))
def test_kept_counts_equal_a_count_of_the_whole_store(events: list[tuple[str, str, str, str, str | None]]) -> None:
    cache = WebhookCache(FakeApi())  # type: ignore[arg-type]
    reflector = cache.reflectors["PodGroup"]
    for kind, namespace, name, queue, phase in events:
        if kind == "COUNT":
            assert cache._live_pending(namespace, queue) == pending_counts(reflector.store.values()).get(
                (namespace, queue), 0)
        elif kind == "RELIST":
            reflector.store = {key: obj for key, obj in reflector.store.items() if key[1] != name}
            reflector._relist()
        else:
            reflector.apply_event(kind, pod_group(namespace, name, queue, phase))
    assert cache._pending is not None
    assert dict(cache._pending.current()) == pending_counts(reflector.store.values())


def test_a_flood_of_status_writes_moves_one_count_each() -> None:
    cache = WebhookCache(FakeApi())  # type: ignore[arg-type]
    reflector = cache.reflectors["PodGroup"]
    for i in range(50):
        reflector.apply_event("ADDED", pod_group("abuse", f"g{i}", "lq", "Pending"))
    assert cache._live_pending("abuse", "lq") == 50
    reflector.apply_event("MODIFIED", pod_group("abuse", "g0", "lq", "Admitted"))
    reflector.apply_event("DELETED", pod_group("abuse", "g1", "lq", "Pending"))
    assert cache._live_pending("abuse", "lq") == 48
    assert cache._pending is not None and cache._pending.counts == {("abuse", "lq"): 48}
