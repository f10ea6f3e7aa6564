"""One allocator asked about many nodes keeps each claim's request checks and skips a search that is sure
to fail at once (the first request finds every device of the node in use): its answers are exactly those
of a fresh allocator asked once."""

from __future__ import annotations

import pytest

from admission.core import features
from admission.core.allocator import Allocator, Outcome
from tests.support.builders import (
    DRIVER,
    claim,
    device_class,
    exactly,
    first_available,
    holding,
    node,
)
from tests.unit.allocator.builders import allocator, gpus

NODES = ("n1", "n2", "n3")


def answer(outcome: Outcome) -> tuple[object, ...]:
    return outcome.status, outcome.message, outcome.missing_class, outcome.gave_up, dict(outcome.allocations)


def cluster(*claims: dict[str, object], gates: features.FeatureGates) -> Allocator:
    return allocator(*(node(n) for n in NODES), device_class(), device_class("other", expression="true"),
                     *(gpus(n, 2) for n in NODES),
                     claim("full-n1", exactly(count=2), allocation=holding(f"{DRIVER}/n1/gpu-0", f"{DRIVER}/n1/gpu-1")),
                     claim("half-n2", exactly(count=1), allocation=holding(f"{DRIVER}/n2/gpu-0")),
                     *claims, gates=gates)


CLAIMS = {
    "one": claim("one", exactly(count=1)),
    "two": claim("two", exactly(count=2)),
    "selector fails": claim("bad", exactly(count=1, selector='device.attributes["x"].missing == 1')),
    "admin": claim("admin", exactly(count=1, admin_access=True)),
    "first available": claim("fa", first_available("gpu", exactly("big", count=2), exactly("small", count=1))),
    "missing class": claim("missing", exactly(count=1, device_class="nope")),
    "too many": claim("many", exactly(count=40)),
}


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.36"])
@pytest.mark.parametrize("names", [("one",), ("two",), ("selector fails",), ("admin",), ("first available",),
                                   ("missing class",), ("too many",), ("one", "two"), ("one", "selector fails"),
                                   ("two", "too many"), ("admin", "one")])
def test_a_kept_allocator_answers_as_a_fresh_one(version: str, names: tuple[str, ...]) -> None:
    gates = features.exactly(version, ["DRAAdminAccess", "DRAPrioritizedList"])
    kept = cluster(*CLAIMS.values(), gates=gates)
    claims = [kept.snapshot.claims[f"default/{CLAIMS[n]['metadata']['name']}"] for n in names]
    for _ in range(2):
        for name in (*NODES, *reversed(NODES)):
            fresh = cluster(*CLAIMS.values(), gates=gates)
            fresh_claims = [fresh.snapshot.claims[c.key] for c in claims]
            assert answer(kept.allocate(name, claims)) == answer(fresh.allocate(name, fresh_claims))


def test_a_described_object_is_its_repr_and_equal_specs_are_described_alike() -> None:
    alloc = cluster(claim("a", exactly(count=2)), claim("b", exactly(count=2)), claim("c", exactly(count=1)),
                    gates=features.exactly("1.36", []))
    a, b, c = (alloc.snapshot.claims[f"default/{name}"].spec for name in "abc")
    assert a is not b
    assert alloc.described(a) == repr(a) == alloc.described(b)
    assert alloc.described(c) == repr(c) != alloc.described(a)
    assert alloc.described(a) is alloc.described(a)  # kept, not worked out again
