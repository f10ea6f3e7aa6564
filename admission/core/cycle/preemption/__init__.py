"""Preemption: whom to evict so that a waiting group fits its quota and can be placed on the nodes.

`plan_preemptions(cycle, result)` runs after `run_cycle` on what it left waiting (`cycle.decide` calls
both); `find_victims` is the search for one group (see `search`); `holdings` says what each admitted
group holds; `may_preempt` and `candidates` apply a ClusterQueue's policies (`spec.preemption`);
`preempted_status` is the victim's record. Fair sharing (`quota.fairshare`) orders the reclaim candidates.
"""

from admission.core.cycle.preemption.holdings import Holding, holdings, without_devices, without_pods
from admission.core.cycle.preemption.plan import (
    PREEMPTED,
    nodes_after,
    plan_preemptions,
    preempted_message,
    preempted_status,
    victims_of,
)
from admission.core.cycle.preemption.search import (
    NoVictims,
    Preemptor,
    SearchInput,
    Victims,
    candidates,
    find_victims,
    may_preempt,
)

__all__ = [
    "PREEMPTED",
    "Holding",
    "NoVictims",
    "Preemptor",
    "SearchInput",
    "Victims",
    "candidates",
    "find_victims",
    "holdings",
    "may_preempt",
    "nodes_after",
    "plan_preemptions",
    "preempted_message",
    "preempted_status",
    "victims_of",
    "without_devices",
    "without_pods",
]
