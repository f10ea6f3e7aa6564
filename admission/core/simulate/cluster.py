"""The simulated cluster: the objects an admission cycle reads, and how they change as groups are
admitted, finish, and as nodes and quotas are added or taken away.

Pure and immutable: every change returns a new `SimulatedCluster`. `cycle_input` builds the same
`CycleInput` the operator's reader builds from its cache, with the same builder (`cycle.cycle_input`):
groups collected from the managed pods and PodGroups, usage rebuilt from the PodGroups' records, the
devices promised to admitted groups, units checked against the devices.

An admitted group is held as the operator leaves it right after admission: its PodGroup says Admitted
with the charge and the plan, and its pods are not bound yet, so their planned devices and node resources
are promised (the cycle takes them exactly as it takes devices the scheduler has allocated). A group that
finishes is gone: its pods, the claims made for them, and its PodGroup.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from admission.core.allocator import Snapshot
from admission.core.cycle import (
    Admit,
    CycleInput,
    GroupView,
    collect_groups,
    cycle_input,
    rebuild_state,
)
from admission.core.cycle.timing import format_time
from admission.core.errors import InvalidInput
from admission.core.features import FeatureGates
from admission.core.labels import GATE, GROUP_LABEL
from admission.core.models import Model, Node, Pod, ResourceClaim, ResourceSlice, Topology
from admission.core.quantity import QuantityError, parse_quantity
from admission.core.quota import (
    ClusterQueue,
    CompiledUnit,
    LocalQueue,
    Phase,
    Plan,
    PodGroup,
    QueueQuota,
)
from admission.core.quota.amounts import NONE


@dataclass(frozen=True, slots=True)
class SimulatedCluster:
    """Everything a cycle reads. `models`: Nodes, DeviceClasses, ResourceSlices, DeviceTaintRules,
    ResourceClaims, ResourceClaimTemplates and every Pod (managed or not; bound pods take their node's room)."""

    models: tuple[Model, ...]
    pod_groups: tuple[PodGroup, ...] = ()
    created: Mapping[str, str] = field(default_factory=dict)  # PodGroup key -> creationTimestamp
    cluster_queues: tuple[ClusterQueue, ...] = ()
    local_queues: Mapping[str, LocalQueue] = field(default_factory=dict)
    units: tuple[CompiledUnit, ...] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None
    topologies: Mapping[str, Topology] = field(default_factory=dict)  # by name

    @property
    def pods(self) -> tuple[Pod, ...]:
        return tuple(m for m in self.models if isinstance(m, Pod))

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.models if isinstance(m, Node))

    def groups(self) -> tuple[GroupView, ...]:
        return collect_groups(self.pods, self.pod_groups, self.created)

    def cycle_input(self, gates: FeatureGates, now: dt.datetime) -> CycleInput:
        """The cycle's input, as the operator's reader would build it from this cluster."""
        groups = self.groups()
        return cycle_input(Snapshot.from_models(self.models), gates, groups, rebuild_state(self.cluster_queues, groups),
                           self.local_queues, self.units, namespace_labels=self.namespace_labels, now=now,
                           topologies=self.topologies)

    # ----- what the operator's admissions and the groups' ends do --------------------------------------
    def admitted(self, group: GroupView, admit: Admit, now: dt.datetime) -> SimulatedCluster:
        """The group's PodGroup records the admission (phase Admitted, charge, plan), as the operator writes it."""
        base = group.pod_group or PodGroup(group.namespace, group.name, group.min_member, group.queue, group.priority)
        record = replace(base, phase=Phase.ADMITTED, charge=admit.charge, borrowed=admit.borrowed,
                         cluster_queue=admit.cluster_queue, admitted_at=format_time(now), plan=admit.plan)
        created = dict(self.created)
        created.setdefault(group.key, group.created)
        return replace(self, pod_groups=(*(g for g in self.pod_groups if g.key != group.key), record), created=created)

    def preempted(self, group: GroupView) -> tuple[SimulatedCluster, bool]:
        """The group after the operator preempts it: members a Job owns come back as new gated pods (the Job
        is suspended and resumed at once) and the group queues again with no charge; bare pods are deleted
        for good. Returns the changed cluster and whether the group is gone."""
        recreated = tuple(p for p in group.pods if _job_owned(p))
        cluster = self.finished(group.key)
        if not recreated:
            return cluster, True
        fresh = tuple(replace(p, node_name="", scheduling_gates=(GATE,), resource_claim_statuses=(),
                              phase="Pending") for p in recreated)
        base = group.pod_group or PodGroup(group.namespace, group.name, group.min_member, group.queue, group.priority)
        record = replace(base, phase=Phase.PENDING, charge=NONE, borrowed=NONE, cluster_queue="", admitted_at="",
                         plan=Plan())
        created = {**cluster.created, group.key: group.created}
        return replace(cluster, models=(*cluster.models, *fresh), pod_groups=(*cluster.pod_groups, record),
                       created=created), False

    def finished(self, group_key: str) -> SimulatedCluster:
        """The group ran to its end: its pods, the claims made for them from templates, and its PodGroup
        go; a claim the pods named directly is deallocated once no remaining pod uses it."""
        namespace, _, name = group_key.partition("/")
        gone = {p.key for p in self.pods if p.namespace == namespace and p.labels.get(_GROUP) == name}
        made_for = {f"{namespace}/{s.resource_claim_name}" for p in self.pods if p.key in gone
                    for s in p.resource_claim_statuses if s.resource_claim_name}
        shared = {f"{namespace}/{name}" for p in self.pods if p.key in gone for name in _claim_names(p)}
        kept = [m for m in self.models if not (isinstance(m, Pod) and m.key in gone)
                and not (isinstance(m, ResourceClaim) and (m.key in made_for or _owned_by(m, gone)))]
        used = {f"{p.namespace}/{name}" for p in kept if isinstance(p, Pod) for name in _claim_names(p)}
        models = tuple(_released(m, gone) if isinstance(m, ResourceClaim) and m.key in shared - used else m
                       for m in kept)
        return replace(self, models=models, pod_groups=tuple(g for g in self.pod_groups if g.key != group_key))

    # ----- changes asked for -----------------------------------------------------------------------------
    def with_models(self, added: Iterable[Model]) -> SimulatedCluster:
        """Objects added (new nodes and their slices, new workloads); one with the key of an existing
        object of the same kind replaces it."""
        new = list(added)
        keys = {(type(m), _key(m)) for m in new}
        return replace(self, models=(*(m for m in self.models if (type(m), _key(m)) not in keys), *new))

    def with_pod_groups(self, added: Iterable[PodGroup], created: Mapping[str, str]) -> SimulatedCluster:
        new = list(added)
        keys = {g.key for g in new}
        return replace(self, pod_groups=(*(g for g in self.pod_groups if g.key not in keys), *new),
                       created={**self.created, **created})

    def without_nodes(self, names: Sequence[str], *, drain: bool) -> tuple[SimulatedCluster, tuple[str, ...]]:
        """Nodes removed (the Node, its slices and the pods bound to it go) or drained (cordoned, its pods
        evicted). Returns the changed cluster and the keys of the groups that had a member there: they end."""
        missing = sorted(set(names) - set(self.node_names))
        if missing:
            raise InvalidInput("node", ", ".join(missing), "no such Node in the snapshot (nodes: "
                               f"{', '.join(sorted(self.node_names)) or 'none'})")
        wanted = set(names)
        hit = sorted({f"{p.namespace}/{p.labels[_GROUP]}" for p in self.pods
                      if p.node_name in wanted and _GROUP in p.labels}
                     | {g.key for g in self.pod_groups if g.holds_quota and any(n in wanted for _, n in g.plan.nodes)})
        cluster = self
        for key in hit:
            cluster = cluster.finished(key)
        models: list[Model] = []
        for m in cluster.models:
            if isinstance(m, Pod) and m.node_name in wanted:
                continue
            if isinstance(m, Node) and m.name in wanted:
                if drain:
                    models.append(replace(m, unschedulable=True))
                continue
            if isinstance(m, ResourceSlice) and m.node_name in wanted and not drain:
                continue
            models.append(m)
        return replace(cluster, models=tuple(models)), tuple(hit)

    def with_quota(self, cluster_queue: str, unit: str, amount: str) -> SimulatedCluster:
        """A ClusterQueue's nominal quota of a unit set (added when the queue had none of that unit)."""
        try:
            nominal = parse_quantity(amount)
        except QuantityError as err:
            raise InvalidInput(f"quota {cluster_queue}:{unit}", amount, str(err)) from None
        queue = next((q for q in self.cluster_queues if q.name == cluster_queue), None)
        if queue is None:
            raise InvalidInput(f"ClusterQueue {cluster_queue}", "--set-quota", "no such ClusterQueue in the snapshot "
                               f"(queues: {', '.join(q.name for q in self.cluster_queues) or 'none'})")
        old = queue.quota(unit)
        entry = replace(old, nominal=nominal) if old is not None else QueueQuota(unit, nominal)
        quotas = tuple(entry if q.unit == unit else q for q in queue.quotas) if old else (*queue.quotas, entry)
        changed = replace(queue, quotas=quotas)
        queues = tuple(changed if q.name == cluster_queue else q for q in self.cluster_queues)
        return replace(self, cluster_queues=queues)


_GROUP = GROUP_LABEL


def _job_owned(pod: Pod) -> bool:
    controller = pod.meta.controller
    return controller is not None and controller[0] == "Job"


def _key(model: Model) -> str:
    return str(getattr(model, "key", None) or getattr(model, "name", ""))


def _claim_names(pod: Pod) -> list[str]:
    return [entry.resource_claim_name for entry in pod.resource_claims if entry.resource_claim_name]


def _owned_by(claim: ResourceClaim, pods: set[str]) -> bool:
    owner = claim.meta.controller
    return owner is not None and owner[0] == "Pod" and f"{claim.meta.namespace}/{owner[1]}" in pods


def _released(claim: ResourceClaim, gone: set[str]) -> ResourceClaim:
    """A shared claim whose consumers went: the resource claim controller clears its reservation and the
    allocation goes with it."""
    if claim.allocation is None:
        return claim
    left = tuple(r for r in claim.reserved_for
                 if not (r.resource == "pods" and f"{claim.meta.namespace}/{r.name}" in gone))
    if left:
        return replace(claim, reserved_for=left)
    return replace(claim, allocation=None, reserved_for=())
