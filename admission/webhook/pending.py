"""Pending PodGroups per LocalQueue, as the webhook's cap on pending groups counts them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from admission.kube.reflector import Key, Reflector

PENDING_PHASES = frozenset({"Pending", "Evicted"})

QueueKey = tuple[str, str]  # (namespace, LocalQueue)


def pending_queue(pod_group: Mapping[str, Any] | None) -> QueueKey | None:
    """The LocalQueue a PodGroup waits in, when it is pending."""
    if pod_group is None or (pod_group.get("status") or {}).get("phase") not in PENDING_PHASES:
        return None
    return (pod_group["metadata"].get("namespace") or "", (pod_group.get("spec") or {}).get("queue") or "")


def pending_counts(pod_groups: Iterable[Mapping[str, Any]]) -> dict[QueueKey, int]:
    """Pending PodGroups by namespace and LocalQueue."""
    counts: dict[QueueKey, int] = {}
    for group in pod_groups:
        queue = pending_queue(group)
        if queue is not None:
            counts[queue] = counts.get(queue, 0) + 1
    return counts


class PendingTally:
    """`pending_counts` of a PodGroup reflector's store, kept from the store's changes (the reflector's
    `take_changes`, whose one reader this is): while a flood's records are written, each write moves one
    count instead of a recount of every PodGroup on the next review."""

    def __init__(self, reflector: Reflector) -> None:
        self._reflector = reflector
        reflector.track_changes = True
        self._generation = -1
        self._queue_of: dict[Key, QueueKey] = {}
        self.counts: dict[QueueKey, int] = {}

    def current(self) -> Mapping[QueueKey, int]:
        """The counts as the store is now."""
        reflector = self._reflector
        if reflector.generation == self._generation:
            return self.counts
        self._generation = reflector.generation
        relisted, dirty = reflector.take_changes()
        if relisted:
            self._queue_of = {key: queue for key, group in reflector.store.items()
                              if (queue := pending_queue(group)) is not None}
            self.counts = pending_counts(reflector.store.values())
            return self.counts
        for key in dirty:
            self._move(key, pending_queue(reflector.store.get(key)))
        return self.counts

    def _move(self, key: Key, queue: QueueKey | None) -> None:
        before = self._queue_of.pop(key, None)
        if before is not None:
            left = self.counts[before] - 1
            if left:
                self.counts[before] = left
            else:
                del self.counts[before]
        if queue is not None:
            self._queue_of[key] = queue
            self.counts[queue] = self.counts.get(queue, 0) + 1
