"""Groups admitted from their declared shape: room reserved for members not created yet, held between cycles,
taken by the members that match their role, and charged for the whole shape."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence

from admission.core.allocator import Snapshot
from admission.core.cycle import (
    Admit,
    CycleResult,
    Extend,
    GroupView,
    LateWait,
    Wait,
    WaitReason,
    admitted_status,
    cycle_input,
    extended_status,
    late_members,
    next_phase,
    overdue,
    plan_status,
    promised_devices,
    promised_pods,
    rebuild_state,
    run_cycle,
    slots_given_up_event,
    unreleased_members,
)
from admission.core.cycle.eviction import unbound_members
from admission.core.cycle.preemption import plan_preemptions
from admission.core.cycle.shape import matches
from admission.core.models import DeclaredShape, ObjectRef, Pod, Role
from admission.core.nodefit import NodeUsage
from admission.core.quota import ClusterQueue, Plan, PodGroup, QueueingStrategy, Slot, parse_pod_group
from tests.support.builders import Manifest, model, models, pod, pod_group
from tests.unit.cycle.cycle_builders import (
    GATES,
    GPU_CLASS,
    LOCAL_QUEUES,
    NS,
    gang,
    gpu_node,
    gpu_queue,
    gpu_template,
    gpu_units,
    group_record,
    groups_of,
    member,
)
from tests.unit.preemption.scenes import Scene, queue

NOW = "2026-01-01T12:00:00Z"
WORKER_GPUS = "worker-gpus"


def template_pod(gpus_template: str = WORKER_GPUS, cpu: str = "1") -> Pod:
    """A role's pod template: one container asking for `cpu`, claim entry `gpu` from `gpus_template`."""
    pod_model: Pod = model(pod("template", NS, templates={"gpu": gpus_template}, requests={"cpu": cpu}))
    return dataclasses.replace(pod_model, meta=dataclasses.replace(pod_model.meta, name=""))


def shape(*roles: tuple[str, int]) -> DeclaredShape:
    return DeclaredShape(ObjectRef("JobSet", NS, "js"), tuple(Role(name, template_pod(), n) for name, n in roles))


def worker(name: str, *, gpus_template: str = WORKER_GPUS, gated: bool = True, node: str = "",
           phase: str = "Pending") -> Manifest:
    return pod(name, NS, queue="lq", group="js", group_min=8, gated=gated, templates={"gpu": gpus_template},
               requests={"cpu": "1"}, node=node or None, phase=phase)


def cluster(nodes: int = 2) -> list[Manifest]:
    return [m for i in range(nodes) for m in gpu_node(f"node-{i}")] + [gpu_template(WORKER_GPUS, 1)]


def declared_groups(objects: Sequence[Manifest], records: Iterable[PodGroup],
                    declared: DeclaredShape) -> tuple[GroupView, ...]:
    """The groups of `objects`, group `js` with its declared shape (as its owner's reader would give it) and,
    when it has no members yet, its PodGroup's creation time."""
    return tuple(dataclasses.replace(g, declared=declared, created=g.created or NOW) if g.name == "js" else g
                 for g in groups_of(objects, records))


def run(objects: Sequence[Manifest], groups: tuple[GroupView, ...], queues: Iterable[ClusterQueue]) -> CycleResult:
    snapshot = Snapshot.from_models(models(GPU_CLASS, *objects))
    state = rebuild_state(queues, groups)
    return run_cycle(cycle_input(snapshot, GATES, groups, state, {q.key: q for q in LOCAL_QUEUES}, gpu_units()))


def admit_shape(objects: Sequence[Manifest], declared: DeclaredShape, gpus: int = 16) -> Admit:
    result = run(objects, declared_groups(objects, [group_record("js", declared.total)], declared),
                 [gpu_queue("main", gpus)])
    decision = result.decision(f"{NS}/js")
    assert isinstance(decision, Admit), decision
    return decision


def admitted_record(admit: Admit, declared: DeclaredShape) -> PodGroup:
    """The PodGroup as the operator writes it after `admit`."""
    return model(pod_group("js", declared.total, "lq", namespace=NS, status=admitted_status(admit, 0, NOW)))


