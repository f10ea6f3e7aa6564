"""Which Events the writer posts: one per object and reason, updated with a count, and rate-limited.

An object that says the same thing again (a group waiting for the same reason, evicted again) updates its
Event (count, lastTimestamp, message) at most once per `update_interval`; the repeats between are counted
in the next update. New Events are limited per namespace (a bucket of `burst` refilled at `per_second`):
one tenant's thousands of groups cannot make thousands of Events a minute, and past the limit an Event is
skipped (the PodGroup's status still says why it waits). The book remembers at most `capacity` Events,
the least recently used forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

EventKey = tuple[str, str, str, str, str]
"""namespace, kind, name, uid of the object, reason"""


@dataclass
class Posted:
    name: str  # the Event's own name
    count: int
    first: str  # firstTimestamp
    written: float  # monotonic time of the last write
    unsent: int = 0  # repeats since the last write


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass(frozen=True, slots=True)
class EventLimits:
    update_interval: float = 60.0
    burst: int = 20
    per_second: float = 0.2
    capacity: int = 20_000


class EventBook:
    def __init__(self, limits: EventLimits = EventLimits()) -> None:
        self.limits = limits
        self._posted: OrderedDict[EventKey, Posted] = OrderedDict()
        self._buckets: dict[str, _Bucket] = {}
        self.skipped = 0  # new Events not posted for the namespace limit

    def posted(self, key: EventKey) -> Posted | None:
        found = self._posted.get(key)
        if found is not None:
            self._posted.move_to_end(key)
        return found

    def due(self, posted: Posted, now: float) -> bool:
        """An update is due (else the repeat is only counted)."""
        if now - posted.written >= self.limits.update_interval:
            return True
        posted.unsent += 1
        return False

    def may_create(self, namespace: str, now: float) -> bool:
        bucket = self._buckets.setdefault(namespace, _Bucket(float(self.limits.burst), now))
        bucket.tokens = min(float(self.limits.burst), bucket.tokens + (now - bucket.at) * self.limits.per_second)
        bucket.at = now
        if bucket.tokens < 1:
            self.skipped += 1
            return False
        bucket.tokens -= 1
        return True

    def remember(self, key: EventKey, posted: Posted) -> None:
        self._posted[key] = posted
        self._posted.move_to_end(key)
        while len(self._posted) > self.limits.capacity:
            self._posted.popitem(last=False)

    def forget(self, key: EventKey) -> None:
        self._posted.pop(key, None)
