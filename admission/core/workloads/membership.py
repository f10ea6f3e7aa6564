"""Which group a pod belongs to, found from its owner chain through the kinds table.

The walk starts at the pod's controller owner and climbs while the owner of each object is an enabled
kind of the table (Pod -> Job -> JobSet -> TrainJob, Pod -> RayCluster -> RayJob, Pod -> ReplicaSet ->
Deployment, ...). A LeaderWorkerSet's pods are found by the labels its controller sets, checked against
their StatefulSet owner; a pod naming a native Workload in `spec.workloadRef` is a member of that
Workload's pod group. What cannot be read stops the walk: the pod waits, and the reason names the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from admission.core.labels import QUEUE_LABEL
from admission.core.models import ObjectRef
from admission.core.workloads.kinds import BY_KIND, Grouping, WorkloadKind
from admission.core.workloads.shapes import RoleSpec

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
STATEFULSET_POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
_MAX_CHAIN = 8  # owner chains are short; a longer one is a loop


class Owners(Protocol):
    """The owner objects the walk reads; None when the object is not known (deleted, or not readable)."""

    def owner(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class Membership:
    """A pod's group as its owner chain gives it."""

    group: str = ""  # the group's name; empty: the pod is its own group
    chain: tuple[ObjectRef, ...] = ()  # the owners read, from the pod's controller up to the top-level object
    minimum: int | None = None  # the group's size from the declared shape (or Workload minCount); None: unknown
    queue: str = ""  # label draq.io/queue on the top-level object (else the nearest owner that has it)
    roles: tuple[RoleSpec, ...] = ()  # the declared shape, per group
    suspend: ObjectRef | None = None  # the top-most owner with a suspend field: evicted by suspending it
    missing: ObjectRef | None = None  # an owner that could not be read: the pod waits for it
    unknown_owner: str = ""  # a controller owner draq does not know (or whose integration is off)
    problem: str = ""  # labels that contradict the owner chain

    @property
    def top(self) -> ObjectRef | None:
        return self.chain[-1] if self.chain else None

    @property
    def gang(self) -> bool:
        return bool(self.group)


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = _map(_map(obj.get("metadata")).get("labels"))
    return {k: v for k, v in labels.items() if isinstance(v, str)}


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    owners = _map(obj.get("metadata")).get("ownerReferences")
    for owner in owners if isinstance(owners, list) else ():
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return owner
    return {}


def _known(owner: Mapping[str, Any], enabled: frozenset[str]) -> WorkloadKind | None:
    """The table's entry for an owner reference, when its kind and API group match and it is enabled."""
    kind = BY_KIND.get(str(owner.get("kind") or ""))
    api_version = str(owner.get("apiVersion") or "")
    if kind is None or kind.kind not in enabled or api_version.rpartition("/")[0] != kind.api_group:
        return None
    return kind


def membership(pod: Mapping[str, Any], owners: Owners, enabled: frozenset[str]) -> Membership:
    """The group of `pod` (a manifest) from its owner chain, reading owners through `owners`; `enabled`
    holds the kinds of the enabled integrations."""
    namespace = str(_map(pod.get("metadata")).get("namespace") or "")
    workload_ref = _map(_map(pod.get("spec")).get("workloadRef"))
    if workload_ref.get("name") and "Workload" in enabled:
        return _native(namespace, workload_ref, owners)
    owner = controller_of(pod)
    if not owner:
        return Membership()
    labels = _labels(pod)
    if owner.get("kind") == "StatefulSet" and LWS_NAME_LABEL in labels and "LeaderWorkerSet" in enabled:
        return _replica_group(namespace, labels, str(owner.get("name") or ""), owners)
    if _known(owner, enabled) is None:
        return Membership(unknown_owner=f"{owner.get('kind')} {owner.get('name')} ({owner.get('apiVersion')})")
    return _walk(namespace, owner, owners, enabled)


