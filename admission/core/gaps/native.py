"""Native ResourceQuota next to what is really held and what draq's queues allow.

What a ResourceQuota counts (Kubernetes' quota evaluators, `pkg/quota/v1/evaluator/core`):
- `<class>.deviceclass.resource.k8s.io/devices`: per ResourceClaim, from the moment it exists, per
  `exactly` request its count (allocationMode All: 32, the most an allocation holds), per
  `firstAvailable` request the largest subrequest per class; admin access counts too;
- `requests.<extended resource>`: the requests of every pod that has not finished, scheduled or not;
  with DRAExtendedResource also the devices of claims whose class serves that name (explicit
  `extendedResourceName` or `deviceclass.resource.kubernetes.io/<class>`), except what the owning pod
  already counts for a claim the scheduler made for it.
What is really held: devices in claim allocations (admin access holds none), and the extended
resources of pods bound to a node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from admission.core.gaps.holdings import IMPLICIT_EXTENDED_PREFIX, Holdings, is_extended, is_scheduler_claim
from admission.core.gaps.inputs import GapInput
from admission.core.gaps.membership import is_live
from admission.core.gaps.report import Gap, GapKind, NativeAccount, measured
from admission.core.models import (
    ALL,
    ClaimSpec,
    DeviceClass,
    Pod,
    ResourceClaim,
    ResourceQuota,
    class_devices_resource,
    device_class_of,
    requested_resource,
)
from admission.core.nodefit import pod_requests
from admission.core.quota import CompiledUnit, Counting, extended_resource_class, format_amount

ALL_MODE_WORST_CASE = 32  # AllocationResultsMaxSize: what the quota counts for allocationMode All
EXTENDED_GATE = "DRAExtendedResource"
_SHOWN = 3  # objects named in a message; the gap's object list has all of them


@dataclass(frozen=True, slots=True)
class Contribution:
    """One object's part in a quota resource: what the quota counts for it and what it really holds."""

    obj: str
    counted: Fraction
    held: Fraction


def is_device_resource(resource: str) -> bool:
    """Quota resources that stand for devices: `<class>.deviceclass...`, `requests.<extended resource>`."""
    requested = requested_resource(resource)
    return device_class_of(resource) is not None or (requested is not None and is_extended(requested))


def claim_quota_devices(spec: ClaimSpec) -> dict[str, int]:
    """Devices per DeviceClass that the quota counts for a claim (admin access included)."""
    counts: dict[str, int] = {}
    for request in spec.requests:
        largest: dict[str, int] = {}
        for selection in request.alternatives:
            count = ALL_MODE_WORST_CASE if selection.allocation_mode == ALL else selection.count
            largest[selection.device_class_name] = max(largest.get(selection.device_class_name, 0), count)
        for device_class, count in largest.items():
            counts[device_class] = counts.get(device_class, 0) + count
    return counts


class NativeView:
    """Contributions to the device resources of native quota, per namespace."""

    def __init__(self, data: GapInput, holdings: Holdings) -> None:
        self.data = data
        self.classes = tuple(data.snapshot.inventory.classes.values())
        self.extended_gate = EXTENDED_GATE in data.gates
        self.held_devices = {h.claim.key: h.devices for h in holdings.items if h.claim is not None}

    def contributions(self, namespace: str, resource: str) -> list[Contribution]:
        device_class = device_class_of(resource)
        if device_class is not None:
            return [c for claim in self._claims(namespace)
                    if (c := self._class_devices(claim, device_class)) is not None]
        name = requested_resource(resource)
        if name is None:
            return []
        found = [c for pod in self._pods(namespace) if (c := self._pod_requests(pod, name)) is not None]
        if self.extended_gate:
            found += [c for claim in self._claims(namespace) if (c := self._claim_as_extended(claim, name)) is not None]
        return found

    def _claims(self, namespace: str) -> list[ResourceClaim]:
        return sorted((c for c in self.data.snapshot.claims.values() if c.namespace == namespace), key=lambda c: c.name)

    def _pods(self, namespace: str) -> list[Pod]:
        return sorted((p for p in self.data.snapshot.pods.values() if p.namespace == namespace and is_live(p)),
                      key=lambda p: p.name)

    def _class_devices(self, claim: ResourceClaim, device_class: str) -> Contribution | None:
        counted = Fraction(claim_quota_devices(claim.spec).get(device_class, 0))
        held = Fraction(self.held_devices.get(claim.key, {}).get(device_class, 0))
        return Contribution(f"ResourceClaim {claim.key}", counted, held) if counted or held else None

    def _pod_requests(self, pod: Pod, name: str) -> Contribution | None:
        counted = pod_requests(pod).get(name, Fraction(0))
        if not counted:
            return None
        return Contribution(f"Pod {pod.key}", counted, counted if pod.node_name else Fraction(0))

    def _claim_as_extended(self, claim: ResourceClaim, name: str) -> Contribution | None:
        served = [c for c in self.classes if _serves(c, name, self.classes)]
        counted = sum((Fraction(claim_quota_devices(claim.spec).get(c.name, 0)) for c in served), Fraction(0))
        held = sum((Fraction(self.held_devices.get(claim.key, {}).get(c.name, 0)) for c in served), Fraction(0))
        if is_scheduler_claim(claim):
            # The owning pod counts its own requests for this name; the claim adds only what goes beyond.
            owner = self._owner_request(claim, name)
            counted, held = max(Fraction(0), counted - owner), max(Fraction(0), held - owner)
        return Contribution(f"ResourceClaim {claim.key}", counted, held) if counted or held else None

    def _owner_request(self, claim: ResourceClaim, name: str) -> Fraction:
        owner = claim.meta.controller
        pod = self.data.snapshot.pods.get(f"{claim.namespace}/{owner[1]}") if owner and owner[0] == "Pod" else None
        return pod_requests(pod).get(name, Fraction(0)) if pod is not None else Fraction(0)


