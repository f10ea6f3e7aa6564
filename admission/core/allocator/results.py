"""Allocation results as the scheduler writes them (spec section 7.6), and their manifest form."""

from __future__ import annotations

import uuid
from typing import Any

from admission.core.allocator.capacity import as_quantities
from admission.core.allocator.inventory import SnapshotInventory
from admission.core.allocator.search import ClaimSearch, Pick, experimental_variant
from admission.core.features import FeatureGates
from admission.core.models import (
    AllocatedConfig,
    AllocationResult,
    Device,
    DeviceAllocation,
    DeviceSelection,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    node_name_selector,
)

_SHARE_NAMESPACE = uuid.UUID("6f1c5d2e-3b7a-4c1e-9d8f-2a4b6c8e0f13")


# Results of unshared picks, which depend only on the device and the request: (id of the device, id of
# the request's selection, result name) -> (device, selection, result), the objects kept to check that
# an id still means them.
ResultMemo = dict[tuple[int, int, str], tuple[Device, DeviceSelection, DeviceAllocation]]


def build_allocation(plan: ClaimSearch, node: Node, inventory: SnapshotInventory, gates: FeatureGates,
                     memo: ResultMemo | None = None) -> AllocationResult:
    """The claim's allocation; with `memo` (for one gate set), equal unshared results are built once."""
    results = []
    for index, pick in enumerate(plan.picks):
        results.append(_result(plan, index, pick, gates) if memo is None or pick.shared
                       else _known_result(plan, index, pick, gates, memo))
    return AllocationResult(tuple(results), _config(plan), _node_selector(plan.picks, node, inventory))


def _known_result(plan: ClaimSearch, index: int, pick: Pick, gates: FeatureGates,
                  memo: ResultMemo) -> DeviceAllocation:
    device, selection = pick.device, pick.alternative.selection
    key = (id(device), id(selection), pick.alternative.result_name)
    known = memo.get(key)
    if known is not None and known[0] is device and known[1] is selection:
        return known[2]
    result = _result(plan, index, pick, gates)
    memo[key] = (device, selection, result)
    return result


def _result(plan: ClaimSearch, index: int, pick: Pick, gates: FeatureGates) -> DeviceAllocation:
    device, alternative = pick.device, pick.alternative
    share_id = None
    consumed = {}
    if pick.shared:
        # Deterministic per claim, result and device, unique among the device's shares.
        seed = f"{plan.claim.key}/{plan.claim.meta.uid}/{index}/{device.id}"
        share_id = str(uuid.uuid5(_SHARE_NAMESPACE, seed))
        consumed = as_quantities(device, pick.consumed or {})
    with_binding = gates.binding_conditions
    return DeviceAllocation(
        request=alternative.result_name, driver=device.driver, pool=device.pool, device=device.name,
        admin_access=True if alternative.admin else None,
        share_id=share_id, consumed_capacity=consumed,
        # 1.34 did not record tolerations in results.
        tolerations=alternative.selection.tolerations if gates.minor >= 35 else (),
        binding_conditions=device.binding_conditions if with_binding else (),
        binding_failure_conditions=device.binding_failure_conditions if with_binding else (),
        # Only 1.37's variant for the alpha features copies the slice's operations into the result.
        skip_node_operations=device.skip_node_operations if experimental_variant(gates) else (),
    )


def _config(plan: ClaimSearch) -> tuple[AllocatedConfig, ...]:
    if not plan.claim.spec.config and not _class_config(plan.picks):
        return ()
    by_class: dict[str, list[str]] = {}
    classes = {}
    for pick in plan.picks:
        device_class = pick.alternative.device_class
        classes[device_class.name] = device_class
        names = by_class.setdefault(device_class.name, [])
        if pick.alternative.result_name not in names:
            names.append(pick.alternative.result_name)
    configs = [AllocatedConfig("FromClass", tuple(names), opaque)
               for class_name, names in by_class.items() for opaque in classes[class_name].config]
    chosen = {p.alternative.result_name for p in plan.picks} | {p.alternative.request for p in plan.picks}
    for entry in plan.claim.spec.config:
        if not entry.requests or any(name in chosen for name in entry.requests):
            configs.append(AllocatedConfig("FromClaim", entry.requests, entry.opaque))
    return tuple(configs)


def _class_config(picks: list[Pick]) -> bool:
    for pick in picks:  # noqa: SIM110 (a loop costs less than a generator, on every allocation)
        if pick.alternative.device_class.config:
            return True
    return False


def _node_selector(picks: list[Pick], node: Node, inventory: SnapshotInventory) -> NodeSelector | None:
    expressions: list[NodeSelectorRequirement] = []
    fields: list[NodeSelectorRequirement] = []
    for pick in picks:
        device = pick.device
        if device.binds_to_node or device.node_name:
            return node_name_selector(node.name)
        item = inventory.slice_of[(device.driver, device.pool, device.slice_name)]
        if item.node_name:
            return node_name_selector(node.name)
        selector = device.node_selector or item.node_selector
        if selector is None:
            continue
        for term in selector.terms:
            expressions.extend(r for r in term.match_expressions if r not in expressions)
            fields.extend(r for r in term.match_fields if r not in fields)
    if not expressions and not fields:
        return None
    return NodeSelector((NodeSelectorTerm(tuple(expressions), tuple(fields)),))


def allocation_to_manifest(allocation: AllocationResult) -> dict[str, Any]:
    """`status.allocation` of a ResourceClaim."""
    results = []
    for r in allocation.results:
        item: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
        if r.admin_access is not None:
            item["adminAccess"] = r.admin_access
        if r.tolerations:
            item["tolerations"] = [t.to_manifest() for t in r.tolerations]
        if r.binding_conditions:
            item["bindingConditions"] = list(r.binding_conditions)
        if r.binding_failure_conditions:
            item["bindingFailureConditions"] = list(r.binding_failure_conditions)
        if r.share_id is not None:
            item["shareID"] = r.share_id
        if r.skip_node_operations:
            item["skipNodeOperations"] = list(r.skip_node_operations)
        if r.consumed_capacity:
            item["consumedCapacity"] = {k: str(v) for k, v in r.consumed_capacity.items()}
        results.append(item)
    devices: dict[str, Any] = {"results": results}
    if allocation.config:
        devices["config"] = [{"source": c.source, "requests": list(c.requests), **c.opaque.to_manifest()}
                             for c in allocation.config]
    out: dict[str, Any] = {"devices": devices}
    if allocation.node_selector is not None:
        out["nodeSelector"] = allocation.node_selector.to_manifest()
    return out
