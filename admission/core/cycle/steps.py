"""Time spent in the steps of one cycle (the allocator, charging), measured on a clock the shell injects.

The core reads no clock of its own: without a timer nothing is measured and every total is zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

ALLOCATOR = "allocator"
CHARGING = "charging"
STEPS = (ALLOCATOR, CHARGING)


class StepTimer:
    """Adds up the seconds spent in each named step."""

    def __init__(self, timer: Callable[[], float] | None) -> None:
        self._timer = timer
        self._totals = dict.fromkeys(STEPS, 0.0)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        if self._timer is None:
            yield
            return
        started = self._timer()
        try:
            yield
        finally:
            self._totals[name] = self._totals.get(name, 0.0) + self._timer() - started

    def totals(self) -> Mapping[str, float]:
        return dict(self._totals)
