"""Liveness and readiness of the admission loop, for `/healthz` and `/readyz`.

The loop marks each reconcile pass (`running_pass`); the probes ask `live` and `unready`, which the
pure core decides (`admission.core.telemetry.loop_stall`, `loop_unready`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from admission.core.telemetry import loop_stall, loop_unready
from admission.kube.clock import SYSTEM_CLOCK, Clock
from admission.kube.probes import Check

if TYPE_CHECKING:
    from admission.operator.loop import Operator

STALL_SECONDS = 120.0
"""A pass running longer than this, or changes pending this long with no pass, means the loop is stuck.
The loop runs a pass at least every resync (30 s) while it leads, so this is four missed resyncs."""


class LoopHealth:
    def __init__(self, clock: Clock = SYSTEM_CLOCK, stall_seconds: float = STALL_SECONDS) -> None:
        self.clock = clock
        self.stall_seconds = stall_seconds
        self.completed = 0  # passes that ran to their end
        self._started: float | None = None
        self._last_end = clock.monotonic()
        self._pending_since: float | None = None

    @contextmanager
    def running_pass(self) -> Iterator[None]:
        """Around one reconcile pass; a pass that raises still ends (the loop retries it)."""
        self._started = self.clock.monotonic()
        try:
            yield
            self.completed += 1
        finally:
            self._started = None
            self._last_end = self.clock.monotonic()

    def stall(self, leading: bool, changes_pending: bool) -> str:
        """Why the loop is stuck, "" when it is not. Pending changes count from the first probe that sees
        them after the last pass ended; a replica that does not lead has nothing to do."""
        now = self.clock.monotonic()
        if not (leading and changes_pending):
            self._pending_since = None
        elif self._pending_since is None or self._pending_since < self._last_end:
            self._pending_since = now
        return loop_stall(now, self._started, self._pending_since, self.stall_seconds)

    def unready(self, synced: bool, leading: bool) -> str:
        return loop_unready(synced, leading, self.completed)


def operator_checks(operator: Operator) -> tuple[Check, Check]:
    """The operator's liveness and readiness checks, for the probe port."""
    def leading() -> bool:
        return operator.elector is None or operator.elector.leading.is_set()

    def live() -> str:
        return operator.health.stall(leading(), operator.cache.changed.is_set())

    def ready() -> str:
        return operator.health.unready(operator.cache.synced, leading())

    return live, ready