def walk_key(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What `membership` reads from the pod itself: pods with equal keys have the same membership (their
    owners read alike), so a reader may walk once for all of them."""
    meta = _map(pod.get("metadata"))
    owner = controller_of(pod)
    labels = _labels(pod)
    lws = labels.get(LWS_NAME_LABEL)
    # A LeaderWorkerSet leader without a group-index label takes its StatefulSet pod index as its group's.
    pod_index = labels.get(STATEFULSET_POD_INDEX_LABEL) if lws is not None else None
    workload_ref = _map(_map(pod.get("spec")).get("workloadRef"))
    return (meta.get("namespace"), owner.get("apiVersion"), owner.get("kind"), owner.get("name"),
            lws, labels.get(LWS_GROUP_INDEX_LABEL), pod_index, tuple(sorted(workload_ref.items())))


def _walk(namespace: str, owner: Mapping[str, Any], owners: Owners, enabled: frozenset[str]) -> Membership:
    chain: list[tuple[WorkloadKind, ObjectRef, Mapping[str, Any]]] = []
    while owner and len(chain) < _MAX_CHAIN:
        kind = _known(owner, enabled)
        if kind is None:
            break
        ref = ObjectRef(kind.kind, namespace, str(owner.get("name") or ""))
        obj = owners.owner(ref.kind, namespace, ref.name)
        if obj is None:
            return Membership(chain=(*(r for _, r, _ in chain), ref), missing=ref)
        chain.append((kind, ref, obj))
        owner = controller_of(obj)
    top = chain[-1][1]
    gang = any(kind.grouping is Grouping.GANG for kind, _, _ in chain)
    shaped = next(((kind, obj) for kind, _, obj in reversed(chain) if kind.shape is not None), None)
    roles = shaped[0].shape(shaped[1]) if shaped is not None and shaped[0].shape is not None and gang else ()
    return Membership(
        group=top.name if gang else "",
        chain=tuple(ref for _, ref, _ in chain),
        minimum=sum(count for _, _, count in roles) if roles else None,
        queue=next((q for _, _, obj in reversed(chain) if (q := _labels(obj).get(QUEUE_LABEL))), ""),
        roles=roles,
        suspend=next((ref for kind, ref, _ in reversed(chain) if kind.suspendable), None),
    )


def _replica_group(namespace: str, labels: Mapping[str, str], statefulset: str, owners: Owners) -> Membership:
    """A LeaderWorkerSet replica group: the leader (owned by StatefulSet `<lws>`) and its workers (owned by
    StatefulSet `<lws>-<index>`, which the leader pod owns)."""
    name, index = labels[LWS_NAME_LABEL], labels.get(LWS_GROUP_INDEX_LABEL, "")
    if not index and statefulset == name:
        # A leader, before the LWS pod webhook has labelled it (or without that webhook): its index in the
        # leader StatefulSet is its group's, and the StatefulSet controller labels it at creation.
        index = labels.get(STATEFULSET_POD_INDEX_LABEL, "")
    if not index.isdigit() or statefulset not in (name, f"{name}-{index}"):
        return Membership(problem=(
            f"labels {LWS_NAME_LABEL}={name!r}, {LWS_GROUP_INDEX_LABEL}={index!r} contradict the pod's owner "
            f"StatefulSet {statefulset!r} (expected {name!r} or '{name}-<group-index>')"))
    ref = ObjectRef("LeaderWorkerSet", namespace, name)
    lws = owners.owner(ref.kind, namespace, name)
    if lws is None:
        return Membership(chain=(ref,), missing=ref)
    kind = BY_KIND["LeaderWorkerSet"]
    roles = kind.shape(lws) if kind.shape is not None else ()
    return Membership(group=f"{name}-{index}", chain=(ref,), minimum=sum(c for _, _, c in roles),
                      queue=_labels(lws).get(QUEUE_LABEL, ""), roles=roles)


def _native(namespace: str, workload_ref: Mapping[str, Any], owners: Owners) -> Membership:
    """A member of a native Workload's pod group: its gang policy's `minCount` is the group's minimum
    (a `basic` policy: 1)."""
    name, pod_group = str(workload_ref["name"]), str(workload_ref.get("podGroup") or "")
    ref = ObjectRef("Workload", namespace, name)
    workload = owners.owner(ref.kind, namespace, name)
    if workload is None:
        return Membership(chain=(ref,), missing=ref)
    groups = [_map(g) for g in _map(workload.get("spec")).get("podGroups") or ()]
    entry = next((g for g in groups if g.get("name") == pod_group), None)
    if entry is None:
        return Membership(chain=(ref,), problem=(
            f"spec.workloadRef.podGroup {pod_group!r} is not a pod group of Workload {namespace}/{name} "
            f"(it has {', '.join(repr(g.get('name')) for g in groups) or 'none'})"))
    count = _map(_map(entry.get("policy")).get("gang")).get("minCount")
    minimum = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1
    return Membership(group=f"{name}-{pod_group}" if len(groups) > 1 else name, chain=(ref,), minimum=minimum,
                      queue=_labels(workload).get(QUEUE_LABEL, ""))
