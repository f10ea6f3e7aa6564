"""`find_gaps`: the accounts and every gap between them, from one set of objects. Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction

from admission.core.cycle import charge_corrections, charging_inventory, collect_groups, is_managed
from admission.core.gaps.holdings import Holdings, find_holdings, is_extended, is_scheduler_claim
from admission.core.gaps.inputs import GapInput
from admission.core.gaps.membership import Place, Placer, PodPlace, is_live
from admission.core.gaps.native import NativeView, limit_gaps, native_accounts
from admission.core.gaps.nodes import DoubleOffers
from admission.core.gaps.report import Account, Gap, GapKind, GapReport, measured
from admission.core.labels import GROUP_LABEL
from admission.core.models import DeviceClass, Pod
from admission.core.nodefit import pod_requests
from admission.core.quota import CompiledUnit, Counting, Inventory, Phase, extended_resource_class

_SHOWN = 3
OFF_QUEUE = frozenset({Place.OUTSIDE, Place.ALLOWED})
_OFF_QUEUE_KINDS = frozenset({GapKind.OUTSIDE_QUEUES, GapKind.ALLOWED_OFF_QUEUE})


def find_gaps(data: GapInput) -> GapReport:
    """Every account (held vs charged per namespace, ClusterQueue and unit; native quota per resource)
    and every gap, sorted by kind, namespace, queue, node and measure."""
    inventory = charging_inventory(data.snapshot, data.gates)
    placer = Placer(data.namespace_labels, data.local_queues, data.pod_groups)
    holdings = find_holdings(data, inventory, placer)
    offers = DoubleOffers(data)
    native, counts, native_notes = native_accounts(data, NativeView(data, holdings))
    gaps = [*_charge_gaps(data, inventory), *_held_without_charge(data, holdings), *_uncounted(data, placer),
            *_extended_via_dra(data, holdings), *offers.gaps(), *counts, *limit_gaps(data)]
    gaps.sort(key=lambda g: (list(GapKind).index(g.kind), g.namespace, g.cluster_queue, g.node, g.measure, g.message))
    notes = (*data.notes, *holdings.notes, *offers.notes, *native_notes)
    return GapReport(tuple(gaps), _accounts(data, holdings), tuple(native), tuple(dict.fromkeys(notes)))


# ----- accounts -----------------------------------------------------------------------------------
def _accounts(data: GapInput, holdings: Holdings) -> tuple[Account, ...]:
    held: dict[tuple[str, str, str], Fraction] = defaultdict(Fraction)
    charged: dict[tuple[str, str, str], Fraction] = defaultdict(Fraction)
    for holding in holdings.items:
        queue = "" if holding.place.place in OFF_QUEUE else holding.place.cluster_queue
        for unit, amount in holding.amounts:
            held[(holding.namespace, queue, unit)] += amount
    for group in data.pod_groups:
        if group.holds_quota:
            for unit, amount in group.charge:
                charged[(group.namespace, group.cluster_queue, unit)] += amount
    return tuple(Account(*key, held.get(key, Fraction(0)), charged.get(key, Fraction(0)))
                 for key in sorted(set(held) | set(charged)))


# ----- ChargeDiffers ------------------------------------------------------------------------------
def _charge_gaps(data: GapInput, inventory: Inventory) -> list[Gap]:
    # Only running groups can be corrected (`charge_corrections`), and a group's view is made from its own
    # pods and PodGroup alone: the others, pending by the thousand, are not collected.
    running = [g for g in data.pod_groups if g.phase is Phase.RUNNING]
    if not running:
        return []
    keys = {(g.namespace, g.name) for g in running}
    managed = [p for p in data.snapshot.pods.values()
               if (p.namespace, p.labels.get(GROUP_LABEL)) in keys and is_managed(p)]
    groups = {g.key: g for g in collect_groups(managed, running)}
    corrections = charge_corrections(groups.values(), data.snapshot.claims, data.snapshot.templates, data.units,
                                     inventory, data.matches)
    gaps = []
    for correction in corrections:
        group = groups[correction.group]
        assert group.pod_group is not None
        objects = (f"PodGroup {group.key}", *(f"Pod {p.key}" for p in group.pods if is_live(p)))
        for difference in correction.reconciliation.differences:
            message = (f"PodGroup {group.key} is charged {measured(difference.unit, difference.charged)}, its "
                       f"running members' claims hold {measured(difference.unit, difference.allocated)}")
            gaps.append(Gap(GapKind.CHARGE_DIFFERS, difference.unit, difference.allocated - difference.charged,
                            message, group.namespace, group.pod_group.cluster_queue, objects=objects))
    return gaps


# ----- OutsideQueues, BypassedAdmission ------------------------------------------------------------
@dataclass
class _Held:
    """What one gap adds up: its size, the objects behind it and the reasons, each named once."""

    size: Fraction = Fraction(0)
    objects: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def add(self, amount: Fraction, objects: Iterable[str], reason: str = "") -> None:
        self.size += amount
        self.objects += [o for o in objects if o not in self.objects]
        if reason and reason not in self.reasons:
            self.reasons.append(reason)


def _held_without_charge(data: GapInput, holdings: Holdings) -> list[Gap]:
    device_units = {u.name for u in data.units if u.unit.counting is not Counting.CORE}
    found: dict[tuple[GapKind, str, str, str, str], _Held] = defaultdict(_Held)
    for holding in holdings.items:
        kind = _unadmitted_kind(holding.place)
        if kind is None:
            continue
        group = holding.place.group if kind is GapKind.BYPASSED_ADMISSION else ""
        for unit, amount in holding.amounts:
            if unit in device_units:
                found[(kind, holding.namespace, holding.place.cluster_queue, group, unit)].add(
                    amount, holding.objects, holding.place.reason)
    return [_held_gap(kind, namespace, queue, unit, entry)
            for (kind, namespace, queue, _, unit), entry in sorted(found.items())]


def _unadmitted_kind(place: PodPlace) -> GapKind | None:
    if place.place is Place.OUTSIDE:
        return GapKind.OUTSIDE_QUEUES
    if place.place is Place.ALLOWED:
        return GapKind.ALLOWED_OFF_QUEUE
    if place.place is Place.BYPASSED:
        return GapKind.BYPASSED_ADMISSION
    return None


def _held_gap(kind: GapKind, namespace: str, queue: str, unit: str, entry: _Held) -> Gap:
    where = f"outside every queue in namespace {namespace}" if kind in _OFF_QUEUE_KINDS else \
        f"without an admission in namespace {namespace} (ClusterQueue {queue or '(unknown)'})"
    message = (f"{measured(unit, entry.size)} held {where} by {_listed(entry.objects)}; "
               f"{'; '.join(entry.reasons)}")
    return Gap(kind, unit, entry.size, message, namespace, queue, objects=tuple(entry.objects))


# ----- UncountedExtendedResource ------------------------------------------------------------------
def _uncounted(data: GapInput, placer: Placer) -> list[Gap]:
    classes = tuple(data.snapshot.inventory.classes.values())
    requesting = []  # the live pods that request an extended resource no unit counts, and those resources
    for pod in data.snapshot.pods.values():
        if not is_live(pod) or not any(is_extended(name) for name in _resource_names(pod)):
            continue
        uncounted = [(resource, amount) for resource, amount in sorted(pod_requests(pod).items())
                     if is_extended(resource) and amount and not _counted(resource, data.units, classes)]
        if uncounted:
            requesting.append((pod, uncounted))
    found: dict[tuple[str, str, str], _Held] = defaultdict(_Held)
    for pod, uncounted in sorted(requesting, key=lambda found: found[0].key):
        place = placer.place(pod)
        if place.place in OFF_QUEUE:
            continue
        for resource, amount in uncounted:
            found[(pod.namespace, place.cluster_queue, resource)].add(amount, [f"Pod {pod.key}"])
    return [Gap(GapKind.UNCOUNTED_EXTENDED, resource, entry.size,
                f"pods of ClusterQueue {queue or '(unknown)'} request {measured(resource, entry.size)}, which no "
                f"QuotaUnit counts: the queue does not limit it ({_listed(entry.objects)})",
                namespace, queue, objects=tuple(entry.objects))
            for (namespace, queue, resource), entry in sorted(found.items())]


def _resource_names(pod: Pod) -> Iterator[str]:
    """Every resource name `pod_requests` can give the pod (its pod-level resources are native ones only)."""
    for container in (*pod.containers, *pod.init_containers):
        yield from container.limits
        yield from container.requests
    yield from pod.overhead


def _counted(resource: str, units: tuple[CompiledUnit, ...], classes: tuple[DeviceClass, ...]) -> bool:
    """Some unit counts the resource: it lists it, or counts the class that serves it through DRA."""
    if any(u.unit.extended(resource) is not None for u in units):
        return True
    device_class = extended_resource_class(resource, classes)
    return device_class is not None and any(u.unit.counts_class(device_class.name) for u in units)


# ----- ExtendedResourceViaDRA ---------------------------------------------------------------------
def _extended_via_dra(data: GapInput, holdings: Holdings) -> list[Gap]:
    classes = tuple(data.snapshot.inventory.classes.values())
    found: dict[tuple[str, str, str], _Held] = defaultdict(_Held)
    for holding in holdings.items:
        if holding.claim is None or not is_scheduler_claim(holding.claim):
            continue
        for pod in holding.pods:
            for resource, amount in sorted(pod_requests(pod).items()):
                device_class = extended_resource_class(resource, classes)
                if device_class is None or device_class.name not in holding.devices:
                    continue
                for unit in data.units:
                    extended = unit.unit.extended(resource)
                    if extended is not None and not unit.unit.counts_class(device_class.name):
                        found[(holding.namespace, holding.place.cluster_queue, unit.name)].add(
                            amount * extended.counts_as, holding.objects, f"{resource} as class {device_class.name}")
    return [_via_dra_gap(namespace, queue, unit, entry) for (namespace, queue, unit), entry in sorted(found.items())]


def _via_dra_gap(namespace: str, queue: str, unit: str, entry: _Held) -> Gap:
    served = ", ".join(entry.reasons)
    message = (f"the scheduler gave pods their {served} through DRA claims ({_listed(entry.objects)}); unit "
               f"{unit} counts the extended resource but not that class, so {measured(unit, entry.size)} are "
               "charged nowhere")
    return Gap(GapKind.EXTENDED_VIA_DRA, unit, entry.size, message, namespace, queue, objects=tuple(entry.objects))


def _listed(objects: list[str]) -> str:
    shown = ", ".join(objects[:_SHOWN])
    return shown + (f" and {len(objects) - _SHOWN} more" if len(objects) > _SHOWN else "")

