"""Charging: what a pod group costs in quota units, for every shape of claim.

Pure: pods, their claims and templates, DeviceClasses, the devices of the inventory, the quota
units and, if known, the allocator's placement go in; a charge per unit comes out. Without a placement the
charge is the worst case the group could be given; with one (or with claims already allocated) it
is exact. A shape that cannot be charged raises `Unchargeable` — it is never charged zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from admission.core.errors import DraqError
from admission.core.models import (
    ALL,
    EXACT_COUNT,
    AllocationResult,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceSelection,
    Node,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
)
from admission.core.nodefit import pod_requests
from admission.core.nodefit.extended import IMPLICIT_EXTENDED_PREFIX as IMPLICIT_EXTENDED_PREFIX  # re-exported
from admission.core.nodefit.extended import (
    NotWholeDevices,
    extended_claim_name,
    extended_requests,
    extended_resource_class,
)
from admission.core.quantity import Quantity
from admission.core.quota.amounts import NONE, Amounts
from admission.core.quota.device_values import CompiledUnit, device_value
from admission.core.quota.problems import Unchargeable
from admission.core.quota.units import Counting

EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"

SelectionFilter = Callable[[Device, DeviceClass, DeviceSelection], bool]
"""Whether a device passes a class's and a (sub)request's selectors (raises DraqError on CEL errors)."""


def extended_claim_id(pod: Pod) -> str:
    """Placement key of the claim the scheduler makes for a pod's DRA-backed extended resources (KEP 5004)."""
    return f"{pod.namespace}/{extended_claim_name(pod.name)}"


@dataclass(frozen=True, slots=True)
class Inventory:
    """The cluster's devices as charging sees them."""

    device_classes: Mapping[str, DeviceClass]
    devices_by_node: Mapping[str, tuple[Device, ...]]
    # Extended resources each node's allocatable lists (served by a device plugin there).
    extended_by_node: Mapping[str, frozenset[str]] = field(default_factory=dict)
    devices_by_id: Mapping[str, Device] = field(default_factory=dict)
    # Devices passing a class's and a selection's selectors, by (filter, class, selectors, node): the
    # inventory is immutable, so every group charged against it in a cycle shares the answer.
    selected: dict[tuple[object, str, tuple[str | None, ...], str | None], tuple[Device, ...]] = field(
        default_factory=dict, compare=False, repr=False)

    @staticmethod
    def of(device_classes: Iterable[DeviceClass], devices_by_node: Mapping[str, Iterable[Device]],
           nodes: Iterable[Node] = ()) -> Inventory:
        by_node = {node: tuple(devices) for node, devices in devices_by_node.items()}
        by_id = {d.id: d for devices in by_node.values() for d in devices}
        extended = {n.name: frozenset(r for r in n.allocatable if "/" in r and not r.startswith("hugepages-"))
                    for n in nodes}
        return Inventory({c.name: c for c in device_classes}, by_node, extended, by_id)

    def devices(self, node: str | None) -> tuple[Device, ...]:
        if node is not None:
            return self.devices_by_node.get(node, ())
        return tuple(self.devices_by_id.values())


@dataclass(frozen=True, slots=True)
class Placement:
    """What the allocator decided: pod key -> node, claim id -> devices (see the *_claim_id functions)."""

    nodes: Mapping[str, str] = field(default_factory=dict)
    allocations: Mapping[str, AllocationResult] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupObjects:
    """A pod group's pods with the claims (by `namespace/name`) and templates they reference."""

    pods: tuple[Pod, ...]
    claims: Mapping[str, ResourceClaim] = field(default_factory=dict)
    templates: Mapping[str, ResourceClaimTemplate] = field(default_factory=dict)
    # `extended_claims(claims)`, when the caller charges many groups against the same claims.
    extended: Mapping[tuple[str, str], ResourceClaim] | None = None
    # Each pod's requests (`pod_requests`), by the pod's id (the pod kept to check that the id still means it):
    # worked out once for a group charged for several placements.
    requests: dict[int, tuple[Pod, Mapping[str, Fraction]]] = field(default_factory=dict, compare=False,
                                                                    repr=False)

    def pod_requests(self, pod: Pod) -> Mapping[str, Fraction]:
        known = self.requests.get(id(pod))
        if known is None or known[0] is not pod:
            known = self.requests[id(pod)] = (pod, pod_requests(pod))
        return known[1]


