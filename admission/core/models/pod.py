"""core/v1 Pod: only what admission, DRA allocation and the scheduler's node filters need."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from admission.core.models._fields import Fields, empty_map
from admission.core.models.label_selector import LabelRequirement, LabelSelector, read_label_selector
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


@dataclass(frozen=True, slots=True)
class PodGroupClaim:
    """A claim a scheduling PodGroup (v1alpha2, v1beta1) makes for all its pods: `spec.resourceClaims[]`,
    matched by pod entries equal in every field, and the claim generated from its template
    (`status.resourceClaimStatuses`; "" until created)."""

    pod_group: str
    entry: PodResourceClaim
    generated: str = ""


SIDECAR_RESTART_POLICY = "Always"
DO_NOT_SCHEDULE = "DoNotSchedule"
HONOR = "Honor"
IGNORE = "Ignore"
_POLICIES = (HONOR, IGNORE)


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    requests: Mapping[str, Quantity] = field(default_factory=empty_map)
    limits: Mapping[str, Quantity] = field(default_factory=empty_map)
    restart_policy: str = ""  # `Always` on an init container makes it a sidecar

    @property
    def is_sidecar(self) -> bool:
        return self.restart_policy == SIDECAR_RESTART_POLICY


@dataclass(frozen=True, slots=True)
class ResourceRequirements:
    """Pod-level `spec.resources` (PodLevelResources)."""

    requests: Mapping[str, Quantity] = field(default_factory=empty_map)
    limits: Mapping[str, Quantity] = field(default_factory=empty_map)


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required pod (anti-)affinity term. `label_selector` None selects no pod; `namespace_selector` None
    is unset (then `namespaces`, or the pod's own namespace when that is empty too)."""

    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A `topologySpreadConstraints[]` entry with whenUnsatisfiable DoNotSchedule (the only kind that
    filters nodes). `label_selector` None selects no pod; `matchLabelKeys` are already merged into it.
    The policies are `Honor` or `Ignore` (defaults: nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore)."""

    max_skew: int
    topology_key: str
    label_selector: LabelSelector | None = None
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


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
    node_selector: Mapping[str, str] = field(default_factory=empty_map)
    scheduling_gates: tuple[str, ...] = ()
    resource_claim_statuses: tuple[PodResourceClaimStatus, ...] = ()
    phase: str = ""
    tolerations: tuple[Toleration, ...] = ()
    # spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
    node_affinity: NodeSelector | None = None
    overhead: Mapping[str, Quantity] = field(default_factory=empty_map)
    resources: ResourceRequirements = field(default_factory=ResourceRequirements)
    # podAffinity and podAntiAffinity .requiredDuringSchedulingIgnoredDuringExecution (InterPodAffinity),
    # and the topologySpreadConstraints with whenUnsatisfiable DoNotSchedule (PodTopologySpread).
    affinity_terms: tuple[PodAffinityTerm, ...] = ()
    anti_affinity_terms: tuple[PodAffinityTerm, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    # spec.workloadRef.name: the native gang (a v1alpha1 Workload, Kubernetes 1.35) the pod belongs to, if any.
    workload: str = ""
    # spec.schedulingGroup.podGroupName: the native gang (a v1alpha2 / v1beta1 PodGroup, 1.36 and 1.37).
    scheduling_group: str = ""
    # spec.priority: set by the API server's Priority admission from spec.priorityClassName.
    priority: int = 0
    # Entries matched to a PodGroup-level claim of the PodGroup the pod names (scheduling.k8s.io,
    # DRAWorkloadResourceClaims): entry name -> that claim. One claim serves the whole PodGroup.
    pod_group_claims: Mapping[str, PodGroupClaim] = field(default_factory=empty_map)

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
        creates it: `<pod>/<entry>`, or `podgroup <podgroup>/<entry>` for a PodGroup-level claim, the same
        for every member. `/` and ` ` cannot occur in a real claim's name, so the names never collide."""
        shared = self.pod_group_claims.get(entry)
        if shared is not None:
            return f"podgroup {shared.pod_group}/{entry}"
        return f"{self.name}/{entry}"

    def pending_claim_key(self, entry: str) -> str:
        """`<namespace>/<pod>/<entry>`: the key of `pending_claim_name`, used by the allocator's gang
        placement, charging and plans alike."""
        return f"{self.namespace}/{self.pending_claim_name(entry)}"

    def claim_name_for(self, entry: PodResourceClaim) -> str | None:
        """The ResourceClaim behind a pod claim entry (for templates: from status, once created)."""
        if entry.resource_claim_name is not None:
            return entry.resource_claim_name
        shared = self.pod_group_claims.get(entry.name)
        if shared is not None:
            return shared.generated or None
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
    meta = parse_meta(obj, manifest, namespaced=True, default_namespace=default_namespace)
    return Pod(
        meta=meta,
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
        affinity_terms=tuple(_affinity_term(t, meta.labels) for t in affinity.map("podAffinity").maps(required)),
        anti_affinity_terms=tuple(_affinity_term(t, meta.labels)
                                  for t in affinity.map("podAntiAffinity").maps(required)),
        # whenUnsatisfiable is required by the API; a constraint without it is taken as the hard form.
        spread_constraints=tuple(_spread_constraint(c, meta.labels) for c in spec.maps("topologySpreadConstraints")
                                 if c.str("whenUnsatisfiable", default=DO_NOT_SCHEDULE) == DO_NOT_SCHEDULE),
        workload=spec.map("workloadRef").str("name"),
        scheduling_group=spec.map("schedulingGroup").str("podGroupName"),
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


def _with_label_keys(selector: LabelSelector | None, labels: Mapping[str, str], match: tuple[str, ...],
                     mismatch: tuple[str, ...] = ()) -> LabelSelector | None:
    """The selector with `matchLabelKeys` (key In [the pod's value]) and `mismatchLabelKeys` (key NotIn
    [the pod's value]) added for the keys the pod has, as the API server merges them at pod creation
    (adding them again to a stored pod's selector changes nothing). A nil selector stays nil."""
    if selector is None or not (match or mismatch):
        return selector
    added = [LabelRequirement(key, "In", (labels[key],)) for key in match if key in labels]
    added += [LabelRequirement(key, "NotIn", (labels[key],)) for key in mismatch if key in labels]
    return LabelSelector(selector.match_labels, (*selector.match_expressions, *added))


def _affinity_term(fields: Fields, labels: Mapping[str, str]) -> PodAffinityTerm:
    selector = _with_label_keys(_label_selector(fields, "labelSelector"), labels,
                                fields.str_list("matchLabelKeys"), fields.str_list("mismatchLabelKeys"))
    return PodAffinityTerm(fields.str("topologyKey"), selector, fields.str_list("namespaces"),
                           _label_selector(fields, "namespaceSelector"))


def _spread_constraint(fields: Fields, labels: Mapping[str, str]) -> SpreadConstraint:
    max_skew = fields.int("maxSkew", default=1)
    if max_skew < 1:
        raise fields.fail("maxSkew", f"must be at least 1, not {max_skew}")
    min_domains = fields.int("minDomains", default=1)
    if min_domains < 1:
        raise fields.fail("minDomains", f"must be at least 1 when set, not {min_domains}")
    policies = [fields.str(name, default=default) for name, default in
                (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE))]
    for name, value in zip(("nodeAffinityPolicy", "nodeTaintsPolicy"), policies, strict=True):
        if value not in _POLICIES:
            raise fields.fail(name, f"must be Honor or Ignore, not {value!r}")
    selector = _with_label_keys(_label_selector(fields, "labelSelector"), labels, fields.str_list("matchLabelKeys"))
    return SpreadConstraint(max_skew, fields.str("topologyKey", required=True), selector, min_domains, *policies)
