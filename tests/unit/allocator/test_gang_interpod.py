"""Gang placement with the members' own inter-pod constraints: checked between members as planned (each
placed member counts for the later ones) and against bound pods, and the members' required pod affinity
in every order the scheduler may bind them. Nodes a and b in zone z1, c and d in zone z2, 4 cpu each."""

from __future__ import annotations

from typing import Any

from admission.core.allocator import Allocator, GangPlacement, Snapshot, members_for, place_gang
from admission.core.features import exactly
from admission.core.nodefit import NodeUsage, PodFit
from tests.support.builders import Manifest, container, models, node, pod, with_spec

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NODES = [node(name, {ZONE: zone, HOST: name}, allocatable={"cpu": "4", "pods": "10"})
         for name, zone in (("a", "z1"), ("b", "z1"), ("c", "z2"), ("d", "z2"))]
GATES = exactly("1.35", [])
JOB = "jobset.sigs.k8s.io/job-key"


def member(name: str, labels: dict[str, str], **spec: Any) -> Manifest:
    return with_spec(pod(name, labels=labels), containers=[container(requests={"cpu": "1"})], **spec)


def required(kind: str, selector: dict[str, Any], key: str = ZONE) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": selector, "topologyKey": key}]}}


def exclusive(job: str) -> dict[str, Any]:
    """JobSet's exclusive placement per zone, as its webhook writes it."""
    return {**required("podAffinity", {"matchExpressions": [{"key": JOB, "operator": "In", "values": [job]}]}),
            **required("podAntiAffinity", {"matchExpressions": [{"key": JOB, "operator": "Exists"},
                                                                {"key": JOB, "operator": "NotIn", "values": [job]}]})}


def place(*manifests: Manifest, group: list[str], nodes: NodeUsage | None = None) -> tuple[GangPlacement, Snapshot]:
    snapshot = Snapshot.from_models(models(*NODES, *manifests))
    members = members_for([snapshot.pods[f"default/{name}"] for name in group], snapshot.claims, snapshot.templates)
    return place_gang(Allocator(snapshot, GATES), members, nodes=nodes), snapshot


def nodes_of(plan: GangPlacement) -> list[str]:
    return [plan.placements[key] for key in sorted(plan.placements)]


def test_members_anti_affine_to_each_other_take_one_node_each_and_a_fifth_fits_nowhere() -> None:
    spec = {"affinity": required("podAntiAffinity", {"matchLabels": {"app": "w"}}, HOST)}
    pods = [member(f"w{i}", {"app": "w"}, **spec) for i in range(5)]
    plan, _ = place(*pods[:4], group=[f"w{i}" for i in range(4)])
    assert plan.feasible and nodes_of(plan) == ["a", "b", "c", "d"]
    plan, _ = place(*pods, group=[f"w{i}" for i in range(5)])
    assert not plan.feasible and plan.reason == (
        "pod default/w4 fits on no node after placing 4 other pod(s) of the group: 0/4 nodes are available: "
        "4 node(s) didn't match pod anti-affinity rules")


def test_a_jobsets_exclusive_jobs_take_one_zone_each() -> None:
    first = [member(f"j1-{i}", {JOB: "j1"}, affinity=exclusive("j1")) for i in range(5)]
    plan, snapshot = place(*first, group=[f"j1-{i}" for i in range(5)])
    assert plan.feasible and nodes_of(plan) == ["a", "a", "a", "a", "b"]  # zone z1, 4 cpu a node, 1 each
    # The first job admitted but not bound yet: the second job plans around it, in the other zone.
    promised = NodeUsage()
    for index, key in enumerate(sorted(plan.placements)):
        fit = PodFit.of(snapshot.pods[key])
        promised = promised.plus(plan.placements[key], fit.requests, fit.placed_on(plan.placements[key]))
        assert index < 5
    second = [member(f"j2-{i}", {JOB: "j2"}, affinity=exclusive("j2")) for i in range(2)]
    plan, _ = place(*first, *second, group=["j2-0", "j2-1"], nodes=promised)
    assert plan.feasible and set(nodes_of(plan)) <= {"c", "d"}
    # Bound, the first job holds z1 the same way.
    bound = [with_spec(p, nodeName="a") for p in first]
    plan, _ = place(*bound, *second, group=["j2-0", "j2-1"])
    assert plan.feasible and set(nodes_of(plan)) <= {"c", "d"}


def test_a_job_affine_to_a_bound_pod_follows_it() -> None:
    leader = with_spec(pod("leader", labels={"role": "leader"}), nodeName="c")
    to_leader = required("podAffinity", {"matchLabels": {"role": "leader"}})
    workers = [member(f"w{i}", {"role": "worker"}, affinity=to_leader) for i in range(2)]
    plan, _ = place(leader, *workers, group=["w0", "w1"])
    assert plan.feasible and set(nodes_of(plan)) <= {"c", "d"}


def test_affinity_met_only_by_a_later_member_is_refused_since_the_scheduler_may_bind_it_first() -> None:
    leader = member("m0", {"role": "leader"})
    worker = member("m1", {"role": "worker"}, affinity=required("podAffinity", {"matchLabels": {"role": "leader"}}))
    plan, _ = place(leader, worker, group=["m0", "m1"])
    assert not plan.feasible
    assert plan.reason is not None and plan.reason.startswith(
        "pod default/m1 on node a: its required pod affinity is met only by other members of its group")


def test_members_spread_over_zones_and_nodes_within_the_skew() -> None:
    zone = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "s"}}}]
    pods = [member(f"s{i}", {"app": "s"}, topologySpreadConstraints=zone) for i in range(4)]
    plan, _ = place(*pods, group=[f"s{i}" for i in range(4)])
    assert plan.feasible
    zones = [{"a": "z1", "b": "z1", "c": "z2", "d": "z2"}[n] for n in nodes_of(plan)]
    assert sorted(zones) == ["z1", "z1", "z2", "z2"]
    # Three bound pods of the app in z1: the members must first even out z2.
    bound = [with_spec(pod(f"old{i}", labels={"app": "s"}), nodeName="a") for i in range(3)]
    plan, _ = place(*bound, *pods[:3], group=["s0", "s1", "s2"])
    assert plan.feasible and all(n in ("c", "d") for n in nodes_of(plan))
    plan, _ = place(*bound, *pods, group=[f"s{i}" for i in range(4)])
    assert (plan.feasible and sorted(nodes_of(plan))[-1] in ("c", "d") and \
        sum(n in ("a", "b") for n in nodes_of(plan)) == 0) or sum(n in ("a", "b") for n in nodes_of(plan)) == 1


def test_a_self_affine_member_is_refused_when_a_member_it_matches_may_be_bound_first_elsewhere() -> None:
    first = member("m0", {"app": "x"}, affinity=required("podAffinity", {"matchLabels": {"app": "x"}}))
    elsewhere = member("m1", {"app": "x"}, nodeSelector={ZONE: "z2"})
    plan, _ = place(first, elsewhere, group=["m0", "m1"])
    assert not plan.feasible and plan.unschedulable
    assert plan.reason == ("pod default/m0 on node a: if the scheduler binds default/m1 (on node c) first, its "
                           "required pod affinity is no longer met by itself, and nothing meets it on node a")
    # Where the member it matches is planned in its zone, every order works.
    near = member("m1", {"app": "x"}, nodeSelector={HOST: "b"})
    plan, _ = place(first, near, group=["m0", "m1"])
    assert plan.feasible and nodes_of(plan) == ["a", "b"]
