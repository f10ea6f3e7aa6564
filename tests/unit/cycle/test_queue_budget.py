"""The cycle evaluates at most `queue_budget` pending groups per LocalQueue: the rest of that queue waits
unevaluated, and other LocalQueues are served as usual."""

from __future__ import annotations

from dataclasses import replace

from admission.core.cycle import Admit, Wait, WaitReason, run_cycle
from admission.core.quota import LocalQueue
from tests.support.builders import local_queue, models
from tests.unit.cycle.cycle_builders import LOCAL_QUEUES, cycle_input, gang, gpu_node, gpu_queue

QUEUES: tuple[LocalQueue, ...] = (*LOCAL_QUEUES, *models(local_queue("other", "main", "team")))


def test_groups_past_the_budget_of_their_local_queue_wait_behind_it_unevaluated() -> None:
    # Five groups of `lq` that can never fit (9 GPUs on a 4-GPU node), then one of `other` that fits.
    objects = [*gpu_node("n1")]
    for i in range(5):
        objects += gang(f"big-{i}", 1, 9, created=f"2026-01-01T00:00:0{i}Z")
    objects += gang("small", 1, 2, queue="other", created="2026-01-01T00:01:00Z")
    result = run_cycle(replace(cycle_input(objects, [gpu_queue("main", 16)], QUEUES), queue_budget=2))
    reasons = {d.group: d.reason for d in result.decisions if isinstance(d, Wait)}
    assert reasons == {"team/big-0": WaitReason.DEVICES, "team/big-1": WaitReason.DEVICES,
                       "team/big-2": WaitReason.BEHIND, "team/big-3": WaitReason.BEHIND,
                       "team/big-4": WaitReason.BEHIND}
    assert [d.group for d in result.decisions if isinstance(d, Admit)] == ["team/small"]
    behind = result.decision("team/big-4")
    assert isinstance(behind, Wait) and behind.message == (
        "behind 2 groups of LocalQueue team/lq that come first in its order; draq evaluates at most 2 pending "
        "groups of a LocalQueue per cycle, and this one when those ahead of it are admitted or leave")
    assert behind.cluster_queue == "main"


def test_admitted_groups_count_against_the_budget_too() -> None:
    objects = [*gpu_node("n1", gpus=8)]
    for i in range(3):
        objects += gang(f"g{i}", 1, 1, created=f"2026-01-01T00:00:0{i}Z")
    result = run_cycle(replace(cycle_input(objects, [gpu_queue("main", 16)], QUEUES), queue_budget=2))
    assert [d.group for d in result.admitted] == ["team/g0", "team/g1"]
    waiting = result.decision("team/g2")
    assert isinstance(waiting, Wait) and waiting.reason is WaitReason.BEHIND
