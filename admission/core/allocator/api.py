"""The allocator's public face: a snapshot, and "can these claims be allocated on this node?"."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Any

from admission.core.allocator.errors import INVALID_POOLS, AllocationError, MissingDeviceClass
from admission.core.allocator.inventory import NodeView, SnapshotInventory
from admission.core.allocator.results import ResultMemo, build_allocation
from admission.core.allocator.search import ClaimMemo, NodeSearch, SearchBudgetExceeded, missing_class
from admission.core.allocator.selectors import SelectorEvaluator
from admission.core.allocator.usage import Usage
from admission.core.errors import InvalidInput
from admission.core.features import FeatureGates
from admission.core.models import (
    AllocationResult,
    DeviceClass,
    Model,
    Node,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from admission.core.models.device_taint_rule import DeviceTaintRule, apply_taint_rules
from admission.core.nodefit import NodeFitIndex

# draq's own limit on one node's search, in device checks (a counter a device takes counts as ten): about
# a second of draq's CPU at most, so that no cycle or review spends longer on one node. Beyond it the
# answer is "gave up": not known, the group waits (the scheduler, with its 10 s filter timeout, may answer
# or time out too).
DEFAULT_BUDGET = 1_000_000


class Status(Enum):
    ALLOCATED = "allocated"
    UNFIT = "does not fit"
    NODE_ERROR = "node error"  # only this node fails (invalid resource pools)
    ERROR = "error"  # the scheduler would abort the pod's attempt on every node


@dataclass(slots=True)  # not frozen: one is made per node tried, and a frozen one costs more to make
class Outcome:
    """The answer for one node (not to be changed). `allocations` maps claim keys (`ns/name`) to results
    when ALLOCATED."""

    node: str
    status: Status
    allocations: Mapping[str, AllocationResult] = field(default_factory=dict)
    message: str | None = None
    # Set with ERROR when a request names a DeviceClass that does not exist: upstream's allocator fails
    # with an error naming it, and the scheduler reports the pod Unschedulable on every node.
    missing_class: str | None = None
    # Set when the search gave up (as the scheduler's filter timeout would).
    gave_up: bool = False

    @property
    def allocatable(self) -> bool:
        return self.status is Status.ALLOCATED

    @property
    def is_error(self) -> bool:
        return self.status in (Status.ERROR, Status.NODE_ERROR)


class Snapshot:
    """Immutable view of the objects allocation depends on, indexed once.

    `updated` gives the next snapshot copy-on-write (as a cache hands a scheduler cycle its snapshot):
    what did not change is shared, with the node views, selector results, in-use devices and node-fit
    usage derived from it.
    """

    def __init__(self, nodes: Iterable[Node] = (), classes: Iterable[DeviceClass] = (),
                 slices: Iterable[ResourceSlice] = (), claims: Iterable[ResourceClaim] = (),
                 templates: Iterable[ResourceClaimTemplate] = (), pods: Iterable[Pod] = ()) -> None:
        self.inventory = SnapshotInventory(nodes, classes, slices)
        self.claims: dict[str, ResourceClaim] = {c.key: c for c in claims}
        self.templates: dict[str, ResourceClaimTemplate] = {f"{t.namespace}/{t.name}": t for t in templates}
        self.pods: dict[str, Pod] = {p.key: p for p in pods}
        self._usage: dict[FeatureGates, Usage] = {}

    def updated(self, *, nodes: Iterable[Node] | None = None, classes: Iterable[DeviceClass] | None = None,
                slices: Iterable[ResourceSlice] | None = None, claims: Iterable[ResourceClaim] | None = None,
                templates: Iterable[ResourceClaimTemplate] | None = None,
                pods: Iterable[Pod] | Mapping[str, Pod] | None = None,
                changed_pods: Iterable[str] | None = None) -> Snapshot:
        """This snapshot with the given kinds replaced (None: unchanged); itself when nothing is given.

        Equal to `Snapshot(...)` of the same objects; it only reuses what cannot have changed. `pods` may
        be given by key (then kept as given: not to be changed afterwards), with the keys of the pods that
        differ from this snapshot's in `changed_pods` (None: found by comparing).
        """
        if nodes is None and classes is None and slices is None and claims is None and templates is None \
                and pods is None:
            return self
        other = Snapshot.__new__(Snapshot)
        other.inventory = (self.inventory.updated(nodes, classes, slices)
                           if nodes is not None or classes is not None or slices is not None else self.inventory)
        other.claims = {c.key: c for c in claims} if claims is not None else self.claims
        other.templates = ({f"{t.namespace}/{t.name}": t for t in templates} if templates is not None
                           else self.templates)
        if pods is None:
            other.pods = self.pods
        elif isinstance(pods, dict):
            other.pods = pods
        elif isinstance(pods, Mapping):
            other.pods = dict(pods)
        else:
            other.pods = {p.key: p for p in pods}
        other._usage = self._usage if claims is None else {}
        fit = self.__dict__.get("node_fit")
        if fit is not None and classes is None:
            other.__dict__["node_fit"] = fit.updated(
                (self.nodes, other.nodes) if nodes is not None else None,
                (self.pods, other.pods) if pods is not None else None,
                None if changed_pods is None else set(changed_pods))
        return other

    @classmethod
    def from_models(cls, models: Iterable[Model]) -> Snapshot:
        buckets: dict[type, list[Model]] = {}
        for model in models:
            buckets.setdefault(type(model), []).append(model)
        return cls(
            nodes=buckets.get(Node, ()),  # type: ignore[arg-type]
            classes=buckets.get(DeviceClass, ()),  # type: ignore[arg-type]
            slices=apply_taint_rules(buckets.get(ResourceSlice, ()),  # type: ignore[arg-type]
                                     buckets.get(DeviceTaintRule, ())),  # type: ignore[arg-type]
            claims=buckets.get(ResourceClaim, ()),  # type: ignore[arg-type]
            templates=buckets.get(ResourceClaimTemplate, ()),  # type: ignore[arg-type]
            pods=buckets.get(Pod, ()),  # type: ignore[arg-type]
        )

    @property
    def nodes(self) -> Mapping[str, Node]:
        return self.inventory.nodes

    def node(self, name: str) -> Node:
        found = self.inventory.nodes.get(name)
        if found is None:
            raise InvalidInput(f"node {name}", "", "no such Node in the snapshot")
        return found

    def allocated_claims(self) -> list[ResourceClaim]:
        return [c for c in self.claims.values() if c.allocation is not None]

    def in_use(self, gates: FeatureGates) -> Usage:
        """The devices the snapshot's allocated claims hold, computed once per gate set; do not change it
        (`copy()` first)."""
        found = self._usage.get(gates)
        if found is None:
            found = self._usage[gates] = Usage.from_allocations(
                (c.allocation for c in self.allocated_claims() if c.allocation is not None), gates)
        return found

    @cached_property
    def node_fit(self) -> NodeFitIndex:
        """The node side of the scheduler's node filters (what bound pods use per node), built once."""
        return NodeFitIndex(self.nodes.values(), self.pods.values(), self.inventory.classes.values())


