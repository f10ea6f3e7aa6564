"""core/v1 Pod: only what admission, DRA allocation and the scheduler's node filters need."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from admission.core.models._fields import Fields
from admission.core.models.label_selector import LabelSelector, read_label_selector
from admission.core.models.meta import Named, ObjectMeta, parse_meta
from admission.core.models.node_selector import NodeSelector, parse_node_selector
from admission.core.models.taint import Toleration, parse_toleration
from admission.core.quantity import Quantity


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """A `spec.resourceClaims[]` entry: a claim by name, or one made from a template for this pod."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


SIDECAR_RESTART_POLICY = "Always"
DO_NOT_SCHEDULE = "DoNotSchedule"


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    requests: Mapping[str, Quantity] = field(default_factory=dict)
    limits: Mapping[str, Quantity] = field(default_factory=dict)
    restart_policy: str = ""  # `Always` on an init container makes it a sidecar

    @property
    def is_sidecar(self) -> bool:
        return self.restart_policy == SIDECAR_RESTART_POLICY


@dataclass(frozen=True, slots=True)
class ResourceRequirements:
    """Pod-level `spec.resources` (PodLevelResources)."""

    requests: Mapping[str, Quantity] = field(default_factory=dict)
    limits: Mapping[str, Quantity] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required pod (anti-)affinity term. `label_selector` None selects no pod; `namespace_selector` None
    is unset (then `namespaces`, or the pod's own namespace when that is empty too)."""

    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class PodResourceClaimStatus:
    name: str
    resource_claim_name: str | None = None


@dataclass(frozen=True, slots=True)
class Pod(Named):
    meta: ObjectMeta
    resource_claims: tuple[PodResourceClaim, ...] = ()
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    node_name: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    scheduling_gates: tuple[str, ...] = ()
    resource_claim_statuses: tuple[PodResourceClaimStatus, ...] = ()
    phase: str = ""
    tolerations: tuple[Toleration, ...] = ()
    # spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
    node_affinity: NodeSelector | None = None
    overhead: Mapping[str, Quantity] = field(default_factory=dict)
    resources: ResourceRequirements = field(default_factory=ResourceRequirements)
    # How many required (hard) inter-pod constraints the pod has: terms of
    # podAffinity/podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution, and
    # topologySpreadConstraints with whenUnsatisfiable DoNotSchedule.
    required_pod_affinity: int = 0
    required_pod_anti_affinity: int = 0
    hard_topology_spread: int = 0
    # podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution (the existing pods' side of the
    # scheduler's InterPodAffinity filter reads them).
    anti_affinity_terms: tuple[PodAffinityTerm, ...] = ()
    # spec.workloadRef.name: the native gang (Workload) the pod belongs to, if any.
    workload: str = ""
    # spec.priority: set by the API server's Priority admission from spec.priorityClassName.
    priority: int = 0

    @property
    def uid(self) -> str:
        return self.meta.uid

    @property
    def labels(self) -> Mapping[str, str]:
        return self.meta.labels

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.meta.annotations

    def pending_claim_name(self, entry: str) -> str:
        """The name draq gives the claim a template entry will get, before the resourceclaim controller
        creates it: `<pod>/<entry>`. The `/` cannot occur in a real claim's name, so the two never collide."""
        return f"{self.name}/{entry}"

    def pending_claim_key(self, entry: str) -> str:
        """`<namespace>/<pod>/<entry>`: the key of `pending_claim_name`, used by the allocator's gang
        placement, charging and plans alike."""
        return f"{self.namespace}/{self.pending_claim_name(entry)}"

    def claim_name_for(self, entry: PodResourceClaim) -> str | None:
        """The ResourceClaim behind a pod claim entry (for templates: from status, once created)."""
        if entry.resource_claim_name is not None:
            return entry.resource_claim_name
        for status in self.resource_claim_statuses:
            if status.name == entry.name:
                return status.resource_claim_name
        return None


def parse_pod(obj: str, manifest: Fields, default_namespace: str = "") -> Pod:
    spec = manifest.map("spec")
    status = manifest.map("status")
    claims = []
    for entry in spec.maps("resourceClaims"):
        by_name, by_template = entry.opt_str("resourceClaimName"), entry.opt_str("resourceClaimTemplateName")
        if (by_name is None) == (by_template is None):
            raise entry.fail("resourceClaimName",
                             "exactly one of resourceClaimName and resourceClaimTemplateName must be set")
        claims.append(PodResourceClaim(entry.str("name", required=True), by_name, by_template))
    affinity = spec.map("affinity")
    node_affinity = affinity.map("nodeAffinity")
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    pod_resources = spec.map("resources")
    return Pod(
        meta=parse_meta(obj, manifest, namespaced=True, default_namespace=default_namespace),
        resource_claims=tuple(claims),
        containers=tuple(_container(c) for c in spec.maps("containers")),
        init_containers=tuple(_container(c) for c in spec.maps("initContainers")),
        node_name=spec.str("nodeName"),
        node_selector=spec.str_map("nodeSelector"),
        scheduling_gates=tuple(g.str("name", required=True) for g in spec.maps("schedulingGates")),
        resource_claim_statuses=tuple(
            PodResourceClaimStatus(s.str("name", required=True), s.opt_str("resourceClaimName"))
            for s in status.maps("resourceClaimStatuses")),
        phase=status.str("phase"),
        tolerations=tuple(parse_toleration(t) for t in spec.maps("tolerations")),
        node_affinity=parse_node_selector(node_affinity.map(required)) if node_affinity.has(required) else None,
        overhead=spec.quantity_map("overhead"),
        resources=ResourceRequirements(pod_resources.quantity_map("requests"), pod_resources.quantity_map("limits")),
        required_pod_affinity=len(affinity.map("podAffinity").list(required)),
        required_pod_anti_affinity=len(affinity.map("podAntiAffinity").list(required)),
        anti_affinity_terms=tuple(_affinity_term(t) for t in affinity.map("podAntiAffinity").maps(required)),
        # whenUnsatisfiable is required by the API; a constraint without it is taken as the hard form.
        hard_topology_spread=sum(1 for c in spec.maps("topologySpreadConstraints")
                                 if c.str("whenUnsatisfiable", default=DO_NOT_SCHEDULE) == DO_NOT_SCHEDULE),
        workload=spec.map("workloadRef").str("name"),
        priority=spec.int("priority"),
    )


def _container(fields: Fields) -> Container:
    resources = fields.map("resources")
    return Container(fields.str("name"), resources.quantity_map("requests"), resources.quantity_map("limits"),
                     fields.str("restartPolicy"))


def _label_selector(fields: Fields, key: str) -> LabelSelector | None:
    if not fields.has(key):
        return None
    return read_label_selector(fields.map(key))


def _affinity_term(fields: Fields) -> PodAffinityTerm:
    return PodAffinityTerm(fields.str("topologyKey"), _label_selector(fields, "labelSelector"),
                           fields.str_list("namespaces"), _label_selector(fields, "namespaceSelector"))
