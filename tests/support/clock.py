"""A clock that moves only when told to (or when slept on), for the shell's timing logic."""

from __future__ import annotations

import asyncio
import datetime as dt

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class FakeClock:
    def __init__(self, start: dt.datetime = START) -> None:
        self._start = start
        self._elapsed = 0.0
        self.sleeps: list[float] = []

    def now(self) -> dt.datetime:
        return self._start + dt.timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    def advance(self, seconds: float) -> None:
        self._elapsed += seconds

    async def sleep(self, seconds: float) -> None:
        """Moves time on at once, and yields to other tasks."""
        self.sleeps.append(seconds)
        self._elapsed += max(seconds, 0.0)
        await asyncio.sleep(0)