# ----- admission ------------------------------------------------------------------------------------
def test_admitted_with_none_of_eight_members_existing() -> None:
    declared = shape(("worker", 8))
    admit = admit_shape(cluster(), declared)
    assert admit.charge.describe() == "gpus 8"
    assert admit.plan.nodes == ()
    assert [(s.name, s.open) for s in admit.plan.slots] == [(f"worker#{i}", True) for i in range(8)]
    assert sorted(s.node for s in admit.plan.slots) == ["node-0"] * 4 + ["node-1"] * 4
    assert sorted(c.name for c in admit.plan.claims) == sorted(f"worker#{i}/gpu" for i in range(8))
    assert len({d for c in admit.plan.claims for _, d in c.devices}) == 8


def test_existing_members_take_their_slots_and_the_rest_are_reserved() -> None:
    declared = DeclaredShape(ObjectRef("JobSet", NS, "js"), (Role("leader", template_pod(cpu="2"), 1),
                                                              Role("worker", template_pod(), 3)))
    objects = [*cluster(1), pod("lead", NS, queue="lq", group="js", group_min=4, gated=True,
                                templates={"gpu": WORKER_GPUS}, requests={"cpu": "2"})]
    admit = admit_shape(objects, declared)
    assert [name for name, _ in admit.plan.nodes] == ["lead"]
    assert [(s.name, s.pod) for s in admit.plan.slots] == [("leader#0", "lead"), ("worker#0", ""),
                                                         ("worker#1", ""), ("worker#2", "")]
    assert admit.charge.describe() == "gpus 4"


def test_a_group_without_a_declared_shape_still_waits_for_its_members() -> None:
    objects = [*cluster(), worker("w-0")]
    [group] = groups_of(objects, [group_record("js", 8)])
    wait = run(objects, (group,), [gpu_queue("main", 16)]).decision(f"{NS}/js")
    assert isinstance(wait, Wait) and wait.reason is WaitReason.INCOMPLETE
    assert wait.message.startswith("1 of 8 members exist")


# ----- the reserved room is held ------------------------------------------------------------------
def test_reserved_room_is_held_from_the_next_group_in_the_same_cycle() -> None:
    declared = shape(("worker", 8))
    objects = [*cluster(), *gang("other", 1, 1, created="2026-01-01T13:00:00Z")]
    groups = declared_groups(objects, [group_record("js", 8), group_record("other", 1)], declared)
    result = run(objects, groups, [gpu_queue("main", 16)])
    assert isinstance(result.decision(f"{NS}/js"), Admit)
    other = result.decision(f"{NS}/other")
    assert isinstance(other, Wait) and other.reason is WaitReason.DEVICES


def test_reserved_room_is_held_in_the_next_cycle() -> None:
    declared = shape(("worker", 8))
    admit = admit_shape(cluster(), declared)
    objects = [*cluster(), *gang("other", 1, 1)]
    groups = declared_groups(objects, [admitted_record(admit, declared), group_record("other", 1)], declared)
    result = run(objects, groups, [gpu_queue("main", 16)])
    other = result.decision(f"{NS}/other")
    assert isinstance(other, Wait) and other.reason is WaitReason.DEVICES
    assert result.state.usage("main").describe() == "gpus 8"


def test_open_slots_take_their_templates_node_room() -> None:
    declared = shape(("worker", 8))
    admit = admit_shape(cluster(), declared)
    [group] = declared_groups([], [admitted_record(admit, declared)], declared)
    nodes = promised_pods((group,), NodeUsage())
    assert nodes.on("node-0")["cpu"] == nodes.on("node-1")["cpu"] == 4 * 1000
    assert nodes.on("node-0")["pods"] == 4


