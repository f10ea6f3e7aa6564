"""A group whose claims name a DeviceClass that does not exist waits, and says which class."""

from __future__ import annotations

from admission.core.cycle import Wait, WaitReason
from tests.support.builders import Manifest, exactly, template
from tests.unit.cycle.cycle_builders import NS, cycle, gpu_node, gpu_queue, member


def missing_class_group() -> list[Manifest]:
    """One pod whose claim wants 2 GPUs and one device of a class nobody created."""
    tpl = template("tpl", exactly("gpus", count=2), exactly("nic", device_class="no-such-class"), namespace=NS)
    return [*gpu_node("node-a"), tpl, member("g-0", "g", template="tpl")]


def test_the_wait_names_the_missing_class() -> None:
    waiting = cycle(missing_class_group(), [gpu_queue("main", 16)]).decision(f"{NS}/g")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.MISSING
    assert "claim team/g-0/gpu, request nic: could not retrieve device class no-such-class" in waiting.message


def test_the_missing_class_is_the_reason_even_when_quota_would_not_fit() -> None:
    # The 2 GPUs are over the queue's quota of 1, but no quota makes the pod schedulable: the class does.
    waiting = cycle(missing_class_group(), [gpu_queue("main", 1)]).decision(f"{NS}/g")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.MISSING
    assert "device class no-such-class does not exist" in waiting.message
