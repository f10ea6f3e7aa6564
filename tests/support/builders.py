"""Manifest builders shared by all unit tests: plain dicts, as the API server would send them.

Each builder writes only the fields it is given (plus the ones the kind requires), so a test says
what matters to it and nothing else. `models(...)` parses manifests into the models the code under
test works on: core kinds with `parse_objects`, draq's own kinds with the quota parsers.

Defaults: namespace `default`, device class `gpu` selecting the devices of driver `gpu.example.com`,
requests named `gpu` for one device of class `gpu`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from admission.core.labels import API_VERSION, GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.models import parse_objects
from admission.core.quota import parse_cluster_queue, parse_local_queue, parse_pod_group, parse_quota_unit

Manifest = dict[str, Any]

DRIVER = "gpu.example.com"
RESOURCE_API = "resource.k8s.io/v1"
NAMESPACE = "default"
CREATED = "2026-01-01T00:00:00Z"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _metadata(name: str, namespace: str | None = None, *, labels: Mapping[str, str] | None = None,
              annotations: Mapping[str, str] | None = None, created: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    if created is not None:
        meta["creationTimestamp"] = created
    return meta


def _cel(expression: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": expression}}]


# ----- cluster: nodes, device classes, slices -----------------------------------------------------
def node(name: str, labels: Mapping[str, str] | None = None, *,
         allocatable: Mapping[str, str] | None = None) -> Manifest:
    """A Node; `allocatable` (e.g. `{"nvidia.com/gpu": "8"}`) is what a device plugin or the kubelet reports."""
    manifest: Manifest = {"apiVersion": "v1", "kind": "Node", "metadata": _metadata(name, labels=labels)}
    if allocatable is not None:
        manifest["status"] = {"allocatable": dict(allocatable)}
    return manifest


def device_class(name: str = "gpu", driver: str = DRIVER, *, expression: str | None = None,
                 config: list[dict[str, Any]] | None = None, extended_resource: str | None = None,
                 created: str | None = None) -> Manifest:
    """A DeviceClass selecting the devices of `driver` (or what `expression` selects)."""
    spec: dict[str, Any] = {"selectors": _cel(expression or f'device.driver == "{driver}"')}
    if config:
        spec["config"] = config
    if extended_resource:
        spec["extendedResourceName"] = extended_resource
    return {"apiVersion": RESOURCE_API, "kind": "DeviceClass", "metadata": _metadata(name, created=created),
            "spec": spec}


def _attribute(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)  # already typed: {"version": "1.2.3"}, {"ints": [...]}
    kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
    return {kind: value}


def _quantity(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {"value": value}


def device(name: str, attributes: Mapping[str, Any] | None = None, *, capacity: Mapping[str, Any] | None = None,
           consumes: Mapping[str, Mapping[str, str]] | None = None, **fields: Any) -> dict[str, Any]:
    """A device of a ResourceSlice.

    `attributes`: plain values are typed (bool, int, else string); a mapping is taken as typed already.
    `capacity`: `{"memory": "80Gi"}`, or a mapping per name for a request policy.
    `consumes`: counters taken from the slice's counter sets, `{"gpu-0": {"memory": "20Gi"}}`.
    Other fields (taints, bindsToNode, allowMultipleAllocations, ...) are copied as given.
    """
    entry: dict[str, Any] = {"name": name}
    if attributes is not None:
        entry["attributes"] = {key: _attribute(value) for key, value in attributes.items()}
    if capacity is not None:
        entry["capacity"] = {key: _quantity(value) for key, value in capacity.items()}
    if consumes is not None:
        entry["consumesCounters"] = [{"counterSet": counter_set, "counters": {k: _quantity(v) for k, v in c.items()}}
                                     for counter_set, c in consumes.items()]
    entry.update(fields)
    return entry


def gpu(name: str, model: str = "H100", memory: str = "80Gi", **fields: Any) -> dict[str, Any]:
    """A GPU with a `model` attribute and `memory` capacity."""
    return device(name, {"model": model}, capacity={"memory": memory}, **fields)


def resource_slice(node: str | None, *devices: dict[str, Any], name: str | None = None, driver: str = DRIVER,
                   pool: str | None = None, generation: int = 1, count: int = 1,
                   counters: Mapping[str, Mapping[str, str]] | None = None, **spec: Any) -> Manifest:
    """A ResourceSlice of `node` (None: no nodeName; pass nodeSelector= or allNodes=True instead).

    The pool is named after the node unless `pool` is given; `count` is its resourceSliceCount.
    `counters`: shared counter sets, `{"gpu-0": {"memory": "80Gi"}}`. Other spec fields are copied as given.
    """
    pool_name = pool or node or name or "pool"
    body: dict[str, Any] = {"driver": driver}
    if node is not None:
        body["nodeName"] = node
    body["pool"] = {"name": pool_name, "generation": generation, "resourceSliceCount": count}
    body["devices"] = list(devices)
    if counters is not None:
        body["sharedCounters"] = [{"name": counter_set, "counters": {k: _quantity(v) for k, v in c.items()}}
                                  for counter_set, c in counters.items()]
    body.update(spec)
    return {"apiVersion": RESOURCE_API, "kind": "ResourceSlice",
            "metadata": _metadata(name or f"{node or pool_name}-{driver}"), "spec": body}


# ----- claims and templates -----------------------------------------------------------------------
def exactly(name: str = "gpu", device_class: str = "gpu", count: int | None = None, *, selector: str | None = None,
            **fields: Any) -> dict[str, Any]:
    """A request for `count` devices of a class (count left out: one); other fields (allocationMode,
    adminAccess, tolerations, capacity, selectors) are copied as given."""
    body: dict[str, Any] = {"deviceClassName": device_class, **fields}
    if count is not None:
        body["count"] = count
    if selector:
        body["selectors"] = _cel(selector)
    return {"name": name, "exactly": body}


def all_devices(name: str = "gpu", device_class: str = "gpu", *, selector: str | None = None,
                **fields: Any) -> dict[str, Any]:
    """A request for all matching devices (allocationMode All)."""
    return exactly(name, device_class, selector=selector, allocationMode="All", **fields)


def first_available(name: str, *subrequests: dict[str, Any]) -> dict[str, Any]:
    """A prioritized list; each subrequest is built with `exactly(...)`."""
    return {"name": name, "firstAvailable": [{"name": s["name"], **s["exactly"]} for s in subrequests]}


def _device_claim_spec(requests: Sequence[dict[str, Any]], constraints: list[dict[str, Any]] | None,
                       config: list[dict[str, Any]] | None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests or [exactly()])}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return {"devices": devices}


def result(request: str, device: str, pool: str, *, driver: str = DRIVER, **fields: Any) -> dict[str, Any]:
    """One allocation result: `device` of `pool` for `request`; other fields (adminAccess, shareID,
    consumedCapacity) are copied as given."""
    return {"request": request, "driver": driver, "pool": pool, "device": device, **fields}


def holding(*device_ids: str, request: str = "gpu", **fields: Any) -> dict[str, Any]:
    """A claim's status.allocation holding the devices `driver/pool/device`, all for one request."""
    results = []
    for device_id in device_ids:
        driver, pool, name = device_id.rsplit("/", 2)
        results.append(result(request, name, pool, driver=driver, **fields))
    return {"devices": {"results": results}}