# ----- members that come later --------------------------------------------------------------------
def test_a_late_member_joins_its_slot_pinned() -> None:
    declared = shape(("worker", 8))
    admit = admit_shape(cluster(), declared)
    objects = [*cluster(), worker("js-w-0"), worker("js-w-1")]
    groups = declared_groups(objects, [admitted_record(admit, declared)], declared)
    assert [p.name for p in late_members(groups[0])] == ["js-w-0", "js-w-1"]
    result = run(objects, groups, [gpu_queue("main", 16)])
    grown = result.decision(f"{NS}/js")
    assert isinstance(grown, Extend)
    assert grown.joined == (f"{NS}/js-w-0", f"{NS}/js-w-1") and not grown.added
    assert grown.charge.describe() == "gpus 8" and result.state.usage("main").describe() == "gpus 8"
    slots = {s.name: s for s in grown.plan.slots}
    assert (slots["worker#0"].pod, slots["worker#1"].pod) == ("js-w-0", "js-w-1")  # each slot used once
    assert grown.placement.nodes[f"{NS}/js-w-0"] == slots["worker#0"].node
    assert dict(grown.plan.nodes) == {"js-w-0": slots["worker#0"].node, "js-w-1": slots["worker#1"].node}
    claims = {c.name: c.devices for c in grown.plan.claims}
    before = {c.name: c.devices for c in admit.plan.claims}
    assert claims["js-w-0/gpu"] == before["worker#0/gpu"] and "worker#0/gpu" not in claims
    assert grown.placement.allocations == {}  # the slot's devices were held already


def grown_record(admit: Admit, grown: Extend, members: int) -> PodGroup:
    """The PodGroup as the operator writes it after `admit` and then `grown`."""
    return model(pod_group("js", len(admit.plan.slots), "lq", namespace=NS, status={
        **admitted_status(admit, members, NOW), **extended_status(grown, members, admit.borrowed)}))


def test_a_member_that_matches_no_role_gives_up_an_open_slot_then_is_placed_as_itself() -> None:
    declared = shape(("worker", 4))
    admit = admit_shape(cluster(), declared)
    objects = [*cluster(), gpu_template("big", 2), worker("js-odd", gpus_template="big")]
    groups = declared_groups(objects, [admitted_record(admit, declared)], declared)
    result = run(objects, groups, [gpu_queue("main", 16)])
    given = result.decision(f"{NS}/js")
    assert isinstance(given, Extend) and given.given_up == (("js-odd", "worker#3"),)
    assert given.placement.nodes == {} and given.joined == ()  # it waits this cycle
    assert given.freed.describe() == "gpus 1" and given.charge.describe() == "gpus 3"
    assert result.state.usage("main").describe() == "gpus 3"
    slots = {s.name: s.pod for s in given.plan.slots}
    assert slots["worker#3"] == "js-odd"
    assert [s.name for s in given.plan.open_slots] == [f"worker#{i}" for i in range(3)]
    assert not any(c.name.startswith("worker#3/") for c in given.plan.claims)  # its devices are not promised
    event = slots_given_up_event(given)
    assert event.warning and "js-odd (slot worker#3) match no role template" in event.message
    assert "gpus 1 of the charge" in event.message

    again = declared_groups(objects, [grown_record(admit, given, 1)], declared)
    placed = run(objects, again, [gpu_queue("main", 16)]).decision(f"{NS}/js")
    assert isinstance(placed, Extend) and placed.given_up == () and placed.joined == ()
    assert placed.added.describe() == "gpus 2" and placed.charge.describe() == "gpus 5"
    assert f"{NS}/js-odd" in placed.placement.nodes


def test_a_member_that_matches_no_role_and_fits_nowhere_waits_with_the_reason() -> None:
    declared = shape(("worker", 8))
    admit = admit_shape(cluster(), declared)
    objects = [*cluster(), gpu_template("big", 2), worker("js-odd", gpus_template="big")]
    groups = declared_groups(objects, [admitted_record(admit, declared)], declared)
    given = run(objects, groups, [gpu_queue("main", 16)]).decision(f"{NS}/js")
    assert isinstance(given, Extend) and given.given_up == (("js-odd", "worker#7"),)
    again = declared_groups(objects, [grown_record(admit, given, 1)], declared)
    wait = run(objects, again, [gpu_queue("main", 16)]).decision(f"{NS}/js")
    assert isinstance(wait, LateWait)  # one GPU freed on each node is not two on one
    assert "js-odd fit on no node now (it matches no open slot's role template" in wait.message


