"""Why-not explanations count matching, free and blocked devices per request."""

from __future__ import annotations

import random
from typing import Any

from admission.core import features
from admission.core.allocator import Allocator, Explanation, explain, explain_best
from admission.core.models import ResourceClaim
from tests.support.builders import DRIVER, claim, device_class, exactly, first_available, holding, node
from tests.unit.allocator.builders import allocator, gpus


def test_counts_matched_free_and_in_use_devices() -> None:
    selector = [{"cel": {"expression": f'device.attributes["{DRIVER}"].index < 3'}}]
    alloc = allocator(node("n1"), device_class(), gpus("n1", 4), claim("c", exactly(count=3, selectors=selector)),
                      claim("old", allocation=holding(f"{DRIVER}/n1/gpu-1")))
    explanation = explain(alloc, "n1", [alloc.snapshot.claims["default/c"]])
    (only,) = explanation.requests
    assert (only.matched, only.free, only.blocked, only.short_by) == (3, 2, {"in use": 1}, 1)
    assert "wants 3, 3 matched the selectors, 2 free (1 in use)" in "\n".join(explanation.lines())


def test_a_missing_class_is_a_note_not_a_crash() -> None:
    alloc = allocator(node("n1"), gpus("n1", 1), claim("c", exactly(device_class="nope")))
    explanation = explain(alloc, "n1", [alloc.snapshot.claims["default/c"]])
    assert explanation.requests == ()
    assert any("could not retrieve device class nope" in n for n in explanation.notes)


def _best_of_all(alloc: Allocator, nodes: list[str], claims: list[ResourceClaim]) -> Explanation:
    """The first node of the highest score, every node explained (what `explain_best` must match)."""
    explained = [explain(alloc, n, claims) for n in nodes]
    top = max(e.score for e in explained)
    return next(e for e in explained if e.score == top)


def _random_scene(rng: random.Random) -> tuple[Allocator, list[str], list[ResourceClaim]]:
    names = [f"n{i}" for i in range(rng.randint(2, 7))]
    manifests: list[dict[str, Any]] = [device_class()]
    held = 0
    for name in names:
        size = rng.randint(0, 5)
        manifests += [node(name), gpus(name, size)]
        for index in rng.sample(range(size), rng.randint(0, size)):
            held += 1
            manifests.append(claim(f"held-{held}", allocation=holding(f"{DRIVER}/{name}/gpu-{index}")))
    selector = rng.choice([None, f'device.attributes["{DRIVER}"].index < 3'])
    requests = [exactly("a", count=rng.randint(1, 4), selector=selector),
                first_available("b", exactly("big", count=rng.randint(2, 5)), exactly("small", count=1))]
    manifests.append(claim("c", *rng.sample(requests, rng.randint(1, 2))))
    if rng.random() < 0.3:
        manifests.append(claim("admin", exactly(count=2, adminAccess=True)))
    alloc = allocator(*manifests, gates=features.exactly("1.36", ["DRAPrioritizedList", "DRAAdminAccess"]))
    claims = [alloc.snapshot.claims[k] for k in ("default/c", "default/admin") if k in alloc.snapshot.claims]
    return alloc, names, claims


def test_the_best_node_is_the_first_of_the_highest_score_when_nodes_are_skipped() -> None:
    for seed in range(300):
        rng = random.Random(seed)
        alloc, names, claims = _random_scene(rng)
        order = rng.sample(names, len(names))
        expected = _best_of_all(alloc, order, claims)
        assert explain_best(alloc, order, claims) == expected, seed
        # A second call with the claims' requests known before any node: the bound is used from the first node on.
        assert explain_best(alloc, order, claims) == expected, seed
