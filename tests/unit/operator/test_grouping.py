"""The reader's groups, kept from one reading to the next: the same views as `collect_groups` builds, each
built again only when one of its inputs changed."""

from __future__ import annotations

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
