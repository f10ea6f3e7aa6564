"""Fair sharing: weighted dominant shares, and the admission order they give at equal priority."""

from __future__ import annotations

from fractions import Fraction

from admission.core.cycle import Admit
from admission.core.quota.fairshare import dominant_share
from tests.unit.cycle.cycle_builders import NS
from tests.unit.preemption.scenes import Scene, queue


def cohort(weight_a: str = "1") -> Scene:
    """Queues `qa` and `qb` of 8 GPUs each in one cohort; `qa` runs 8 GPUs on node a; node b is free and
    each queue has one 8-GPU group waiting."""
    scene = Scene().nodes(["a", "b"])
    scene.cluster_queue(queue("qa", 8, cohort="pool", weight=weight_a))
    scene.cluster_queue(queue("qb", 8, cohort="pool"))
    scene.running("busy", "qa", [("a", 8)])
    return scene.waiting("wa", "qa", 1, 8).waiting("wb", "qb", 1, 8)


def test_shares_are_usage_over_the_cohorts_nominal_divided_by_the_weight() -> None:
    cycle = cohort("4").cycle_input()
    assert dominant_share(cycle.state, "qa") == (0, Fraction(8, 16) / 4)
    assert dominant_share(cycle.state, "qb") == (0, 0)
    assert dominant_share(cohort("0").cycle_input().state, "qa") == (1, Fraction(1, 2))


def test_at_equal_priority_the_queue_with_the_lower_share_is_served_first() -> None:
    _, result, _ = cohort().run()
    # Names alone would put qa first; its share (8 of the cohort's 16) is higher than qb's (0).
    assert isinstance(result.decision(f"{NS}/wb"), Admit)
    assert not isinstance(result.decision(f"{NS}/wa"), Admit)