def test_a_replacement_that_matches_no_role_keeps_the_open_slots() -> None:
    """A member that replaces a failed one does not stand for an open slot: the slots still wait for theirs."""
    declared = shape(("worker", 4))
    admit = admit_shape(cluster(), declared)
    first = [*cluster(), worker("js-w-0")]
    grown = run(first, declared_groups(first, [admitted_record(admit, declared)], declared),
                [gpu_queue("main", 16)]).decision(f"{NS}/js")
    assert isinstance(grown, Extend)
    failed = worker("js-w-0", gated=False, node="node-0", phase="Failed")
    objects = [*cluster(), gpu_template("big", 2), failed, worker("js-odd", gpus_template="big")]
    groups = declared_groups(objects, [grown_record(admit, grown, 1)], declared)
    placed = run(objects, groups, [gpu_queue("main", 16)]).decision(f"{NS}/js")
    assert isinstance(placed, Extend) and placed.given_up == ()
    assert placed.added.describe() == "gpus 2" and len(placed.plan.open_slots) == 3


def test_in_order_startup_releases_the_first_members_and_holds_the_rest() -> None:
    declared = DeclaredShape(ObjectRef("LeaderWorkerSet", NS, "js"), (Role("leader", template_pod(cpu="2"), 1),
                                                                      Role("worker", template_pod(), 3)))
    leader = pod("lead", NS, queue="lq", group="js", group_min=4, gated=True, templates={"gpu": WORKER_GPUS},
                 requests={"cpu": "2"})
    admit = admit_shape([*cluster(1), leader], declared)
    record = admitted_record(admit, declared)
    [group] = declared_groups([leader], [record], declared)
    assert unreleased_members(group) == ("lead",) and late_members(group) == ()
    bound = pod("lead", NS, queue="lq", group="js", group_min=4, templates={"gpu": WORKER_GPUS},
                requests={"cpu": "2"}, node="node-0", phase="Running")
    [running_leader] = declared_groups([bound], [record], declared)
    assert next_phase(running_leader) is None  # workers not created yet: still Admitted, room held
    assert unbound_members(running_leader) == ("worker#0", "worker#1", "worker#2")


def test_a_group_with_open_slots_and_no_members_is_not_finished() -> None:
    declared = shape(("worker", 8))
    [group] = declared_groups([], [admitted_record(admit_shape(cluster(), declared), declared)], declared)
    assert next_phase(group) is None
    assert unreleased_members(group) == ()


# ----- quota ----------------------------------------------------------------------------------------
def test_quota_is_charged_for_the_whole_declared_shape_and_waits_for_room() -> None:
    declared = shape(("worker", 8))
    objects = [*cluster(3), *gang("held", 2, 3, created="2026-01-01T11:00:00Z")]
    records = [group_record("js", 8), group_record("held", 2)]
    result = run(objects, declared_groups(objects, records, declared), [gpu_queue("main", 12)])
    assert isinstance(result.decision(f"{NS}/held"), Admit)
    wait = result.decision(f"{NS}/js")
    assert isinstance(wait, Wait) and wait.reason is WaitReason.QUOTA
    assert wait.message.endswith("(group needs gpus 8)")


def test_a_shape_over_its_queues_limit_waits_as_never_admissible() -> None:
    declared = shape(("worker", 8))
    objects = cluster()
    result = run(objects, declared_groups(objects, [group_record("js", 8)], declared), [gpu_queue("main", 4)])
    wait = result.decision(f"{NS}/js")
    assert isinstance(wait, Wait) and wait.reason is WaitReason.NEVER_FITS
    assert "needs gpus 8, more than ClusterQueue main can ever hold" in wait.message


def test_a_shape_larger_than_the_cluster_waits_as_never_admissible_and_blocks_no_queue() -> None:
    declared = shape(("worker", 9))
    objects = [*cluster(), *gang("small", 1, 1, created="2026-01-01T13:00:00Z")]
    queue = gpu_queue("main", 64, strategy=QueueingStrategy.STRICT_FIFO)
    groups = declared_groups(objects, [group_record("js", 9), group_record("small", 1)], declared)
    result = run(objects, groups, [queue])
    wait = result.decision(f"{NS}/js")
    assert isinstance(wait, Wait) and wait.reason is WaitReason.NEVER_FITS
    assert "fits on no set of nodes even with nothing else running" in wait.message
    assert isinstance(result.decision(f"{NS}/small"), Admit)


