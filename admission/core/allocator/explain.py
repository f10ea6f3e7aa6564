""""Why not": per request, how many devices matched, how many were free, and what stood in the way."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from admission.core.allocator.api import Allocator
from admission.core.allocator.errors import AllocationError
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
    """The explanation for the first node that comes closest to fitting."""
    best: Explanation | None = None
    for node in nodes:
        current = explain(allocator, node, claims, usage)
        if best is None or current.score > best.score:
            best = current
            if best.score == 0:
                break  # nothing comes closer
    return best


def _alternative(search: NodeSearch, plan: ClaimSearch, alternative: Alternative) -> RequestExplanation:
    matched = free = 0
    blocked: Counter[str] = Counter()
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
            blocked[reason] += 1
    wanted = None if alternative.all_devices is not None else alternative.count
    return RequestExplanation(plan.claim.key, alternative.result_name, alternative.device_class.name, wanted,
                              matched, free, dict(blocked), error)
