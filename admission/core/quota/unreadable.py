"""Objects the admission cycle reads but cannot parse, and what each one can still affect.

One bad object affects only what uses it: a QuotaUnit the queues that quote it, a LocalQueue the groups
that name it, a ClusterQueue the groups of its LocalQueues, a PodGroup its own group. Where a bad object
may hold quota, the usage it holds is unknown, and so is the room of the queues that depend on it: a
PodGroup recorded Admitted or Running makes the usage of its ClusterQueue (and that queue's cohort)
unknown; a ClusterQueue that holds admissions makes its cohort's unknown (what it borrows is not known).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from admission.core.errors import DraqError
from admission.core.models import ObjectRef
from admission.core.quota.accounting import QueueState
from admission.core.quota.podgroup import Phase
from admission.core.quota.seal import UnsealedRecord

_HOLDS_NOTHING = frozenset({Phase.PENDING.value, Phase.FINISHED.value, Phase.EVICTED.value})


@dataclass(frozen=True, slots=True)
class Unreadable:
    """An object that does not parse: which one, why, and where it may still hold quota."""

    kind: str
    key: str  # `name`, or `namespace/name`
    reason: str  # the parser's message: the object, the field and why
    # A PodGroup whose record may hold quota: its ClusterQueue ("" holds none; None: cannot tell which).
    holds_quota_in: str | None = ""
    # A ClusterQueue: the cohort it declares ("" none; None: cannot tell).
    cohort: str | None = ""
    unsealed: bool = False  # a PodGroup that parses but whose record draq cannot trace to its own writes

    @property
    def label(self) -> str:
        return f"{self.kind} {self.key}"

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef.of(self.kind, self.key)


def unreadable(kind: str, manifest: Mapping[str, Any], error: DraqError) -> Unreadable:
    """What is known of an object whose parser failed with `error`, read leniently from its manifest."""
    meta = _map(manifest.get("metadata"))
    name = meta.get("name") if isinstance(meta.get("name"), str) else "(unnamed)"
    namespace = meta.get("namespace")
    key = f"{namespace}/{name}" if isinstance(namespace, str) and namespace else str(name)
    if kind == "PodGroup":
        status = _map(manifest.get("status"))
        # A record draq cannot trace may say Finished or Pending over an admission it holds: its phase is
        # not believed, only a ClusterQueue it names narrows where it may hold quota.
        held = _named_queue(status) if isinstance(error, UnsealedRecord) else _held_in(status)
        return Unreadable(kind, key, str(error), holds_quota_in=held, unsealed=isinstance(error, UnsealedRecord))
    if kind == "ClusterQueue":
        cohort = _map(manifest.get("spec")).get("cohort", "")
        return Unreadable(kind, key, str(error), cohort=cohort if isinstance(cohort, str) else None)
    return Unreadable(kind, key, str(error))


def _held_in(status: Mapping[str, Any]) -> str | None:
    phase = status.get("phase", Phase.PENDING.value)
    if isinstance(phase, str) and phase in _HOLDS_NOTHING:
        return ""
    return _named_queue(status)


def _named_queue(status: Mapping[str, Any]) -> str | None:
    queue = status.get("clusterQueue")
    return queue if isinstance(queue, str) and queue else None


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def with_unreadable(state: QueueState, items: Iterable[Unreadable]) -> QueueState:
    """`state` with the usage marked unknown wherever an unreadable object may hold quota."""
    for item in items:
        for queue, why in _unknown_usage(state, item):
            state = state.with_unknown_usage(queue, why)
    return state


def _unknown_usage(state: QueueState, item: Unreadable) -> list[tuple[str, str]]:
    if item.kind == "PodGroup" and item.holds_quota_in != "":
        why = (f"{item.label} carries a record draq did not write, and what draq last sealed for it is not known "
               f"in this process ({item.reason})" if item.unsealed
               else f"{item.label} records an admission that cannot be read ({item.reason})")
        return [(queue, why) for queue in ([item.holds_quota_in] if item.holds_quota_in else sorted(state.queues))]
    if item.kind == "ClusterQueue" and item.cohort != "" and state.groups_of(item.key):
        cohort = f"cohort {item.cohort}" if item.cohort else "an unreadable cohort"
        why = (f"{item.label} of {cohort} holds admissions but cannot be read ({item.reason}), so what it "
               "borrows from the cohort is unknown")
        return [(name, why) for name, queue in sorted(state.queues.items())
                if queue.cohort is not None and item.cohort in (None, queue.cohort)]
    return []
