"""The one clock of the shell: wall time for timestamps written to the API, monotonic time for
intervals, and sleeping. Injected into the operator, leader election and certificate rotation, so
their timing can be tested without waiting."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Protocol

TIMESTAMP = "%Y-%m-%dT%H:%M:%SZ"
MICRO_TIMESTAMP = "%Y-%m-%dT%H:%M:%S.%fZ"


class Clock(Protocol):
    def now(self) -> dt.datetime:
        """The wall time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM_CLOCK: Clock = SystemClock()


def timestamp(moment: dt.datetime) -> str:
    """metav1.Time, as written in status fields and Events."""
    return moment.astimezone(dt.UTC).strftime(TIMESTAMP)


def micro_timestamp(moment: dt.datetime) -> str:
    """metav1.MicroTime, as in a Lease's renewTime."""
    return moment.astimezone(dt.UTC).strftime(MICRO_TIMESTAMP)
