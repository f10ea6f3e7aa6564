"""Device choice within a node: the scheduler places members one by one, first fit, in its own order, and
never revisits earlier pods' devices. A plan whose members on one node ask for different devices is
admitted only if every order they can come in fits there."""

from __future__ import annotations

from admission.core.allocator import Allocator, GangPlacement, Snapshot, members_for, place_gang
from admission.core.allocator.gang import MAX_ORDERS_CHECKED, _distinct_orders
from admission.core.features import exactly
from admission.core.models import Pod
from tests.support.builders import Manifest, device_class, gpu, models, node, pod, resource_slice, template
from tests.support.builders import exactly as request

GATES = exactly("1.35", [])
ANY = template("any", request())
MODEL_A = template("model-a", request(selector='device.attributes["gpu.example.com"].model == "A"'))
TWO_ANY = template("two-any", request(count=2))


def node_with(name: str, *models_: str) -> list[Manifest]:
    """A node whose GPUs, in slice order, are of these models."""
    return [node(name), resource_slice(name, *(gpu(f"gpu-{i}", m) for i, m in enumerate(models_)),
                                       name=f"{name}-gpus")]


def member(name: str, template_name: str | None) -> Manifest:
    return pod(name, templates={"gpu": template_name} if template_name else None)


def place(*manifests: Manifest | list[Manifest]) -> GangPlacement:
    flat: list[Manifest] = [device_class(), ANY, MODEL_A, TWO_ANY]
    for item in manifests:
        flat.extend(item if isinstance(item, list) else [item])
    snapshot = Snapshot.from_models(models(*flat))
    pods = sorted((p for p in snapshot.pods.values() if isinstance(p, Pod)), key=lambda p: p.name)
    return place_gang(Allocator(snapshot, GATES), members_for(pods, snapshot.claims, snapshot.templates))


def test_a_plan_only_draqs_order_reproduces_waits_with_the_order_that_fails() -> None:
    # Taken first, a-picky gets gpu-0 (model A) and b-any gets gpu-1. Taken first by the scheduler,
    # b-any would get gpu-0 (first fit) and a-picky would find no model A left.
    plan = place(node_with("n", "A", "B"), member("a-picky", "model-a"), member("b-any", "any"))
    assert not plan.feasible and not plan.error
    assert plan.reason == ("pod default/a-picky may not fit on node n if the scheduler takes the pods planned there "
                           "in the order default/b-any then default/a-picky: they ask for different devices, and "
                           "the scheduler places pods one by one, first fit, without revisiting earlier pods' devices")


def test_a_plan_every_order_reproduces_is_admitted() -> None:
    # Both GPUs are model A: whichever member comes first, the other still fits.
    plan = place(node_with("n", "A", "A"), member("a-picky", "model-a"), member("b-any", "any"))
    assert plan.feasible and set(plan.placements.values()) == {"n"}


def test_members_of_one_kind_are_not_checked_and_members_without_devices_do_not_count() -> None:
    plan = place(node_with("n", "A", "B", "B"), member("a", "any"), member("b", "any"), member("c", "any"),
                 member("launcher", None))
    assert plan.feasible


def test_members_on_different_nodes_do_not_depend_on_each_others_order() -> None:
    # a-picky fits only on n1 (model A); b-any only has room left on n2 once n1 is taken.
    plan = place(node_with("n1", "A"), node_with("n2", "B"), member("a-picky", "model-a"), member("b-any", "any"))
    assert plan.feasible and plan.placements == {"default/a-picky": "n1", "default/b-any": "n2"}


def test_counts_that_fit_in_any_order_are_admitted() -> None:
    # One pod of 2 GPUs and one of 1 on 3 identical GPUs: 2+1 or 1+2, both fit.
    plan = place(node_with("n", "A", "A", "A"), member("a-two", "two-any"), member("b-one", "any"))
    assert plan.feasible


def test_distinct_orders_treat_pods_of_one_kind_as_interchangeable() -> None:
    assert _distinct_orders(["x", "y", "y"], 10) == [(0, 1, 2), (1, 0, 2), (1, 2, 0)]
    assert len(_distinct_orders(["x"] * 4 + ["y"] * 4, 1000)) == 70  # 8! / (4! 4!)
    assert len(_distinct_orders(["x", "y", "z", "w", "v", "u"], MAX_ORDERS_CHECKED + 1)) == MAX_ORDERS_CHECKED + 1