class Allocator:
    """Allocates claims on nodes of one snapshot under one feature-gate set.

    `usage` defaults to what the snapshot's allocated claims hold; pass another one (e.g. with
    devices promised to admitted-but-unbound groups) to `allocate`.
    """

    def __init__(self, snapshot: Snapshot, gates: FeatureGates, *,
                 budget: int | None = DEFAULT_BUDGET) -> None:
        self.snapshot = snapshot
        self.gates = gates
        self.budget = budget
        self.selectors: SelectorEvaluator = snapshot.inventory.derived(("selectors", gates),
                                                                       lambda: SelectorEvaluator(gates))
        self.usage = snapshot.in_use(gates)
        self._claims: ClaimMemo = {}
        self._results: ResultMemo = {}
        # Explanations by node, claims' shape and the node's usage (`explain_best`): with the claim keys they name.
        self.explained: dict[tuple[str, str, tuple[object, ...]], tuple[Any, tuple[str, ...]]] = {}
        self._described: dict[int, tuple[object, str]] = {}  # id -> (the object, its repr)
        # A gang member's candidate nodes by what decides them (`gang._candidates`), for every gang placed.
        self.gang_candidates: dict[object, Any] = {}
        self._device_ids: dict[str, tuple[str, ...]] = {}
        # (node, a pod's requests) -> (the node's use, what it lacks for them): `gang._resource_reasons`.
        self.node_reasons: dict[tuple[str, object], tuple[object, tuple[str, ...]]] = {}

    def device_ids(self, node: Node | str) -> tuple[str, ...]:
        """The ids of the devices in the node's view (kept per node name for this allocator's snapshot)."""
        if not isinstance(node, str):
            return tuple(d.id for d in self.view(node).devices)
        found = self._device_ids.get(node)
        if found is None:
            found = self._device_ids[node] = tuple(d.id for d in self.view(node).devices)
        return found

    @cached_property
    def node_names(self) -> list[str]:
        """The snapshot's nodes by name, the order in which a gang's members try them."""
        return sorted(self.snapshot.nodes)

    def described(self, value: object) -> str:
        """`repr(value)` of an immutable model object (a claim's spec, an allocation), worked out once per
        object: a gang search names the shape of every member it places by them."""
        known = self._described.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        text = repr(value)
        self._described[id(value)] = (value, text)
        return text

    def view(self, node: Node | str) -> NodeView:
        found = self.snapshot.node(node) if isinstance(node, str) else node
        return self.snapshot.inventory.node_view(found, self.gates)

    def allocate(self, node: Node | str, claims: Sequence[ResourceClaim],
                 usage: Usage | None = None) -> Outcome:
        """Can `claims` be allocated together on `node`?

        Already-allocated claims are not allocated again; they only need to be usable on the node.
        """
        target = self.snapshot.node(node) if isinstance(node, str) else node
        pending = _unique_unallocated(claims)
        missing = missing_class(pending, self.snapshot.inventory.classes)
        if missing is not None:  # the scheduler checks classes first, before any node
            where, name = missing
            return Outcome(target.name, Status.ERROR, missing_class=name, message=f"{where}: could not retrieve "
                           f"device class {name}: device class {name} does not exist")
        for claim in claims:
            selector = claim.allocation.node_selector if claim.allocation else None
            if selector is not None and not selector.matches(target.labels, target.name):
                return Outcome(target.name, Status.UNFIT,
                               message=f"claim {claim.key} is already allocated for other nodes")
        if not pending:
            return Outcome(target.name, Status.ALLOCATED)
        in_use = usage if usage is not None else self.usage
        if self._full_before_view(target.name, pending, in_use):
            return Outcome(target.name, Status.UNFIT)
        view = self.snapshot.inventory.node_view(target, self.gates)
        if self._first_request_has_no_device(view, pending, in_use):
            return Outcome(target.name, Status.UNFIT)
        search = NodeSearch(self.snapshot.inventory, view, in_use, self.gates, self.selectors, self.budget,
                            self._claims)
        try:
            search.prepare(pending)
            found = search.run()
        except MissingDeviceClass as err:
            return Outcome(target.name, Status.ERROR, message=str(err), missing_class=err.class_name)
        except AllocationError as err:
            return Outcome(target.name, Status.ERROR, message=str(err))
        except SearchBudgetExceeded as err:
            return Outcome(target.name, Status.UNFIT, gave_up=True, message=str(err))
        if not found:
            if any(p.invalid is not None for p in search.view.pools):
                return Outcome(target.name, Status.NODE_ERROR, message=INVALID_POOLS)
            return Outcome(target.name, Status.UNFIT)
        allocations = {plan.claim.key: build_allocation(plan, target, self.snapshot.inventory, self.gates,
                                                         self._results)
                       for plan in search.plans}
        return Outcome(target.name, Status.ALLOCATED, allocations)

    def search(self, node: Node, usage: Usage | None = None) -> NodeSearch:
        return NodeSearch(self.snapshot.inventory, self.snapshot.inventory.node_view(node, self.gates),
                          usage if usage is not None else self.usage, self.gates, self.selectors, self.budget,
                          self._claims)

    def fails_on_full_nodes(self, claims: Sequence[ResourceClaim]) -> bool:
        """Whether `allocate(node, claims, usage)` is sure to answer "does not fit" on every node whose
        devices are all in use (see `full_nodes`): the claims, all unallocated, passed the request checks
        on an earlier node, and the first one's first request is a plain `exactly` request."""
        if not claims or self.gates.consumable_capacity:
            return False
        memo = self._claims
        for claim in claims:
            known = memo.get(id(claim))
            if claim.allocation is not None or known is None or known[0] is not claim:
                return False
        alternatives = memo[id(claims[0])][2]
        if not alternatives or len(alternatives[0]) != 1:
            return False
        first = alternatives[0][0]
        return not (first.admin or first.all_devices is not None or first.request != first.result_name
                    or first.selection.count < 1)

    def known_wants(self, claims: Sequence[ResourceClaim]) -> tuple[int, ...] | None:
        """The devices each request alternative of the unallocated `claims` asks for, in the order an
        explanation lists them, when that is known before any node (every such claim passed the request
        checks on an earlier node) and each asks for counted devices without admin access; else None."""
        memo = self._claims
        wants: list[int] = []
        for claim in claims:
            if claim.allocation is not None:
                continue
            known = memo.get(id(claim))
            if known is None or known[0] is not claim:
                return None
            for alternatives in known[2]:
                for alternative in alternatives:
                    if alternative.admin or alternative.all_devices is not None:
                        return None
                    wants.append(alternative.selection.count)
        return tuple(wants)

    def full_nodes(self, usage: Usage, names: Iterable[str] | None = None) -> set[str]:
        """The nodes (of `names`, default all) that have devices, all in use, and only valid pools."""
        found = set()
        is_allocated = usage.is_allocated
        plain_devices = self.snapshot.inventory.plain_devices
        for name in self.snapshot.nodes if names is None else names:
            devices = plain_devices(name)  # the view's devices, its pools all valid, when not None
            if devices is None:
                view = self.view(name)
                devices = view.devices if view.pools_valid else ()
            if devices and all(is_allocated(d.id) for d in devices):
                found.add(name)
        return found

    def _full_before_view(self, node: str, pending: Sequence[ResourceClaim], usage: Usage) -> bool:
        """`_first_request_has_no_device` decided before the node's view is built, from its slices: when
        they are plain (`SnapshotInventory.plain_devices`), every pool is valid and the view's devices are
        theirs, so the answer needs only the count of free ones. Only where none is free: any free device
        would be tried against selectors, which may fail with an error the scheduler reports. Plain slices
        have no device that may be shared, so consumable capacity changes nothing here."""
        if not self._first_request_is_plain(pending):
            return False
        devices = self.snapshot.inventory.plain_devices(node)
        if not devices:
            return False
        is_allocated = usage.is_allocated
        for device in devices:  # noqa: SIM110 (a loop costs less than a generator, on every node tried)
            if not is_allocated(device.id):
                return False
        return True

    def _first_request_has_no_device(self, view: NodeView, pending: Sequence[ResourceClaim], usage: Usage) -> bool:
        """Whether the search is sure to fail at once, before any selector runs: every claim passed the
        request checks on an earlier node, the node's pools are all valid, and the first request (a plain
        `exactly` one, no admin access, no shared devices) finds every device of the node in use. The
        search would try each device, find it in use, and fail that request and with it the claims; the
        scheduler's answer is the same "does not fit"."""
        if not view.devices:
            return False  # nothing to try: the search is cheap, and may have pools to report
        if not view.pools_valid or self.gates.consumable_capacity or not self._first_request_is_plain(pending):
            return False
        is_allocated = usage.is_allocated
        for device in view.devices:  # noqa: SIM110 (a loop costs less than a generator, on every node tried)
            if not is_allocated(device.id):
                return False
        return True

    def _first_request_is_plain(self, pending: Sequence[ResourceClaim]) -> bool:
        """Every claim passed the request checks on an earlier node, and the first request is a plain
        `exactly` one: no admin access, at least one device."""
        memo = self._claims
        for claim in pending:
            known = memo.get(id(claim))
            if known is None or known[0] is not claim:
                return False
        alternatives = memo[id(pending[0])][2]
        if not alternatives or len(alternatives[0]) != 1:
            return False
        first = alternatives[0][0]
        return not (first.admin or first.all_devices is not None or first.request != first.result_name
                    or first.selection.count < 1)


def _unique_unallocated(claims: Sequence[ResourceClaim]) -> list[ResourceClaim]:
    seen: set[str] = set()
    pending = []
    for claim in claims:
        if claim.allocation is None and claim.key not in seen:
            seen.add(claim.key)
            pending.append(claim)
    return pending
