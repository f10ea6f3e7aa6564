"""Python's cycle collector and the operator's heap.

The cache, the parsed models and the snapshot are hundreds of thousands of long-lived objects (millions
with thousands of pending groups). The collector walks all of them in each full collection, which the
allocations of a few passes trigger: with 6,000 groups pending, 0.2–0.8 s a time, on the loop or in the
cycle's thread, while another tenant's group waits. After each pass the objects alive are moved out of
the collector's view (`gc.freeze`), once a young collection has freed the pass's own cyclic garbage;
objects that lose their last reference are still freed at once (reference counting). Cyclic garbage
among frozen objects waits for the full collection made every `FULL_COLLECTION_SECONDS`, which unfreezes
everything first: the heap cannot grow without bound.
"""

from __future__ import annotations

import gc

from admission.kube.clock import SYSTEM_CLOCK, Clock

FULL_COLLECTION_SECONDS = 600.0


class HeapKeeper:
    """Called after each pass of the admission loop (`after_pass`)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, full_seconds: float = FULL_COLLECTION_SECONDS) -> None:
        self._clock = clock
        self._full_seconds = full_seconds
        self._full_due = clock.monotonic() + full_seconds

    def after_pass(self) -> None:
        now = self._clock.monotonic()
        if now >= self._full_due:
            gc.unfreeze()
            gc.collect()
            self._full_due = now + self._full_seconds
        else:
            gc.collect(1)  # the young generations only: what this pass left behind
        gc.freeze()
