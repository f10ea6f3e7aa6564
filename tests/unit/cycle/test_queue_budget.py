"""Per LocalQueue and cycle, the cycle considers at most `queue_budget` pending groups (its head, in order)
and stops evaluating after `queue_misses` of them are not admitted: the rest of that queue waits
unevaluated, and other LocalQueues are served as usual."""

from __future__ import annotations

from dataclasses import replace

from admission.core.cycle import Admit, Wait, WaitReason, run_cycle
from admission.core.quota import LocalQueue
from tests.support.builders import local_queue, models
from tests.unit.cycle.cycle_builders import LOCAL_QUEUES, cycle_input, gang, gpu_node, gpu_queue

QUEUES: tuple[LocalQueue, ...] = (*LOCAL_QUEUES, *models(local_queue("other", "main", "team")))
BEHIND = ("waits behind groups that come first in LocalQueue team/lq: each cycle considers at most 4 pending "
          "groups of a LocalQueue and stops after 2 of them are not admitted; this group is considered once those "
          "ahead of it are admitted or leave")


def test_groups_past_the_misses_or_the_head_of_their_local_queue_wait_unevaluated() -> None:
    # Six groups of `lq` that can never fit (9 GPUs on a 4-GPU node), then one of `other` that fits.
    objects = [*gpu_node("n1")]
    for i in range(6):
        objects += gang(f"big-{i}", 1, 9, created=f"2026-01-01T00:00:0{i}Z")
    objects += gang("small", 1, 2, queue="other", created="2026-01-01T00:01:00Z")
    cycle = replace(cycle_input(objects, [gpu_queue("main", 16)], QUEUES), queue_budget=4, queue_misses=2)
    result = run_cycle(cycle)
    reasons = {d.group: d.reason for d in result.decisions if isinstance(d, Wait)}
    assert reasons == {"team/big-0": WaitReason.NEVER_FITS, "team/big-1": WaitReason.NEVER_FITS,
                       **{f"team/big-{i}": WaitReason.BEHIND for i in range(2, 6)}}
    assert [d.group for d in result.decisions if isinstance(d, Admit)] == ["team/small"]
    for name in ("team/big-2", "team/big-5"):  # past the misses, and past the head: one message
        behind = result.decision(name)
        assert isinstance(behind, Wait) and behind.message == BEHIND and behind.cluster_queue == "main"


def test_admitted_groups_are_not_misses() -> None:
    objects = [*gpu_node("n1", gpus=8)]
    for i in range(4):
        objects += gang(f"g{i}", 1, 1, created=f"2026-01-01T00:00:0{i}Z")
    cycle = replace(cycle_input(objects, [gpu_queue("main", 16)], QUEUES), queue_budget=4, queue_misses=1)
    assert [d.group for d in run_cycle(cycle).admitted] == ["team/g0", "team/g1", "team/g2", "team/g3"]
