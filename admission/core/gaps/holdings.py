"""What is really held: every allocated ResourceClaim, and every bound pod's device-plugin resources,
valued in every QuotaUnit and attributed to the pods (and so the queues) that use them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from admission.core.errors import DraqError
from admission.core.gaps.inputs import GapInput
from admission.core.gaps.membership import Place, Placer, PodPlace, is_live
from admission.core.models import Device, DeviceSelection, Pod, ResourceClaim
from admission.core.nodefit import is_extended_resource, pod_requests
from admission.core.quantity import Quantity
from admission.core.quota import NONE, Amounts, CompiledUnit, Counting, Inventory, device_value

EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"


def is_extended(resource: str) -> bool:
    """An extended resource (`nvidia.com/gpu`, `deviceclass.resource.kubernetes.io/<class>`), not a
    native one (`cpu`, `memory`, `hugepages-2Mi`, `kubernetes.io/...`)."""
    return is_extended_resource(resource) or resource.startswith(IMPLICIT_EXTENDED_PREFIX)


def is_scheduler_claim(claim: ResourceClaim) -> bool:
    """A claim the scheduler made for a pod's DRA-backed extended resources (KEP 5004)."""
    return claim.meta.annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"


@dataclass(frozen=True, slots=True)
class Holding:
    """One allocated claim, or one pod's device-plugin resources, and who holds it."""

    namespace: str
    place: PodPlace
    objects: tuple[str, ...]  # the claim and the pods using it, or the pod
    amounts: Amounts  # per unit
    devices: Mapping[str, int] = field(default_factory=dict)  # DeviceClass -> devices held (admin access left out)
    pods: tuple[Pod, ...] = ()  # the live pods using it
    claim: ResourceClaim | None = None


@dataclass(frozen=True, slots=True)
class Holdings:
    items: tuple[Holding, ...]
    notes: tuple[str, ...] = ()


def find_holdings(data: GapInput, inventory: Inventory, placer: Placer | None = None) -> Holdings:
    """Every allocated claim and every bound, live pod's device-plugin (and, in queues, core) requests.
    `placer`: the report's own, when it places pods elsewhere too (its index of records is made once)."""
    finder = _Finder(data, inventory, placer)
    items = [finder.claim(c) for c in data.snapshot.claims.values() if c.allocation is not None]
    items += [h for pod in data.snapshot.pods.values() if (h := finder.pod(pod)) is not None]
    return Holdings(tuple(items), tuple(finder.notes))


@dataclass
class _Finder:
    data: GapInput
    inventory: Inventory
    given: Placer | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.placer = self.given or Placer(self.data.namespace_labels, self.data.local_queues, self.data.pod_groups)

    def place(self, pod: Pod) -> PodPlace:
        return self.placer.place(pod)

    # ----- claims -----------------------------------------------------------------------------------
    def claim(self, claim: ResourceClaim) -> Holding:
        users = self._users(claim)
        if users:
            place = self.place(users[0])
        else:
            place = PodPlace(Place.OUTSIDE, reason=f"no running pod uses ResourceClaim {claim.key}")
        amounts, devices = self._claim_value(claim)
        objects = (f"ResourceClaim {claim.key}", *(f"Pod {p.key}" for p in users))
        return Holding(claim.namespace, place, objects, amounts, devices, pods=users, claim=claim)

    def _users(self, claim: ResourceClaim) -> tuple[Pod, ...]:
        names = {r.name for r in claim.reserved_for if r.resource == "pods"}
        owner = claim.meta.controller
        if owner is not None and owner[0] == "Pod":
            names.add(owner[1])
        pods = (self.data.snapshot.pods.get(f"{claim.namespace}/{name}") for name in sorted(names))
        return tuple(p for p in pods if p is not None and is_live(p))

    def _claim_value(self, claim: ResourceClaim) -> tuple[Amounts, dict[str, int]]:
        assert claim.allocation is not None
        selections = {r.name: r.exactly for r in claim.spec.requests if r.exactly is not None}
        selections.update({f"{r.name}/{s.name}": s for r in claim.spec.requests for s in r.first_available})
        total, devices = NONE, dict[str, int]()
        for result in claim.allocation.results:
            selection = selections.get(result.request)
            if selection is None:
                self.notes.append(f"ResourceClaim {claim.key}: its allocation names request {result.request}, "
                                  "which the claim does not have; not valued")
                continue
            if result.admin_access:
                continue  # admin access holds nothing (the allocator does not count it as in use)
            devices[selection.device_class_name] = devices.get(selection.device_class_name, 0) + 1
            device = self.inventory.devices_by_id.get(result.device_id)
            values = {u.name: self._value(claim, u, result.device_id, selection, device, result.consumed_capacity)
                      for u in self.data.units}
            total += Amounts.of(values)
        return total, devices

    def _value(self, claim: ResourceClaim, unit: CompiledUnit, device_id: str, selection: DeviceSelection,
               device: Device | None, consumed: Mapping[str, Quantity]) -> Fraction:
        try:
            return device_value(unit, device, selection, consumed)
        except DraqError as err:
            self.notes.append(f"ResourceClaim {claim.key}, device {device_id}: not valued in {unit.unit.label}: {err}")
            return Fraction(0)

    # ----- pods -------------------------------------------------------------------------------------
    def pod(self, pod: Pod) -> Holding | None:
        """A bound, live pod's device-plugin resources (and, for pods in queues, core requests)."""
        if not pod.node_name or not is_live(pod):
            return None
        place = self.place(pod)
        requests = pod_requests(pod)
        served = self.inventory.extended_by_node.get(pod.node_name)
        extended = {r: amount for r, amount in requests.items()
                    if is_extended(r) and (served is None or r in served)}
        values: list[tuple[str, Fraction]] = []
        for unit in self.data.units:
            values += [(unit.name, amount * e.counts_as) for r, amount in extended.items()
                       if (e := unit.unit.extended(r)) is not None]
            if unit.unit.counting is Counting.CORE and place.place not in (Place.OUTSIDE, Place.ALLOWED):
                values.append((unit.name, requests.get(unit.unit.resource, Fraction(0))))
        amounts = Amounts.of(values)
        if not amounts:
            return None
        return Holding(pod.namespace, place, (f"Pod {pod.key}",), amounts, pods=(pod,))
