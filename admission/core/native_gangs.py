"""Native gang scheduling: the Kubernetes gang API a cluster serves, and the objects and pod field draq sets.

Three API versions exist, each on its own releases:

- `scheduling.k8s.io/v1alpha1` (1.35, gates GenericWorkload and GangScheduling): a Workload with pod
  groups; a pod joins one with `spec.workloadRef: {name, podGroup}`.
- `scheduling.k8s.io/v1alpha2` (1.36, same gates): a standalone PodGroup (the runtime instance of a
  group); a pod joins it with `spec.schedulingGroup: {podGroupName}`.
- `scheduling.k8s.io/v1beta1` (1.37, gate GenericWorkload, off by default): the same PodGroup shape.

Where the cluster serves one, draq can make each of its groups a native gang: the mutating webhook sets
the pod field at pod creation (it is immutable afterwards), and the operator creates the group's
Workload or PodGroup with a gang policy of `minCount` pods before it releases the members. Then even if
draq's snapshot was stale, the scheduler binds all members or none; a group that cannot bind is
evicted and requeued by draq's bind timeout.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

GROUP = "scheduling.k8s.io"
POD_GROUP = "members"  # the one pod group of a v1alpha1 Workload draq creates
MANAGED_BY = {"app.kubernetes.io/managed-by": "draq"}
_MAX_NAME = 253
_INVALID = re.compile(r"[^a-z0-9.-]")


@dataclass(frozen=True, slots=True)
class GangApi:
    """One served version of the gang API: which object draq creates per group and which pod field
    names it."""

    version: str
    kind: str  # the object draq creates per group: Workload (v1alpha1) or PodGroup
    plural: str
    pod_field: str  # workloadRef (v1alpha1) or schedulingGroup

    @property
    def api_version(self) -> str:
        return f"{GROUP}/{self.version}"

    def describe(self) -> str:
        return f"{self.api_version} {self.kind}s"


V1ALPHA1 = GangApi("v1alpha1", "Workload", "workloads", "workloadRef")
V1ALPHA2 = GangApi("v1alpha2", "PodGroup", "podgroups", "schedulingGroup")
V1BETA1 = GangApi("v1beta1", "PodGroup", "podgroups", "schedulingGroup")
GANG_APIS = (V1BETA1, V1ALPHA2, V1ALPHA1)
"""Newest first: discovery takes the first one the cluster serves."""
_NAMED_BY = {"workloadRef": V1ALPHA1.describe(), "schedulingGroup": f"{V1ALPHA2.describe()} or {V1BETA1.describe()}"}


def chosen(served: Iterable[GangApi]) -> GangApi | None:
    """The newest gang API among those served, or None."""
    present = set(served)
    return next((api for api in GANG_APIS if api in present), None)


def gang_name(group: str) -> str:
    """A DNS-subdomain name for a group's Workload or PodGroup: the group name when it is one, else a
    cleaned name with a hash suffix (group names are label values, which may hold upper case and `_`)."""
    if re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", group) and len(group) <= _MAX_NAME:
        return group
    digest = hashlib.sha256(group.encode()).hexdigest()[:10]
    cleaned = _INVALID.sub("-", group.lower()).strip("-.")[:40]
    return f"{cleaned}-{digest}" if cleaned else f"group-{digest}"


def pod_reference(api: GangApi, group: str) -> dict[str, str]:
    """The value of the pod field that makes a pod a member of its group's native gang."""
    if api.pod_field == "workloadRef":
        return {"name": gang_name(group), "podGroup": POD_GROUP}
    return {"podGroupName": gang_name(group)}


def gang_object(api: GangApi, namespace: str, group: str, min_member: int) -> dict[str, Any]:
    """The native gang of a group: one pod group, scheduled all or nothing with `min_member` pods."""
    gang = {"gang": {"minCount": min_member}}
    metadata = {"name": gang_name(group), "namespace": namespace, "labels": dict(MANAGED_BY)}
    if api.kind == "Workload":
        spec: dict[str, Any] = {"podGroups": [{"name": POD_GROUP, "policy": gang}]}
    else:
        spec = {"schedulingPolicy": gang}
    return {"apiVersion": api.api_version, "kind": api.kind, "metadata": metadata, "spec": spec}


