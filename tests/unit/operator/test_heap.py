"""The operator's heap after each pass: alive objects moved out of the collector's view, and a full
collection, with everything unfrozen, every `full_seconds` on the injected clock."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from admission.operator.heap import HeapKeeper
from tests.support.clock import FakeClock


class Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_a_pass_freezes_what_is_alive_and_frees_its_young_cyclic_garbage() -> None:
    clock = FakeClock()
    keeper = HeapKeeper(clock, full_seconds=600)
    gc.unfreeze()
    collected: list[int] = []
    gc.callbacks.append(lambda phase, info: collected.append(info["collected"]) if phase == "stop" else None)
    try:
        Cycle()  # unreachable at once, but only the collector can free a cycle
        keeper.after_pass()
    finally:
        gc.callbacks.pop()
    assert sum(collected) >= 1
    assert gc.get_freeze_count() > 0


def test_a_full_collection_unfreezes_everything_when_it_is_due() -> None:
    clock = FakeClock()
    keeper = HeapKeeper(clock, full_seconds=600)
    keeper.after_pass()
    frozen = [Cycle()]
    keeper.after_pass()  # the list and its cycle are frozen now
    frozen.clear()  # the cycle is garbage among frozen objects: no young collection sees it
    generations: list[int] = []
    gc.callbacks.append(lambda phase, info: generations.append(info["generation"]) if phase == "start" else None)
    try:
        clock.advance(599)
        keeper.after_pass()
        assert 2 not in generations
        clock.advance(1)
        keeper.after_pass()
        assert 2 in generations
    finally:
        gc.callbacks.pop()
    assert gc.get_freeze_count() > 0
