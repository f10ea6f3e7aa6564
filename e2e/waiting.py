"""Polling helpers for e2e tests: wait for a condition on live objects, with a clear timeout message.

Wait for the state a test asserts, not for the first state that appears: objects pass through
intermediate states (a PodGroup says "1 of 2 members exist" before it says why quota refuses it), and
on a loaded machine a test can see any of them. Give `accept` the asserted condition; on a timeout
the message names what was awaited and the last value seen, so a failure shows which state came
instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(what: str, probe: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.1,
          *, accept: Callable[[T], object] | None = None) -> T:
    """Call `probe` until its value is accepted, and return that value.

    Without `accept` a truthy value is accepted; with it, a value for which `accept(value)` is true
    (`None` is never accepted). Fails naming `what` and the last value seen.
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last is not None and (accept(last) if accept is not None else last):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last seen: {last!r}")
