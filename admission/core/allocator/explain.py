""""Why not": per request, how many devices matched, how many were free, and what stood in the way."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from admission.core.allocator.api import Allocator
from admission.core.allocator.errors import AllocationError
from admission.core.allocator.inventory import NodeView
from admission.core.allocator.search import Alternative, ClaimSearch, NodeSearch
from admission.core.allocator.usage import Usage
from admission.core.models import Node, ResourceClaim


@dataclass(frozen=True, slots=True)
class RequestExplanation:
    claim: str
    request: str  # `req` or `req/sub`
    device_class: str
    wanted: int | None  # None: allocation mode All
    matched: int  # devices on the node that pass the class and request selectors
    free: int  # of those, devices that could be taken right now
    blocked: dict[str, int] = field(default_factory=dict)  # reason -> devices
    error: str | None = None

    @property
    def short_by(self) -> int:
        return max(0, (self.wanted or 1) - self.free)

    def describe(self) -> str:
        wanted = "all matching" if self.wanted is None else str(self.wanted)
        text = (f"claim {self.claim}, request {self.request} (class {self.device_class}): wants {wanted}, "
                f"{self.matched} matched the selectors, {self.free} free")
        if self.blocked:
            text += " (" + ", ".join(f"{n} {reason}" for reason, n in sorted(self.blocked.items())) + ")"
        if self.error:
            text += f"; {self.error}"
        return text


@dataclass(frozen=True, slots=True)
class Explanation:
    node: str
    requests: tuple[RequestExplanation, ...]
    notes: tuple[str, ...] = ()

    @property
    def score(self) -> int:
        """Higher is closer to fitting (used to pick the "best" node to report)."""
        return -sum(r.short_by for r in self.requests)

    def lines(self) -> list[str]:
        out = [f"node {self.node}:"]
        out.extend(f"  {r.describe()}" for r in self.requests)
        out.extend(f"  note: {n}" for n in self.notes)
        if all(r.short_by == 0 for r in self.requests) and self.requests and not self.notes:
            out.append("  every request has enough free devices on its own: the combination fails "
                       "(constraints, devices wanted by several requests, counters or capacity)")
        return out


def explain(allocator: Allocator, node: Node | str, claims: Sequence[ResourceClaim],
            usage: Usage | None = None) -> Explanation:
    """Explain, request by request, how the claims stand on the node (against the cluster's usage)."""
    target = allocator.snapshot.node(node) if isinstance(node, str) else node
    search = allocator.search(target, usage)
    notes = [f"resource pool {p.id} is incomplete (being updated): its devices are not used"
             for p in search.view.pools if p.incomplete and not p.usable]
    notes += [f"resource pool {p.id} is invalid ({p.invalid}): its devices are not used"
              for p in search.view.pools if p.invalid is not None]
    requests: list[RequestExplanation] = []
    for claim in claims:
        if claim.allocation is not None:
            continue
        try:
            plan = search.plan_claim(claim)
        except AllocationError as err:
            notes.append(str(err))
            continue
        for alternatives in plan.requests:
            requests.extend(_alternative(search, plan, a) for a in alternatives)
    return Explanation(target.name, tuple(requests), tuple(notes))


def explain_best(allocator: Allocator, nodes: Iterable[Node | str], claims: Sequence[ResourceClaim],
                 usage: Usage | None = None) -> Explanation | None:
    """The explanation for the first node that comes closest to fitting. A node's explanation is kept by the
    allocator for claims of the same specs while the node's devices are used alike (`Allocator.explained`):
    the groups of one shape that do not fit in one cycle are explained again only on the nodes that changed."""
    in_use = usage if usage is not None else allocator.usage
    if in_use.shared or in_use.consumed:
        return _best(explain(allocator, node, claims, in_use) for node in nodes)
    shape = _claims_shape(claims)
    keys = tuple(c.key for c in claims)
    named: dict[int, tuple[str, ...]] = {}  # by id(explanation): the claim keys it names

    def kept(node: Node | str) -> Explanation:
        found, names = _kept(allocator, node, claims, keys, in_use, shape)
        named[id(found)] = names
        return found

    best = _best_bounded(allocator, nodes, claims, in_use, kept)
    if best is None:
        return None
    if named[id(best)] == keys:
        return best
    renamed = dict(zip(named[id(best)], keys, strict=True))
    return dataclasses.replace(best, requests=tuple(dataclasses.replace(r, claim=renamed.get(r.claim, r.claim))
                                                    for r in best.requests))


def _best(explanations: Iterable[Explanation]) -> Explanation | None:
    best: Explanation | None = None
    for current in explanations:
        if best is None or current.score > best.score:
            best = current
            if best.score == 0:
                break  # nothing comes closer
    return best


def _best_bounded(allocator: Allocator, nodes: Iterable[Node | str], claims: Sequence[ResourceClaim],
                  usage: Usage, explained: Callable[[Node | str], Explanation]) -> Explanation | None:
    """`_best`, explaining only the nodes that could come closer than the best one so far. Once the
    claims' requests are known apart from any node (`Allocator.known_wants`: after one explanation at the
    latest), a request finds free no more devices than the node has out of use (`usage` holds no shared
    device, and no request has admin access: an allocated device is in use for every request), so a node's
    score is at most `-sum(max(0, wanted - out of use))`; the first node of the highest score is the same."""
    best: Explanation | None = None
    best_score = 0
    wants: tuple[int, ...] | None = None
    in_use = usage.exclusive  # every device in use: `usage` holds no shared one
    for node in nodes:
        if wants is not None and best is not None:
            devices = allocator.device_ids(node)
            out_of_use = len(devices) - len(in_use.intersection(devices))
            if -sum(max(0, (wanted or 1) - out_of_use) for wanted in wants) <= best_score:
                continue
        current = explained(node)
        if wants is None:
            wants = allocator.known_wants(claims)
        score = current.score
        if best is None or score > best_score:
            best, best_score = current, score
            if score == 0:
                break  # nothing comes closer
    return best


def _claims_shape(claims: Sequence[ResourceClaim]) -> str:
    """Equal for claims explained alike: their specs and allocations, and which of them are the same claim."""
    first: dict[str, int] = {}
    return repr([(c.spec, c.allocation, first.setdefault(c.key, len(first))) for c in claims])


def _kept(allocator: Allocator, node: Node | str, claims: Sequence[ResourceClaim], keys: tuple[str, ...],
          usage: Usage, shape: str) -> tuple[Explanation, tuple[str, ...]]:
    """The node's explanation, and the claim keys it names (those of the claims it was made for)."""
    target = allocator.snapshot.node(node) if isinstance(node, str) else node
    key = (target.name, shape, _node_state(allocator.view(target), usage))
    seen = allocator.explained.get(key)
    if seen is not None:
        return seen
    found = explain(allocator, target, claims, usage)
    if not found.notes and all(r.error is None for r in found.requests):  # notes and errors may name a claim
        allocator.explained[key] = (found, keys)
    return found, keys


def _node_state(view: NodeView, usage: Usage) -> tuple[object, ...]:
    """What an explanation reads of the usage on one node: which of its devices are in use, and the devices
    in use in each of its pools (their counters)."""
    is_allocated = usage.is_allocated
    return (tuple(is_allocated(d.id) for d in view.devices),
            tuple(frozenset(usage.by_pool.get(f"{p.driver}/{p.name}", ())) for p in view.pools))


def _alternative(search: NodeSearch, plan: ClaimSearch, alternative: Alternative) -> RequestExplanation:
    matched = free = 0
    blocked: dict[str, int] = {}
    error = None
    for device in search.view.devices:
        try:
            if not search.selectable(plan.owner, alternative, device):
                continue
        except AllocationError as err:
            error = str(err)
            break
        matched += 1
        reason = search.blocker(plan, alternative, device)
        if reason is None:
            free += 1
        else:
            blocked[reason] = blocked.get(reason, 0) + 1
    wanted = None if alternative.all_devices is not None else alternative.count
    return RequestExplanation(plan.claim.key, alternative.result_name, alternative.device_class.name, wanted,
                              matched, free, blocked, error)