def extended_claims(claims: Iterable[ResourceClaim]) -> dict[tuple[str, str], ResourceClaim]:
    """The claims the scheduler made for pods' extended resources, by (namespace, pod name)."""
    found: dict[tuple[str, str], ResourceClaim] = {}
    for claim in claims:
        annotations = claim.meta.annotations
        if annotations and annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true":
            for consumer in claim.reserved_for:
                if consumer.resource == "pods":
                    found[(claim.namespace, consumer.name)] = claim
    return found


@dataclass(frozen=True, slots=True)
class ChargeLine:
    """One contribution to a charge, e.g. `ResourceClaim ns/x, request gpu` -> gpus 2."""

    source: str
    amounts: Amounts
    note: str = ""


@dataclass(frozen=True, slots=True)
class ChargeResult:
    total: Amounts
    lines: tuple[ChargeLine, ...] = ()
    # Claims with no allocation yet (only when charging what is really allocated).
    unallocated: tuple[str, ...] = ()

    def explain(self) -> str:
        return "\n".join(f"{line.source}: {line.amounts.describe()}" + (f" ({line.note})" if line.note else "")
                         for line in self.lines)


def charge_group(group: GroupObjects, units: Sequence[CompiledUnit], inventory: Inventory,
                 matches: SelectionFilter, placement: Placement | None = None, *,
                 allocated_only: bool = False) -> ChargeResult:
    """The group's charge per unit: exact where devices are known, else the worst case.

    `allocated_only` charges only what claims really hold (for reconciliation); claims without an
    allocation are listed in `unallocated` instead of being estimated.
    """
    return _Charger(group, tuple(units), inventory, matches, placement or Placement(), allocated_only).run()


@dataclass(frozen=True, slots=True)
class _ClaimUse:
    id: str
    label: str
    spec: ClaimSpec
    allocation: AllocationResult | None
    node: str | None


