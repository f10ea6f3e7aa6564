"""Why-not explanations count matching, free and blocked devices per request."""

from __future__ import annotations

from admission.core.allocator import explain
from tests.support.builders import DRIVER, claim, device_class, exactly, holding, node
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
