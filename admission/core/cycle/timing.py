"""Times in PodGroup status, and the backoff of evicted groups."""

from __future__ import annotations

import datetime as dt

from admission.core.cycle.groups import GroupView
from admission.core.quota import Phase

BACKOFF_BASE = 30
BACKOFF_MAX = 1800


def backoff_seconds(evictions: int) -> int:
    """30 s after the first eviction, doubling each time, at most 30 minutes."""
    return int(min(BACKOFF_BASE * 2 ** max(evictions - 1, 0), BACKOFF_MAX))


def parse_time(text: str) -> dt.datetime | None:
    if not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def format_time(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def in_backoff(group: GroupView, now: dt.datetime) -> dt.datetime | None:
    """When an evicted group may be admitted again, if that is still in the future."""
    pod_group = group.pod_group
    if pod_group is None or pod_group.phase is not Phase.EVICTED:
        return None
    retry = parse_time(pod_group.requeue_at)
    return retry if retry is not None and retry > now else None