def claim(name: str, *requests: dict[str, Any], namespace: str = NAMESPACE,
          constraints: list[dict[str, Any]] | None = None, config: list[dict[str, Any]] | None = None,
          allocation: Sequence[dict[str, Any]] | dict[str, Any] | None = None, reserved_for: Sequence[str] = (),
          labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None) -> Manifest:
    """A ResourceClaim (no requests given: one device of class gpu).

    `allocation`: the devices allocated, a list of `result(...)`, or a whole status.allocation (as from
    `holding(...)`); `reserved_for`: names of the pods using it.
    """
    manifest: Manifest = {"apiVersion": RESOURCE_API, "kind": "ResourceClaim",
                          "metadata": _metadata(name, namespace, labels=labels, annotations=annotations),
                          "spec": _device_claim_spec(requests, constraints, config)}
    status: dict[str, Any] = {}
    if isinstance(allocation, Mapping):
        status["allocation"] = dict(allocation)
    elif allocation is not None:
        status["allocation"] = {"devices": {"results": list(allocation)}}
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": p} for p in reserved_for]
    if status:
        manifest["status"] = status
    return manifest


def template(name: str, *requests: dict[str, Any], namespace: str = NAMESPACE,
             constraints: list[dict[str, Any]] | None = None, config: list[dict[str, Any]] | None = None,
             labels: Mapping[str, str] | None = None) -> Manifest:
    """A ResourceClaimTemplate (no requests given: one device of class gpu)."""
    return {"apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate",
            "metadata": _metadata(name, namespace, labels=labels),
            "spec": {"spec": _device_claim_spec(requests, constraints, config)}}