def _serves(device_class: DeviceClass, name: str, classes: Iterable[DeviceClass]) -> bool:
    if name == IMPLICIT_EXTENDED_PREFIX + device_class.name:
        return True
    found = extended_resource_class(name, classes)
    return found is not None and found.name == device_class.name


# ----- accounts and NativeQuotaCounts ---------------------------------------------------------------
def native_accounts(data: GapInput, view: NativeView) -> tuple[list[NativeAccount], list[Gap], list[str]]:
    """One account per device resource of every ResourceQuota; a NativeQuotaCounts gap where it disagrees."""
    accounts, gaps, notes = [], [], []
    for quota in sorted(data.resource_quotas, key=lambda q: q.key):
        for resource in sorted(r for r in quota.hard if is_device_resource(r)):
            parts = view.contributions(quota.namespace, resource)
            used, source = _used(quota, resource, parts)
            if used is None:
                notes.append(f"ResourceQuota {quota.key}: {resource} not compared: the quota is scoped "
                             f"({', '.join(quota.scopes)}) and has no status to read what it counts")
                continue
            held = sum((p.held for p in parts), Fraction(0))
            accounts.append(NativeAccount(quota.namespace, quota.name, resource, quota.hard[resource].value,
                                          used, held, source))
            if used != held:
                gaps.append(_counts_gap(quota, resource, used, held, parts))
    return accounts, gaps, notes


def _used(quota: ResourceQuota, resource: str, parts: list[Contribution]) -> tuple[Fraction | None, str]:
    if quota.used is not None and resource in quota.used:
        return quota.used[resource].value, "status"
    if quota.scopes and requested_resource(resource) is not None:
        return None, ""
    return sum((p.counted for p in parts), Fraction(0)), "computed"


def _counts_gap(quota: ResourceQuota, resource: str, used: Fraction, held: Fraction,
                parts: list[Contribution]) -> Gap:
    differing = [p for p in parts if p.counted != p.held]
    shown = "; ".join(f"{p.obj} counted {format_amount(p.counted)}, holds {format_amount(p.held)}"
                      for p in differing[:_SHOWN])
    if len(differing) > _SHOWN:
        shown += f"; and {len(differing) - _SHOWN} more"
    effect = ("it refuses new claims or pods before the devices are really taken" if used > held
              else "devices escape it")
    message = (f"ResourceQuota {quota.key} counts {measured(resource, used)}, the namespace holds "
               f"{format_amount(held)}: {effect}" + (f" ({shown})" if shown else ""))
    return Gap(GapKind.NATIVE_QUOTA_COUNTS, resource, used - held, message, quota.namespace,
               objects=(f"ResourceQuota {quota.key}", *(p.obj for p in differing)))


# ----- NativeQuotaLimit ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _NativeLimit:
    resource: str
    hard: Fraction
    in_unit: Fraction  # the same limit in the unit's terms
    quotas: tuple[str, ...]


def limit_gaps(data: GapInput) -> list[Gap]:
    """Namespaces whose ResourceQuota allows less of a unit's hardware than their ClusterQueue's nominal."""
    units = {u.name: u for u in data.units}
    queues = {q.name: q for q in data.cluster_queues}
    gaps = []
    for namespace in sorted({q.namespace for q in data.resource_quotas}):
        quotas = [q for q in data.resource_quotas if q.namespace == namespace]
        for cq_name in sorted({lq.cluster_queue for lq in data.local_queues.values() if lq.namespace == namespace}):
            cq = queues.get(cq_name)
            for entry in cq.quotas if cq is not None else ():
                unit = units.get(entry.unit)
                for limit in _limits(unit, quotas) if unit is not None else ():
                    if entry.nominal.value > limit.in_unit:
                        gaps.append(_limit_gap(namespace, cq_name, entry.unit, entry.nominal.value, limit))
    return gaps


def _limits(unit: CompiledUnit, quotas: list[ResourceQuota]) -> Iterable[_NativeLimit]:
    spec = unit.unit
    if spec.counting is Counting.DEVICES and unit.select is None:
        for device_class in spec.device_class_names:
            found = _tightest(class_devices_resource(device_class), quotas)
            if found is not None:
                yield _NativeLimit(class_devices_resource(device_class), found[0], found[0], found[1])
    for extended in spec.extended_resources:
        found = _tightest(f"requests.{extended.name}", quotas)
        if found is not None and extended.counts_as > 0:
            yield _NativeLimit(f"requests.{extended.name}", found[0], found[0] * extended.counts_as, found[1])


def _tightest(resource: str, quotas: list[ResourceQuota]) -> tuple[Fraction, tuple[str, ...]] | None:
    limits: Mapping[str, Fraction] = {q.key: q.hard[resource].value for q in quotas if resource in q.hard}
    if not limits:
        return None
    hard = min(limits.values())
    return hard, tuple(f"ResourceQuota {key}" for key, value in sorted(limits.items()) if value == hard)


def _limit_gap(namespace: str, cq: str, unit: str, nominal: Fraction, limit: _NativeLimit) -> Gap:
    message = (f"ClusterQueue {cq} lets namespace {namespace} take {measured(unit, nominal)} (nominal); "
               f"{', '.join(limit.quotas)} allows {measured(limit.resource, limit.hard)} "
               f"({measured(unit, limit.in_unit)}): draq can admit groups whose claims or pods the API server then "
               "refuses")
    return Gap(GapKind.NATIVE_QUOTA_LIMIT, unit, nominal - limit.in_unit, message, namespace, cq,
               objects=(*limit.quotas, f"ClusterQueue {cq}"))