def referenced_gang(pod: Mapping[str, Any] | Any) -> str | None:
    """The native gang a pod manifest names (`spec.workloadRef.name` or
    `spec.schedulingGroup.podGroupName`), if any."""
    spec = pod.get("spec") if isinstance(pod, Mapping) else None
    if not isinstance(spec, Mapping):
        return None
    for field, key in (("workloadRef", "name"), ("schedulingGroup", "podGroupName")):
        ref = spec.get(field)
        name = ref.get(key) if isinstance(ref, Mapping) else None
        if isinstance(name, str) and name:
            return name
    return None


def unserved_reference(pod: Mapping[str, Any] | Any, served: GangApi | None) -> str:
    """Why a pod's gang field cannot work on this cluster ("" when it can, or when it names none): it names
    a Workload (v1alpha1) or a PodGroup (v1alpha2, v1beta1) of an API the cluster does not serve."""
    spec = pod.get("spec") if isinstance(pod, Mapping) else None
    if not isinstance(spec, Mapping):
        return ""
    for field, wanted in _NAMED_BY.items():
        if spec.get(field) is None or (served is not None and served.pod_field == field):
            continue
        serves = (f"it serves {served.describe()}: use spec.{served.pod_field}" if served is not None
                  else "it serves no gang API (Kubernetes 1.35+ with the GenericWorkload gate)")
        return (f"spec.{field} names a native gang of {wanted}, which this cluster does not serve "
                f"({serves}, or remove the field)")
    return ""


def expected(release: str | None) -> GangApi | None:
    """The gang API a release (`1.37`) serves when its gates are on; None before 1.35 or when unknown."""
    if release is None:
        return None
    minor = int(release.split(".")[1])
    if minor < 35:
        return None
    return V1ALPHA1 if minor == 35 else V1ALPHA2 if minor == 36 else V1BETA1


def discovery_note(release: str | None, served: GangApi | None, wanted: str) -> str:
    """What draq does about native gangs, for the start-up log: on with which API, or off and why.
    `wanted` is the setting (auto, on, off)."""
    if wanted == "off":
        return "native gangs off (--native-gangs off): draq's own gang admission keeps each group whole"
    if served is not None:
        note = f"native gangs on: {served.describe()}, pods join with spec.{served.pod_field}"
        want = expected(release)
        if want is not None and want != served:
            note += f" (Kubernetes {release} would serve {want.api_version}; using what the cluster serves)"
        return note
    want = expected(release)
    if want is None:
        why = (f"Kubernetes {release} has no gang API (1.35 or later)" if release is not None
               else "no gang API is served and the API server's version is unknown")
    else:
        gates = "GenericWorkload" if want is V1BETA1 else "GenericWorkload and GangScheduling"
        why = (f"{want.api_version} not served (Kubernetes {release} serves it with the {gates} feature "
               f"gate{'s' if ' and ' in gates else ''} and --runtime-config={want.api_version}=true)")
    return f"native gangs off: {why}; draq's own gang admission keeps each group whole"


def gang_api_of(pod: Mapping[str, Any] | Any, served: GangApi | None) -> GangApi | None:
    """The gang API whose object a pod's gang field names: v1alpha1 for `workloadRef`; for
    `schedulingGroup` the served PodGroup version. None when the pod names no gang or its API is not served."""
    spec = pod.get("spec") if isinstance(pod, Mapping) else None
    if not isinstance(spec, Mapping) or referenced_gang(pod) is None:
        return None
    if spec.get("workloadRef") is not None:
        return V1ALPHA1
    return served if served is not None and served.pod_field == "schedulingGroup" else None