# ----- pods ---------------------------------------------------------------------------------------
def pod(name: str = "p", namespace: str = NAMESPACE, *, labels: Mapping[str, str] | None = None,
        queue: str | None = None, group: str | None = None, group_min: int | str | None = None,
        gated: bool = False, gates: Sequence[str] | None = None,
        templates: Mapping[str, str] | None = None, claims: Mapping[str, str] | None = None,
        requests: Mapping[str, str] | None = None, init_requests: Mapping[str, str] | None = None,
        container: str = "main", image: str | None = None,
        node: str | None = None, node_selector: Mapping[str, str] | None = None,
        phase: str | None = None, claim_statuses: Mapping[str, str] | None = None, created: str | None = None,
        owner: Mapping[str, Any] | None = None, generate_name: str | None = None,
        priority: int | None = None) -> Manifest:
    """A Pod with one container; `priority` is spec.priority, as the API server sets it from the class.

    `name=""` leaves the name out (with `generate_name`). `queue`, `group`, `group_min` set draq's
    labels on top of `labels` (an empty `labels` is written as an empty map). `gated` adds draq's
    scheduling gate after `gates` (`gates=[]` writes an empty list). `templates` and `claims` map pod
    claim entries to template or claim names; template entries come first. `requests` are the
    container's resource requests, `init_requests` those of an init container; `node` is spec.nodeName.
    `phase` and `claim_statuses` (entry to the name of the claim made from its template) are the status.
    """
    metadata: dict[str, Any] = {}
    if name:
        metadata["name"] = name
    if generate_name:
        metadata["generateName"] = generate_name
    metadata["namespace"] = namespace
    draq_labels = {key: str(value) for key, value in
                   ((QUEUE_LABEL, queue), (GROUP_LABEL, group), (GROUP_MIN_LABEL, group_min)) if value is not None}
    if labels is not None or draq_labels:
        metadata["labels"] = {**(labels or {}), **draq_labels}
    if owner is not None:
        metadata["ownerReferences"] = [dict(owner)]
    if created is not None:
        metadata["creationTimestamp"] = created

    main: dict[str, Any] = {"name": container}
    if image is not None:
        main["image"] = image
    if requests is not None:
        main["resources"] = {"requests": dict(requests)}
    spec: dict[str, Any] = {"containers": [main]}
    if init_requests is not None:
        spec["initContainers"] = [{"name": "init", "resources": {"requests": dict(init_requests)}}]
    entries = [{"name": k, "resourceClaimTemplateName": v} for k, v in (templates or {}).items()]
    entries += [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
    if entries:
        spec["resourceClaims"] = entries
    if gates is not None or gated:
        names = list(gates or ())
        if gated and GATE not in names:
            names.append(GATE)
        spec["schedulingGates"] = [{"name": g} for g in names]
    if node:
        spec["nodeName"] = node
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    if priority is not None:
        spec["priority"] = priority

    manifest: Manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if claim_statuses is not None:
        status["resourceClaimStatuses"] = [{"name": k, "resourceClaimName": v} for k, v in claim_statuses.items()]
    if status:
        manifest["status"] = status
    return manifest


# ----- draq's own kinds ---------------------------------------------------------------------------
def draq_object(kind: str, name: str, spec: Mapping[str, Any], namespace: str | None = None) -> Manifest:
    """Any draq.io object with the spec as given (for tests of what the parsers refuse)."""
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": _metadata(name, namespace), "spec": dict(spec)}


def quota(unit: str, nominal: str | int, borrowing: str | int | None = None,
          lending: str | int | None = None) -> dict[str, Any]:
    """One entry of a ClusterQueue's spec.quotas."""
    entry: dict[str, Any] = {"unit": unit, "nominal": nominal}
    if borrowing is not None:
        entry["borrowingLimit"] = borrowing
    if lending is not None:
        entry["lendingLimit"] = lending
    return entry


EVERY_NAMESPACE: Mapping[str, Any] = {}


def cluster_queue(name: str, *quotas: dict[str, Any], cohort: str | None = None, strategy: str | None = None,
                  namespace_selector: Mapping[str, Any] | None = EVERY_NAMESPACE,
                  status: Mapping[str, Any] | None = None) -> Manifest:
    """A ClusterQueue with the `quota(...)` entries given, serving every namespace unless `namespace_selector`
    says otherwise (None: no selector, so it serves none); `status` as the operator writes it."""
    spec: dict[str, Any] = {}
    if cohort is not None:
        spec["cohort"] = cohort
    if quotas:
        spec["quotas"] = list(quotas)
    if strategy is not None:
        spec["queueingStrategy"] = str(strategy)
    if namespace_selector is not None:
        spec["namespaceSelector"] = dict(namespace_selector)
    manifest = draq_object("ClusterQueue", name, spec)
    if status is not None:
        manifest["status"] = dict(status)
    return manifest


def local_queue(name: str, cluster_queue: str, namespace: str = NAMESPACE) -> Manifest:
    return draq_object("LocalQueue", name, {"clusterQueue": cluster_queue}, namespace)


def quota_unit(name: str, spec: Mapping[str, Any] | None = None, **fields: Any) -> Manifest:
    """A QuotaUnit; its spec from `spec` and keyword fields, e.g. `devices={"deviceClassNames": ["gpu"]}`."""
    return draq_object("QuotaUnit", name, {**(spec or {}), **fields})


def pod_group(name: str, min_member: int, queue: str, *, namespace: str = NAMESPACE, priority: int | None = None,
              status: Mapping[str, Any] | None = None) -> Manifest:
    """A PodGroup of queue (LocalQueue) `queue`; `status` as the operator records it."""
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if priority is not None:
        spec["priority"] = priority
    manifest = draq_object("PodGroup", name, spec, namespace)
    if status is not None:
        manifest["status"] = dict(status)
    return manifest


# ----- manifests to models ------------------------------------------------------------------------
_DRAQ_PARSERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "ClusterQueue": parse_cluster_queue,
    "LocalQueue": parse_local_queue,
    "QuotaUnit": parse_quota_unit,
    "PodGroup": parse_pod_group,
}