# ----- the record ---------------------------------------------------------------------------------
def test_the_plan_with_slots_reads_back_and_an_old_plan_still_reads() -> None:
    plan = Plan((("lead", "node-0"),), (), (Slot("leader", 0, "node-0", "lead"), Slot("worker", 0, "node-1")))
    status = {"phase": "Admitted", "plan": plan_status(plan)}
    assert parse_pod_group(pod_group("js", 2, "lq", namespace=NS, status=status)).plan == plan
    old = {"phase": "Admitted", "plan": {"pods": [{"name": "a", "node": "n"}], "claims": []}}
    assert parse_pod_group(pod_group("js", 1, "lq", namespace=NS, status=old)).plan.slots == ()


def test_members_a_declared_group_does_not_have_yet_do_not_hide_it_from_admission() -> None:
    declared = shape(("worker", 2))
    [waiting] = declared_groups([], [group_record("js", 2)], declared)
    assert waiting.pending
    finished = model(pod_group("js", 2, "lq", namespace=NS, status={"phase": "Finished"}))
    [done] = declared_groups([], [finished], declared)
    assert not done.pending
    ungated = [member("js-0", "js", group_min=2, gated=False)]
    [released] = declared_groups(ungated, [group_record("js", 2)], declared)
    assert not released.pending


def test_preemption_makes_room_for_the_whole_declared_shape() -> None:
    scene = (Scene().nodes(["n0"], gpus=4).cluster_queue(queue("main", 8, within="LowerPriority"))
             .running("low", "main", [("n0", 4)]))
    scene.objects.append(gpu_template(WORKER_GPUS, 1))
    scene.records.append(model(pod_group("js", 2, "lq-main", namespace=NS, priority=10, status={})))
    cycle = scene.cycle_input()
    declared = shape(("worker", 2))
    # No member exists yet: the group's priority is what its PriorityClass gives (the PodGroup may only lower it).
    groups = tuple(dataclasses.replace(g, declared=declared, created=NOW, priority=10) if g.name == "js" else g
                   for g in cycle.groups)
    cycle = dataclasses.replace(cycle, groups=groups)
    result = run_cycle(cycle)
    wait = result.decision(f"{NS}/js")
    assert isinstance(wait, Wait) and wait.reason is WaitReason.DEVICES
    [preempt] = plan_preemptions(cycle, result).preempts
    assert preempt.victims == (f"{NS}/low",) and preempt.nodes == ("n0",)


def test_a_taken_slot_is_not_given_again_in_a_later_cycle() -> None:
    declared = shape(("worker", 4))
    admit = admit_shape(cluster(), declared)
    first = [*cluster(), worker("js-w-0")]
    grown = run(first, declared_groups(first, [admitted_record(admit, declared)], declared),
                [gpu_queue("main", 16)]).decision(f"{NS}/js")
    assert isinstance(grown, Extend)
    record = model(pod_group("js", 4, "lq", namespace=NS, status={
        **admitted_status(admit, 1, NOW), **extended_status(grown, 1, admit.borrowed)}))
    later = [*cluster(), worker("js-w-0", gated=False), worker("js-w-1")]
    groups = declared_groups(later, [record], declared)
    assert [p.name for p in late_members(groups[0])] == ["js-w-1"]
    again = run(later, groups, [gpu_queue("main", 16)]).decision(f"{NS}/js")
    assert isinstance(again, Extend) and again.joined == (f"{NS}/js-w-1",)
    assert [(s.name, s.pod) for s in again.plan.slots] == [("worker#0", "js-w-0"), ("worker#1", "js-w-1"),
                                                         ("worker#2", ""), ("worker#3", "")]