@dataclass
class _Charger:
    group: GroupObjects
    units: tuple[CompiledUnit, ...]
    inventory: Inventory
    matches: SelectionFilter
    placement: Placement
    allocated_only: bool
    lines: list[ChargeLine] = field(default_factory=list)
    unallocated: list[str] = field(default_factory=list)
    # Per run: the same template or class request is valued once per node, not once per pod.
    # Claims the scheduler made for pods' extended resources, by (namespace, pod name).
    extended_claims: Mapping[tuple[str, str], ResourceClaim] | None = None
    # The selection is kept in the value so that its id cannot be reused while the cache lives.
    estimates: dict[tuple[int, str | None], tuple[DeviceSelection, Amounts]] = field(default_factory=dict)
    # Per selection (kept in the value, as above): what any device taken for it counts, where no unit looks at
    # the device (None: some unit does).
    same_for_any: dict[int, tuple[DeviceSelection, Amounts | None]] = field(default_factory=dict)

    def run(self) -> ChargeResult:
        for use in self._claim_uses():
            self._charge_claim(use)
        for pod in self.group.pods:
            requests = self.group.pod_requests(pod)
            self._charge_extended_resources(pod, requests)
            self._charge_core(pod, requests)
        return ChargeResult(_total(self.lines), tuple(self.lines), tuple(self.unallocated))

    # ----- which claims -----------------------------------------------------------------------------
    def _claim_uses(self) -> list[_ClaimUse]:
        uses: dict[str, _ClaimUse] = {}
        members = {p.name for p in self.group.pods}
        for pod in self.group.pods:
            for use in self._pod_claims(pod):
                if use.id in uses:
                    continue  # a claim shared by several pods of the group is charged once
                claim = self.group.claims.get(use.id)
                if claim is not None and claim.allocation is not None and _held_elsewhere(claim, members):
                    self.lines.append(ChargeLine(use.label, NONE, "already allocated to pods outside the "
                                                 "group, charged where it was first admitted"))
                    continue
                uses[use.id] = use
        return list(uses.values())

    def _pod_claims(self, pod: Pod) -> Iterable[_ClaimUse]:
        node = self._node(pod)
        for entry in pod.resource_claims:
            name = pod.claim_name_for(entry)
            claim = self.group.claims.get(f"{pod.namespace}/{name}") if name else None
            if claim is not None:
                planned = self.placement.allocations.get(f"{claim.namespace}/{claim.name}") or \
                    self.placement.allocations.get(pod.pending_claim_key(entry.name))
                yield _ClaimUse(claim.key, f"ResourceClaim {claim.key}", claim.spec,
                                claim.allocation or planned, node)
            elif entry.resource_claim_name is not None:
                raise Unchargeable(f"pod {pod.key} uses ResourceClaim {pod.namespace}/"
                                   f"{entry.resource_claim_name}, which does not exist", permanent=False)
            else:
                yield self._template_use(pod, entry.name, entry.resource_claim_template_name or "", node)
        extended = self._extended_claim(pod)
        if extended is not None:
            yield _ClaimUse(extended.key, f"ResourceClaim {extended.key} (extended resources of pod "
                            f"{pod.key})", extended.spec, extended.allocation, node)

    def _template_use(self, pod: Pod, entry: str, template_name: str, node: str | None) -> _ClaimUse:
        template = self.group.templates.get(f"{pod.namespace}/{template_name}")
        if template is None:
            raise Unchargeable(f"pod {pod.key} claim {entry} uses ResourceClaimTemplate {pod.namespace}/"
                               f"{template_name}, which does not exist", permanent=False)
        claim_id = pod.pending_claim_key(entry)
        return _ClaimUse(claim_id, f"pod {pod.key} claim {entry} (template {template_name})", template.spec,
                         self.placement.allocations.get(claim_id), node)

    def _node(self, pod: Pod) -> str | None:
        return self.placement.nodes.get(pod.key) or pod.node_name or None

    def _extended_claim(self, pod: Pod) -> ResourceClaim | None:
        if self.extended_claims is None:
            given = self.group.extended
            self.extended_claims = given if given is not None else extended_claims(self.group.claims.values())
        return self.extended_claims.get((pod.namespace, pod.name))

    # ----- one claim --------------------------------------------------------------------------------
    def _charge_claim(self, use: _ClaimUse) -> None:
        if use.allocation is not None:
            self._charge_allocation(use)
        elif self.allocated_only:
            self.unallocated.append(use.label)
        else:
            for request in use.spec.requests:
                amounts = self._worst_request(use, request)
                self.lines.append(ChargeLine(f"{use.label}, request {request.name}", amounts,
                                             self._estimate_note(request)))

    def _estimate_note(self, request: DeviceRequest) -> str:
        classes = sorted({s.device_class_name for s in request.alternatives})
        if not any(u.unit.counts_class(c) for u in self.units for c in classes):
            return f"no quota unit counts devices of class {', '.join(classes)}"
        return "worst case, devices not chosen yet"

    def _charge_allocation(self, use: _ClaimUse) -> None:
        assert use.allocation is not None
        selections = {r.name: r.exactly for r in use.spec.requests if r.exactly is not None}
        selections.update({f"{r.name}/{s.name}": s for r in use.spec.requests for s in r.first_available})
        for result in use.allocation.results:
            source = f"{use.label}, request {result.request}, device {result.device_id}"
            selection = selections.get(result.request)
            if selection is None:
                raise Unchargeable(f"{use.label}: its allocation names request {result.request}, which the "
                                   "claim does not have", permanent=True)
            if result.admin_access:
                self.lines.append(ChargeLine(source, NONE, "admin access is not charged"))
                continue
            amounts = None if result.consumed_capacity else self._any_device(selection)
            if amounts is None:
                device = self.inventory.devices_by_id.get(result.device_id)
                amounts = Amounts.of({u.name: self._value(use, u, device, selection, result.consumed_capacity)
                                      for u in self.units})
            self.lines.append(ChargeLine(source, amounts))

    def _any_device(self, selection: DeviceSelection) -> Amounts | None:
        """What any device taken for `selection` counts, when no unit looks at the device; else None."""
        known = self.same_for_any.get(id(selection))
        if known is None:
            fixed = all(_counts_any_device_alike(u, selection) for u in self.units)
            known = self.same_for_any[id(selection)] = (
                selection, Amounts.of({u.name: device_value(u, None, selection) for u in self.units}) if fixed
                else None)
        return known[1]

    def _worst_request(self, use: _ClaimUse, request: DeviceRequest) -> Amounts:
        if not request.alternatives:
            raise Unchargeable(f"{use.label}, request {request.name}: neither exactly nor firstAvailable "
                               "is set", permanent=True)
        worst = NONE
        for selection in request.alternatives:
            worst = worst.maximum(self._worst_selection(use, request.name, selection))
        return worst

    def _worst_selection(self, use: _ClaimUse, request: str, selection: DeviceSelection) -> Amounts:
        key = (id(selection), use.node)
        if key not in self.estimates:
            self.estimates[key] = (selection, self._estimate_selection(use, request, selection))
        return self.estimates[key][1]

    def _estimate_selection(self, use: _ClaimUse, request: str, selection: DeviceSelection) -> Amounts:
        where = request if selection.name == request else f"{request}/{selection.name}"
        counting = [u for u in self.units if u.unit.counts_class(selection.device_class_name)]
        if selection.admin_access or not counting:
            return NONE  # admin access is free; no unit counts devices of this class
        device_class = self.inventory.device_classes.get(selection.device_class_name)
        if device_class is None:
            raise Unchargeable(f"{use.label}, request {where}: DeviceClass {selection.device_class_name} "
                               "does not exist", permanent=False)
        if selection.allocation_mode == EXACT_COUNT:
            return Amounts.of({u.name: self._worst_count(use, where, u, device_class, selection)
                               for u in counting})
        if selection.allocation_mode == ALL:
            return self._worst_all(use, where, counting, device_class, selection)
        raise Unchargeable(f"{use.label}, request {where}: allocationMode {selection.allocation_mode} is not "
                           "understood, so it cannot be charged", permanent=True)

    def _worst_count(self, use: _ClaimUse, where: str, unit: CompiledUnit, device_class: DeviceClass,
                     selection: DeviceSelection) -> Fraction:
        count = selection.count
        if unit.unit.counting is Counting.DEVICES and unit.select is None:
            return Fraction(count)  # whichever devices are picked, `count` of them
        candidates = self._candidates(use, where, device_class, selection, use.node)
        if not candidates:
            on = f" on node {use.node}" if use.node else ""
            raise Unchargeable(f"{use.label}, request {where}: no device{on} matches class "
                               f"{selection.device_class_name} and the request's selectors, so what it "
                               f"counts in {unit.unit.label} cannot be known", permanent=False)
        values = sorted((self._value(use, unit, d, selection) for d in candidates), reverse=True)
        if any(d.allow_multiple_allocations for d in candidates):
            return values[0] * count  # shares: the same device may be picked again
        padding = values[0] * max(0, count - len(values))
        return sum(values[:count], Fraction(0)) + padding

    def _worst_all(self, use: _ClaimUse, where: str, counting: Sequence[CompiledUnit],
                   device_class: DeviceClass, selection: DeviceSelection) -> Amounts:
        nodes = [use.node] if use.node is not None else sorted(self.inventory.devices_by_node)
        worst: Amounts | None = None
        for node in nodes:
            devices = self._candidates(use, where, device_class, selection, node)
            if devices:
                amounts = Amounts.of([(u.name, self._value(use, u, d, selection))
                                      for u in counting for d in devices])
                worst = amounts if worst is None else worst.maximum(amounts)
        if worst is None:
            on = f"node {use.node}" if use.node else "any node"
            raise Unchargeable(f"{use.label}, request {where}: allocationMode All matches no device of class "
                               f"{selection.device_class_name} on {on}, so how many it gets cannot be "
                               "known", permanent=False)
        return worst

    def _candidates(self, use: _ClaimUse, where: str, device_class: DeviceClass,
                    selection: DeviceSelection, node: str | None) -> tuple[Device, ...]:
        key = (self.matches, device_class.name, selection.selectors, node)
        selected = self.inventory.selected.get(key)
        if selected is None:
            try:
                selected = tuple(d for d in self.inventory.devices(node) if self.matches(d, device_class, selection))
            except DraqError as err:
                raise Unchargeable(f"{use.label}, request {where}: {err}", permanent=True) from None
            self.inventory.selected[key] = selected
        return selected

    def _value(self, use: _ClaimUse, unit: CompiledUnit, device: Device | None, selection: DeviceSelection,
               consumed: Mapping[str, Quantity] | None = None) -> Fraction:
        try:
            return device_value(unit, device, selection, consumed)
        except Unchargeable as err:
            raise Unchargeable(f"{use.label}: {err}", permanent=err.permanent) from None

    # ----- pod requests -----------------------------------------------------------------------------
    def _charge_extended_resources(self, pod: Pod, requests: Mapping[str, Fraction]) -> None:
        if self._extended_claim(pod) is not None:
            return  # the scheduler made its claim already; it was charged with the others
        classes = tuple(self.inventory.device_classes.values())
        allocation = self.placement.allocations.get(extended_claim_id(pod))
        if allocation is not None:
            spec = extended_resource_claim_spec(pod, classes)
            self._charge_allocation(_ClaimUse(extended_claim_id(pod), f"pod {pod.key} extended resources",
                                              spec, allocation, self._node(pod)))
            return
        by_resource: dict[str, list[DeviceRequest]] = {}
        for resource, request in _extended_requests(pod, classes):
            by_resource.setdefault(resource, []).append(request)
        for resource, amount in sorted(requests.items()):
            self._charge_extended(pod, resource, amount, by_resource.get(resource, []))

    def _charge_extended(self, pod: Pod, resource: str, amount: Fraction,
                         dra_requests: Sequence[DeviceRequest]) -> None:
        source = f"pod {pod.key} requests {resource}"
        plugin = Amounts.of({u.name: amount * e.counts_as for u in self.units
                             if (e := u.unit.extended(resource)) is not None})
        node = self._node(pod)
        if not dra_requests or (node is not None and
                                resource in self.inventory.extended_by_node.get(node, frozenset())):
            if plugin:
                self.lines.append(ChargeLine(source, plugin, "device plugin"))
            return
        use = _ClaimUse(extended_claim_id(pod), f"pod {pod.key} extended resource {resource}",
                        ClaimSpec(tuple(dra_requests)), None, node)
        if self.allocated_only:
            self.unallocated.append(use.label)
            return
        dra = sum((self._worst_request(use, r) for r in dra_requests), NONE)
        if node is None:
            self.lines.append(ChargeLine(source, dra.maximum(plugin),
                                         "worst of device plugin and DRA devices, node not chosen yet"))
        else:
            self.lines.append(ChargeLine(source, dra, f"DRA devices, node {node} has no device plugin for it"))

    def _charge_core(self, pod: Pod, requests: Mapping[str, Fraction]) -> None:
        amounts = Amounts.of({u.name: requests.get(u.unit.resource, Fraction(0)) for u in self.units
                              if u.unit.counting is Counting.CORE})
        if amounts:
            self.lines.append(ChargeLine(f"pod {pod.key} requests", amounts))


