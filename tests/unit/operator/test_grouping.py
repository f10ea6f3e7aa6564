"""The reader's groups, kept from one reading to the next: the same views as `collect_groups` builds, each
built again only when one of its inputs changed."""

from __future__ import annotations

import random

import pytest

from admission.core.cycle import collect_groups
from admission.core.models import Pod
from admission.core.quota import PodGroup, parse_pod_group
from admission.operator.grouping import GroupMemo
from tests.support import builders as b
from tests.unit.cycle.cycle_builders import NS, member


def pods(*manifests: dict[str, object]) -> list[Pod]:
    return [p for p in b.models(*manifests) if isinstance(p, Pod)]


def test_the_views_are_those_collect_groups_builds() -> None:
    members = pods(member("a-0", "a", group_min=2), member("a-1", "a", group_min=2), member("b-0", "b"),
                   b.pod("plain", NS))
    records = [parse_pod_group(b.pod_group("b", 1, "lq", namespace=NS)),
               parse_pod_group(b.pod_group("c", 1, "lq", namespace=NS))]
    created = {f"{NS}/b": "2026-01-01T00:00:00Z"}
    unsealed: dict[str, PodGroup | None] = {f"{NS}/c": None}
    broken = {f"{NS}/c": "its record does not trace to draq"}
    assert GroupMemo().collect(members, records, created, broken, unsealed) == collect_groups(
        members, records, created, broken, unsealed)


def test_a_group_nothing_changed_for_keeps_its_view_and_a_changed_one_is_built_again() -> None:
    memo = GroupMemo()
    a, c = pods(member("a-0", "a")), pods(member("c-0", "c"))
    first = memo.collect(a + c, [], {}, {}, {})
    grown = pods(member("c-1", "c"))
    second = memo.collect(a + c + grown, [], {}, {}, {})
    assert second[0] is first[0]  # group a: the same pod objects
    assert second[1] is not first[1] and [p.name for p in second[1].pods] == ["c-0", "c-1"]
    record = parse_pod_group(b.pod_group("a", 1, "lq", namespace=NS))
    third = memo.collect(a + c + grown, [record], {}, {}, {})
    assert third[0].pod_group is record and third[1] is second[1]
    assert memo.collect(c, [], {}, {}, {}) == collect_groups(c, [], {}, {}, {})  # group a is gone


@pytest.mark.parametrize("seed", range(25))
def test_after_any_sequence_of_changes_the_views_are_those_collect_groups_builds(seed: int) -> None:
    """Members that come, go or are replaced (another group label), PodGroups that come, go or are replaced,
    creation times, unreadable and untraceable records that change: the kept views equal fresh ones."""
    rng = random.Random(seed)
    memo, told = GroupMemo(), GroupMemo()  # `told`: given the changed pods' keys instead of every pod
    live: dict[str, Pod] = {}
    records: dict[str, PodGroup] = {}
    created: dict[str, str] = {}
    broken: dict[str, str] = {}
    unsealed: dict[str, PodGroup | None] = {}
    names = "abcde"
    for _ in range(40):
        changed: set[str] = set()
        for _ in range(rng.randint(1, 4)):
            group, pod_name = rng.choice(names), f"p{rng.randint(0, 7)}"
            change = rng.random()
            if change < 0.4:
                live[pod_name] = pods(member(pod_name, group, group_min=rng.randint(1, 3)))[0]
                changed.add(f"{NS}/{pod_name}")
            elif change < 0.47:  # a pod without draq's labels under the same name
                live[pod_name] = pods(b.pod(pod_name, NS))[0]
                changed.add(f"{NS}/{pod_name}")
            elif change < 0.55:
                live.pop(pod_name, None)
                changed.add(f"{NS}/{pod_name}")
            elif change < 0.7:
                records[group] = parse_pod_group(b.pod_group(group, rng.randint(1, 3), "lq", namespace=NS))
            elif change < 0.8:
                records.pop(group, None)
            elif change < 0.88:
                created[f"{NS}/{group}"] = f"2026-01-0{rng.randint(1, 9)}T00:00:00Z"
            elif change < 0.94:
                broken[f"{NS}/{group}"] = rng.choice(["does not parse", "its record does not trace to draq"])
                if rng.random() < 0.5:
                    unsealed[f"{NS}/{group}"] = rng.choice([None, *records.values()])
            else:
                broken.pop(f"{NS}/{group}", None)
                unsealed.pop(f"{NS}/{group}", None)
        members = list(live.values())
        rng.shuffle(members)
        fresh = collect_groups(members, list(records.values()), created, broken, unsealed)
        assert memo.collect(members, list(records.values()), dict(created), dict(broken), dict(unsealed)) == fresh
        by_key = {p.key: p for p in live.values()}
        assert told.collect([], list(records.values()), dict(created), dict(broken), dict(unsealed),
                            (by_key, changed)) == fresh