def test_a_member_in_its_slot_keeps_the_slots_devices_promised() -> None:
    declared = shape(("worker", 2))
    admit = admit_shape(cluster(1), declared)
    objects = [*cluster(1), worker("js-w-0")]
    [group] = declared_groups(objects, [admitted_record(admit, declared)], declared)
    snapshot = Snapshot.from_models(models(GPU_CLASS, *objects))
    assert len(promised_devices((group,), snapshot.claims)) == 2
    grown = run(objects, (group,), [gpu_queue("main", 16)]).decision(f"{NS}/js")
    assert isinstance(grown, Extend)
    record = model(pod_group("js", 2, "lq", namespace=NS, status={
        **admitted_status(admit, 1, NOW), **extended_status(grown, 1, admit.borrowed)}))
    [joined] = declared_groups(objects, [record], declared)
    assert sorted(promised_devices((joined,), snapshot.claims), key=str) == \
        sorted(promised_devices((group,), snapshot.claims), key=str)


def test_members_that_take_slots_go_even_when_others_must_wait() -> None:
    declared = shape(("worker", 8))
    admit = admit_shape(cluster(), declared)
    objects = [*cluster(), gpu_template("big", 2), worker("js-w-0"), worker("js-odd", gpus_template="big")]
    groups = declared_groups(objects, [admitted_record(admit, declared)], declared)
    grown = run(objects, groups, [gpu_queue("main", 16)]).decision(f"{NS}/js")
    assert isinstance(grown, Extend) and grown.joined == (f"{NS}/js-w-0",)
    assert list(grown.placement.nodes) == [f"{NS}/js-w-0"]


def test_an_unfilled_shape_is_evicted_at_the_bind_timeout() -> None:
    declared = shape(("worker", 2))
    [group] = declared_groups([], [admitted_record(admit_shape(cluster(1), declared), declared)], declared)
    [evict] = overdue((group,), {"main": gpu_queue("main", 16)}, dt.datetime(2026, 1, 1, 13, tzinfo=dt.UTC))
    assert "worker#0, worker#1 not bound" in evict.message


def test_what_a_member_must_share_with_its_role_template() -> None:
    template = template_pod()
    same: Pod = model(worker("any-name"))
    assert matches(same, template)  # name, labels, gates do not count
    other_cpu: Pod = model(pod("x", NS, templates={"gpu": WORKER_GPUS}, requests={"cpu": "2"}))
    other_claim: Pod = model(pod("x", NS, templates={"gpu": "big"}, requests={"cpu": "1"}))
    elsewhere: Pod = model(pod("x", NS, templates={"gpu": WORKER_GPUS}, requests={"cpu": "1"},
                               node_selector={"zone": "b"}))
    assert not any(matches(p, template) for p in (other_cpu, other_claim, elsewhere))


def test_the_api_servers_default_tolerations_do_not_make_a_member_differ() -> None:
    """The API server adds not-ready and unreachable NoExecute tolerations to every pod that has none; the
    template, never admitted, lacks them."""
    template = template_pod()
    defaults = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                for key in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")]
    admitted: Pod = model({**(w := worker("js-w-0")), "spec": {**w["spec"], "tolerations": defaults}})
    assert matches(admitted, template)
    gpu_toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    tolerant: Pod = model({**w, "spec": {**w["spec"], "tolerations": [*defaults, gpu_toleration]}})
    assert not matches(tolerant, template)  # a toleration of its own still counts
    everything = dataclasses.replace(template, tolerations=model(
        {**w, "spec": {**w["spec"], "tolerations": [{"operator": "Exists"}]}}).tolerations)
    assert not matches(admitted, everything)
    assert matches(model({**w, "spec": {**w["spec"], "tolerations": [{"operator": "Exists"}]}}), everything)


def test_a_late_member_as_the_api_server_stored_it_joins_its_slot() -> None:
    declared = shape(("worker", 2))
    admit = admit_shape(cluster(), declared)
    defaults = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300}]
    late = worker("js-w-0")
    late["spec"]["tolerations"] = defaults
    objects = [*cluster(), late]
    groups = declared_groups(objects, [admitted_record(admit, declared)], declared)
    grown = run(objects, groups, [gpu_queue("main", 2)]).decision(f"{NS}/js")
    assert isinstance(grown, Extend) and grown.joined == (f"{NS}/js-w-0",) and not grown.added