def _counts_any_device_alike(unit: CompiledUnit, selection: DeviceSelection) -> bool:
    """Whether `device_value` gives the same for every device taken for `selection` without looking at it."""
    spec = unit.unit
    return spec.counting is Counting.CORE or not spec.counts_class(selection.device_class_name) or (
        spec.counting is Counting.DEVICES and unit.select is None)


def _total(lines: Iterable[ChargeLine]) -> Amounts:
    """The sum of the lines' amounts per unit (as `Amounts.of`): the lines that share one Amounts (every device
    valued alike, `_Charger._any_device`) added once times their number, whole numbers summed as integers."""
    times: dict[int, tuple[Amounts, int]] = {}
    for line in lines:
        known = times.get(id(line.amounts))
        times[id(line.amounts)] = (line.amounts, 1 if known is None else known[1] + 1)
    whole: dict[str, int] = {}
    parts: list[tuple[str, Fraction]] = []
    for amounts, count in times.values():
        for unit, value in amounts:
            if value.denominator == 1:
                whole[unit] = whole.get(unit, 0) + value.numerator * count
            else:
                parts.append((unit, value * count))
    return Amounts.of([*whole.items(), *parts])


def _held_elsewhere(claim: ResourceClaim, members: set[str]) -> bool:
    return any(r.resource != "pods" or r.name not in members for r in claim.reserved_for)


def extended_resource_claim_spec(pod: Pod, classes: Iterable[DeviceClass]) -> ClaimSpec:
    """The claim the scheduler makes for a pod's DRA-backed extended resources (KEP 5004).

    One ExactCount request per (container, resource), named `container-<i>-request-<j>`: containers
    in order, resources by name. A request that is not a whole number of devices cannot be charged.
    """
    return ClaimSpec(tuple(request for _, request in _extended_requests(pod, tuple(classes))))


def _extended_requests(pod: Pod, classes: tuple[DeviceClass, ...]) -> list[tuple[str, DeviceRequest]]:
    try:
        return extended_requests(pod.containers, lambda resource: extended_resource_class(resource, classes),
                                 first_index=len(pod.init_containers))
    except NotWholeDevices as err:
        raise Unchargeable(f"pod {pod.key} {err}", permanent=True) from None
