"""The groups the webhook let start and whose PodGroup it has not seen yet.

The operator writes a group's PodGroup a pass after its first pod; during a burst of pod creations the
LocalQueue's count of pending groups would be behind by every group created since, and a flood could pass
the cap by thousands. Each group an allowed pod CREATE starts (`core.review.started_group`) is counted
pending here until its PodGroup is in the cache, or for `memory` seconds (a pod the API server did not
store after all, e.g. refused by a later webhook, stops counting then; it is longer than the operator may take
to write a flood's PodGroups). The groups kept are at most the
caps of the LocalQueues they were let into.
"""

from __future__ import annotations

from collections.abc import Callable

from admission.kube.clock import SYSTEM_CLOCK, Clock

STARTED_MEMORY_SECONDS = 600.0  # longer than the operator's pass can take under a flood on a loaded API server
PRUNE_ABOVE = 50_000  # groups kept before the expired ones of every LocalQueue are dropped


class StartedGroups:
    def __init__(self, clock: Clock = SYSTEM_CLOCK, memory: float = STARTED_MEMORY_SECONDS) -> None:
        self._clock = clock
        self._memory = memory
        self._by_queue: dict[tuple[str, str], dict[str, float]] = {}  # (namespace, LocalQueue) -> group -> when
        self._queue_of: dict[tuple[str, str], str] = {}  # (namespace, group) -> LocalQueue

    def __len__(self) -> int:
        return len(self._queue_of)

    def note(self, namespace: str, queue: str, group: str) -> None:
        """An allowed pod started `group` in the LocalQueue `queue`."""
        if (namespace, group) in self._queue_of:
            return
        if len(self._queue_of) >= PRUNE_ABOVE:
            for key in list(self._by_queue):
                self.unseen(*key, seen=lambda group: False)
        self._queue_of[(namespace, group)] = queue
        self._by_queue.setdefault((namespace, queue), {})[group] = self._clock.monotonic()

    def queue_of(self, namespace: str, group: str) -> str | None:
        """The LocalQueue of a group started recently, None for any other."""
        queue = self._queue_of.get((namespace, group))
        if queue is None:
            return None
        since = self._by_queue.get((namespace, queue), {}).get(group)
        return queue if since is not None and self._clock.monotonic() - since < self._memory else None

    def unseen(self, namespace: str, queue: str, seen: Callable[[str], bool]) -> int:
        """How many groups started in the LocalQueue are not `seen` (their PodGroup is not cached yet); those
        seen or older than the memory are forgotten."""
        groups = self._by_queue.get((namespace, queue))
        if not groups:
            return 0
        oldest = self._clock.monotonic() - self._memory
        for group in [g for g, since in groups.items() if since <= oldest or seen(g)]:
            del groups[group]
            del self._queue_of[(namespace, group)]
        if not groups:
            del self._by_queue[(namespace, queue)]
        return len(groups)