def models(*manifests: Mapping[str, Any]) -> list[Any]:
    """The models of the manifests, in order (`List` objects flattened)."""
    parsed: list[Any] = []
    for manifest in manifests:
        if manifest.get("apiVersion") == API_VERSION:
            parsed.append(_DRAQ_PARSERS[str(manifest.get("kind"))](manifest))
        else:
            parsed.extend(parse_objects([manifest]))
    return parsed


def model(manifest: Mapping[str, Any]) -> Any:
    """The model of one manifest."""
    (only,) = models(manifest)
    return only


# ----- node filters: taints, tolerations, affinity, container resources -------------------------
def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, Any]:
    """One entry of a Node's spec.taints."""
    entry: dict[str, Any] = {"key": key, "effect": effect}
    if value:
        entry["value"] = value
    return entry


def toleration(key: str = "", value: str | None = None, *, operator: str | None = None,
               effect: str | None = None) -> dict[str, Any]:
    """One entry of a Pod's spec.tolerations; only the fields given are written."""
    entry: dict[str, Any] = {}
    for name, given in (("key", key), ("operator", operator), ("value", value), ("effect", effect)):
        if given:
            entry[name] = given
    return entry


def requirement(key: str, operator: str, *values: str) -> dict[str, Any]:
    """One node selector requirement (matchExpressions / matchFields entry)."""
    entry: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        entry["values"] = list(values)
    return entry


def node_affinity(*terms: Sequence[dict[str, Any]], fields: Sequence[Sequence[dict[str, Any]]] = ()) -> dict[str, Any]:
    """spec.affinity with a required node affinity: one term per `terms` entry (its matchExpressions),
    then one term per `fields` entry (its matchFields)."""
    selector_terms = [{"matchExpressions": list(t)} for t in terms] + [{"matchFields": list(f)} for f in fields]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": selector_terms}}}


def container(name: str = "main", *, requests: Mapping[str, str] | None = None,
              limits: Mapping[str, str] | None = None, restart_policy: str | None = None) -> dict[str, Any]:
    """A container (or init container; `restart_policy="Always"` makes an init container a sidecar)."""
    entry: dict[str, Any] = {"name": name}
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = dict(requests)
    if limits is not None:
        resources["limits"] = dict(limits)
    if resources:
        entry["resources"] = resources
    if restart_policy is not None:
        entry["restartPolicy"] = restart_policy
    return entry


def with_spec(manifest: Manifest, **spec: Any) -> Manifest:
    """A copy of `manifest` with these spec fields set (e.g. `tolerations=[...]`, `affinity=...`,
    `containers=[...]`, `initContainers=[...]`, `overhead={...}`, `resources={...}`, `taints=[...]`,
    `unschedulable=True`)."""
    return {**manifest, "spec": {**manifest.get("spec", {}), **spec}}


# ----- native quota and namespaces --------------------------------------------------------------
def resource_quota(name: str, hard: Mapping[str, str | int], namespace: str = NAMESPACE, *,
                   used: Mapping[str, str | int] | None = None, scopes: Sequence[str] = ()) -> Manifest:
    """A ResourceQuota with `spec.hard`; `used` is the status the quota controller writes (left out: none)."""
    spec: dict[str, Any] = {"hard": dict(hard)}
    if scopes:
        spec["scopes"] = list(scopes)
    manifest: Manifest = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": _metadata(name, namespace),
                          "spec": spec}
    if used is not None:
        manifest["status"] = {"hard": dict(hard), "used": dict(used)}
    return manifest


def namespace(name: str, labels: Mapping[str, str] | None = None) -> Manifest:
    """A Namespace (labels such as draq.io/default-queue put its pods under draq)."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _metadata(name, labels=labels)}
