"""Polling helpers for e2e tests: wait for a condition on live objects, with a clear timeout message."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(what: str, probe: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.1) -> T:
    """Call `probe` until it returns something truthy; fail naming `what` and the last value seen."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last  # type: ignore[return-value]
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last seen: {last!r}")
