"""resource.k8s.io/v1 ResourceClaim (spec and status.allocation) and ResourceClaimTemplate."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from admission.core.models._fields import Fields
from admission.core.models.device_class import OpaqueConfig, parse_opaque, parse_selectors
from admission.core.models.meta import Named, ObjectMeta, parse_meta
from admission.core.models.node_selector import NodeSelector, parse_node_selector
from admission.core.quantity import Quantity

EXACT_COUNT = "ExactCount"
ALL = "All"
MAX_DERIVED_ATTRIBUTES = 32
MAX_DERIVED_EXPRESSION = 10 * 1024
# A fully qualified attribute name: a DNS subdomain, a slash, a C identifier.
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*/[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operator": self.operator}
        for name, value in (("key", self.key), ("value", self.value), ("effect", self.effect)):
            if value:
                out[name] = value
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


@dataclass(frozen=True, slots=True)
class DerivedAttribute:
    """A request's attribute computed by a CEL expression per device, for its constraints (1.37 alpha)."""

    name: str
    expression: str


@dataclass(frozen=True, slots=True)
class DeviceSelection:
    """What one `exactly` request or one `firstAvailable` subrequest asks for."""

    name: str
    device_class_name: str
    selectors: tuple[str | None, ...] = ()
    allocation_mode: str = EXACT_COUNT
    count: int = 1
    # None when the field is absent; set (even false) counts as "admin access requested".
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity_requests: Mapping[str, Quantity] = field(default_factory=dict)
    # DRADerivedAttributes: attribute name -> expression, in the order given.
    derived_attributes: tuple[DerivedAttribute, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: DeviceSelection | None = None
    first_available: tuple[DeviceSelection, ...] = ()

    @property
    def alternatives(self) -> tuple[DeviceSelection, ...]:
        return (self.exactly,) if self.exactly is not None else self.first_available


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimConfig:
    requests: tuple[str, ...]
    opaque: OpaqueConfig


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[ClaimConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceAllocation:
    """One `status.allocation.devices.results[]` entry."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] = field(default_factory=dict)
    tolerations: tuple[DeviceToleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    skip_node_operations: tuple[str, ...] = ()

    @property
    def device_id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class AllocatedConfig:
    source: str
    requests: tuple[str, ...]
    opaque: OpaqueConfig


@dataclass(frozen=True, slots=True)
class AllocationResult:
    results: tuple[DeviceAllocation, ...] = ()
    config: tuple[AllocatedConfig, ...] = ()
    node_selector: NodeSelector | None = None


@dataclass(frozen=True, slots=True)
class ConsumerReference:
    resource: str
    name: str
    uid: str = ""
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim(Named):
    meta: ObjectMeta
    spec: ClaimSpec
    allocation: AllocationResult | None = None
    reserved_for: tuple[ConsumerReference, ...] = ()

    @property
    def requests(self) -> tuple[DeviceRequest, ...]:
        return self.spec.requests


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate(Named):
    meta: ObjectMeta
    claim_meta: ObjectMeta
    spec: ClaimSpec


def parse_resource_claim(obj: str, manifest: Fields, default_namespace: str = "") -> ResourceClaim:
    status = manifest.map("status")
    allocation = _parse_allocation(status.map("allocation")) if status.has("allocation") else None
    return ResourceClaim(
        meta=parse_meta(obj, manifest, namespaced=True, default_namespace=default_namespace),
        spec=parse_claim_spec(manifest.map("spec")),
        allocation=allocation,
        reserved_for=tuple(ConsumerReference(r.str("resource", required=True), r.str("name", required=True),
                                             r.str("uid"), r.str("apiGroup"))
                           for r in status.maps("reservedFor")),
    )


def parse_resource_claim_template(obj: str, manifest: Fields,
                                  default_namespace: str = "") -> ResourceClaimTemplate:
    outer = manifest.map("spec")
    meta = parse_meta(obj, manifest, namespaced=True, default_namespace=default_namespace)
    inner_meta = outer.map("metadata")
    claim_meta = ObjectMeta(name="", namespace=meta.namespace, labels=inner_meta.str_map("labels"),
                            annotations=inner_meta.str_map("annotations"))
    return ResourceClaimTemplate(meta=meta, claim_meta=claim_meta, spec=parse_claim_spec(outer.map("spec")))


def parse_claim_spec(spec: Fields) -> ClaimSpec:
    devices = spec.map("devices")
    requests = tuple(_parse_request(r) for r in devices.maps("requests"))
    # Duplicate request names are rejected by API validation, but the allocator copes with them
    # (upstream's own tests use them), so they are kept as given.
    constraints = []
    for entry in devices.maps("constraints"):
        match = entry.opt_str("matchAttribute")
        distinct = entry.opt_str("distinctAttribute")
        if match and distinct:
            raise entry.fail("distinctAttribute",
                             "only one of matchAttribute and distinctAttribute may be set")
        constraints.append(DeviceConstraint(entry.str_list("requests"), match, distinct))
    config = tuple(ClaimConfig(c.str_list("requests"), parse_opaque(c)) for c in devices.maps("config"))
    _check_derived_use(devices, requests, constraints)
    return ClaimSpec(requests, tuple(constraints), config)


def _check_derived_use(devices: Fields, requests: tuple[DeviceRequest, ...],
                       constraints: list[DeviceConstraint]) -> None:
    """As the API server requires: every derived attribute is named by a constraint that applies to its
    request (one for every request, one naming the request, or for a subrequest one naming its parent)."""
    for r, request in enumerate(requests):
        for s, selection in enumerate(request.alternatives):
            scopes = {"", request.name}
            path = f"requests[{r}].exactly"
            if request.exactly is None:
                scopes.add(f"{request.name}/{selection.name}")
                path = f"requests[{r}].firstAvailable[{s}]"
            for a, derived in enumerate(selection.derived_attributes):
                if not any(derived.name in (c.match_attribute, c.distinct_attribute)
                           and (not c.requests or scopes & set(c.requests)) for c in constraints):
                    raise devices.fail(f"{path}.derivedAttributes[{a}].name",
                                       f"derived attribute {derived.name} is not used by any matchAttribute or "
                                       "distinctAttribute constraint for this request; add one or remove it")


def _parse_request(fields: Fields) -> DeviceRequest:
    name = fields.str("name", required=True)
    has_exactly, has_first = fields.has("exactly"), bool(fields.list("firstAvailable"))
    if has_exactly == has_first:
        raise fields.fail("exactly", "exactly one of exactly and firstAvailable must be set")
    if has_exactly:
        return DeviceRequest(name, exactly=_parse_selection(fields.map("exactly"), name, admin=True))
    subs = tuple(_parse_selection(s, s.str("name", required=True), admin=False)
                 for s in fields.maps("firstAvailable"))
    if len(subs) > 8:
        raise fields.fail("firstAvailable", f"at most 8 subrequests are allowed, got {len(subs)}")
    return DeviceRequest(name, first_available=subs)


def _parse_selection(fields: Fields, name: str, *, admin: bool) -> DeviceSelection:
    mode = fields.str("allocationMode") or EXACT_COUNT
    if fields.has("count") and mode == EXACT_COUNT:
        count = fields.int("count")
        if count < 1:
            raise fields.fail("count", f"must be at least 1, got {count}")
    else:
        count = 1
    return DeviceSelection(
        name=name,
        device_class_name=fields.str("deviceClassName"),
        selectors=parse_selectors(fields),
        allocation_mode=mode,
        count=count,
        admin_access=fields.opt_bool("adminAccess") if admin else None,
        tolerations=tuple(parse_toleration(t) for t in fields.maps("tolerations")),
        capacity_requests=fields.map("capacity").quantity_map("requests"),
        derived_attributes=_parse_derived(fields),
    )


def _parse_derived(fields: Fields) -> tuple[DerivedAttribute, ...]:
    entries = list(fields.maps("derivedAttributes"))
    if len(entries) > MAX_DERIVED_ATTRIBUTES:
        raise fields.fail("derivedAttributes", f"at most {MAX_DERIVED_ATTRIBUTES} derived attributes are allowed, "
                                               f"got {len(entries)}")
    found: dict[str, DerivedAttribute] = {}
    for entry in entries:
        name = entry.str("name", required=True)
        if not _QUALIFIED_NAME.match(name):
            raise entry.fail("name", f"{name!r} is not a fully qualified attribute name: write a DNS subdomain, "
                                     "a slash and a C identifier (e.g. derived/numaNode)")
        if name in found:
            raise entry.fail("name", f"duplicate derived attribute {name}")
        expression = entry.str("expression", required=True)
        if len(expression) > MAX_DERIVED_EXPRESSION:
            raise entry.fail("expression", f"{len(expression)} characters, at most {MAX_DERIVED_EXPRESSION} "
                                           "are allowed")
        found[name] = DerivedAttribute(name, expression)
    return tuple(found.values())


def parse_toleration(fields: Fields) -> DeviceToleration:
    operator = fields.str("operator") or "Equal"
    if operator not in ("Equal", "Exists"):
        raise fields.fail("operator", f"unsupported operator {operator!r}; expected Equal or Exists")
    return DeviceToleration(
        key=fields.str("key"), operator=operator, value=fields.str("value"), effect=fields.str("effect"),
        toleration_seconds=fields.opt_int("tolerationSeconds"),
    )


def _parse_allocation(fields: Fields) -> AllocationResult:
    devices = fields.map("devices")
    results = tuple(
        DeviceAllocation(
            request=r.str("request", required=True), driver=r.str("driver", required=True),
            pool=r.str("pool", required=True), device=r.str("device", required=True),
            admin_access=r.opt_bool("adminAccess"), share_id=r.opt_str("shareID"),
            consumed_capacity=r.quantity_map("consumedCapacity"),
            tolerations=tuple(parse_toleration(t) for t in r.maps("tolerations")),
            binding_conditions=r.str_list("bindingConditions"),
            binding_failure_conditions=r.str_list("bindingFailureConditions"),
        )
        for r in devices.maps("results"))
    config = tuple(AllocatedConfig(c.str("source", required=True), c.str_list("requests"), parse_opaque(c))
                   for c in devices.maps("config"))
    selector = parse_node_selector(fields.map("nodeSelector")) if fields.has("nodeSelector") else None
    return AllocationResult(results, config, selector)
