"""Properties of queue accounting under any sequence of admit / bind / finish / evict / recharge."""

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from admission.core.quota.accounting import QueueState
from admission.core.quota.amounts import NONE, Amounts
from admission.core.quota.queues import ClusterQueue
from tests.support.builders import cluster_queue, model, quota

UNITS = ("gpus", "memory")


@st.composite
def cohorts(draw: st.DrawFn) -> list[ClusterQueue]:
    queues = []
    for index in range(draw(st.integers(1, 4))):
        cohort = draw(st.sampled_from([None, "pool", "pool", "other"]))
        quotas = []
        for unit in UNITS:
            if draw(st.booleans()):
                nominal = draw(st.integers(0, 12))
                borrowing = draw(st.none() | st.integers(0, 6)) if cohort else None
                lending = draw(st.none() | st.integers(0, nominal)) if cohort else None
                quotas.append(quota(unit, nominal, borrowing, lending))
        queues.append(model(cluster_queue(f"q{index}", *quotas, cohort=cohort)))
    return queues


charges = st.builds(lambda g, m: Amounts.of({"gpus": g, "memory": Fraction(m, 2)}),
                    st.integers(0, 8), st.integers(0, 10))
operations = st.lists(st.tuples(st.sampled_from(["admit", "admit", "bind", "finish", "evict", "recharge"]),
                                st.integers(0, 3), st.integers(0, 9), charges), max_size=40)


def run(queues: list[ClusterQueue], ops: list[tuple[str, int, int, Amounts]]) -> list[QueueState]:
    state = QueueState.empty(queues)
    states = [state]
    for op, queue_index, group_index, charge in ops:
        group = f"ns/g{group_index}"
        queue = queues[queue_index % len(queues)].name
        admitted = group in state.admissions
        if op == "admit" and not admitted and state.fits(queue, charge).ok:
            state = state.admit(group, queue, charge)
        elif op == "bind" and admitted:
            state = state.bind(group)
        elif op == "finish" and admitted:
            state = state.finish(group)
        elif op == "evict" and admitted:
            state = state.evict(group)
        elif op == "recharge" and admitted and _smaller(charge, state.admissions[group].charge):
            state = state.recharge(group, charge)
        states.append(state)
    return states


def _smaller(new: Amounts, old: Amounts) -> bool:
    return all(new.get(u) <= old.get(u) for u in set(new.units) | set(old.units))


@settings(max_examples=300, deadline=None)
@given(cohorts(), operations)
def test_usage_always_equals_the_sum_of_recorded_charges(queues: list[ClusterQueue], ops: list) -> None:
    for state in run(queues, ops):
        for queue in queues:
            charged = sum((a.charge for a in state.groups_of(queue.name)), NONE)
            assert state.usage(queue.name) == charged
            bound = sum((a.charge for a in state.groups_of(queue.name) if a.bound), NONE)
            assert state.used.get(queue.name, NONE) == bound


@settings(max_examples=300, deadline=None)
@given(cohorts(), operations)
def test_borrowing_never_exceeds_limits(queues: list[ClusterQueue], ops: list) -> None:
    for state in run(queues, ops):
        for queue in queues:
            usage = state.usage(queue.name)
            for q in queue.quotas:
                used = usage.get(q.unit)
                if queue.cohort is None:
                    assert used <= q.nominal.value
                elif q.borrowing_limit is not None:
                    assert used <= q.nominal.value + q.borrowing_limit.value
        # Within a cohort, what members use beyond their guaranteed share fits in what they lend.
        for cohort in {q.cohort for q in queues if q.cohort}:
            members = [q for q in queues if q.cohort == cohort]
            for unit in UNITS:
                lendable = above = Fraction(0)
                for member in members:
                    q = member.quota(unit)
                    if q is None:
                        continue
                    lend = q.lending_limit.value if q.lending_limit is not None else q.nominal.value
                    lendable += lend
                    above += max(Fraction(0), state.usage(member.name).get(unit) - (q.nominal.value - lend))
                assert above <= lendable


@settings(max_examples=200, deadline=None)
@given(cohorts(), operations)
def test_finishing_every_group_returns_to_empty(queues: list[ClusterQueue], ops: list) -> None:
    state = run(queues, ops)[-1]
    for group in list(state.admissions):
        state = state.finish(group)
    for queue in queues:
        assert state.usage(queue.name) == NONE
        assert state.fits(queue.name, NONE).ok
