"""Workloads as the cluster would hold them once submitted: a Job's pods as the Job controller makes
them, every pod as draq's mutating webhook leaves it (queue and group labels, the gate), and how long
each group runs.

Pure: manifests in, manifests out. The webhook's own decision (`review.mutate`) labels and gates the
pods, so a simulated pod is grouped exactly as a real one would be.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from admission.core.errors import InvalidInput
from admission.core.labels import GROUP_LABEL, MANAGED_LABEL, RUN_TIME_ANNOTATION
from admission.core.review import mutate
from admission.core.review.envelope import AdmissionRequest, GroupVersionKind, JsonObject, PatchOperation
from admission.core.workloads import job_size

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
NEVER = ("never", "forever", "inf")


def parse_duration(text: str, where: str = "duration") -> float | None:
    """`90s`, `30m`, `1h30m`, `2d`, a plain number of seconds; `never` (None): runs until the end."""
    value = text.strip().lower()
    if value in NEVER:
        return None
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise InvalidInput(where, text, "not a duration: use e.g. 90s, 30m, 1h30m, 2d, or never")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def format_duration(seconds: float) -> str:
    """`0s`, `45s`, `1h30m`, `2d3h`: whole seconds, largest units first."""
    whole = round(seconds)
    if whole <= 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if whole >= size:
            out.append(f"{whole // size}{unit}")
            whole %= size
    return "".join(out)


class _Lookups:
    """What the mutating webhook reads, served from the simulated cluster's objects."""

    def __init__(self, namespaces: Mapping[str, Mapping[str, str]], jobs: Mapping[str, JsonObject]) -> None:
        self._namespaces = namespaces
        self._jobs = jobs

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self._namespaces.get(namespace)

    def owner(self, kind: str, namespace: str, name: str) -> JsonObject | None:
        return self._jobs.get(f"{namespace}/{name}") if kind == "Job" else None

    def local_queue(self, namespace: str, name: str) -> JsonObject | None:
        return None

    def cluster_queue(self, name: str) -> JsonObject | None:
        return None

    def quota_unit(self, name: str) -> JsonObject | None:
        return None

    def topology(self, name: str) -> JsonObject | None:
        return None

    def quota_units(self) -> Iterable[JsonObject]:
        return ()

    def device_class(self, name: str) -> JsonObject | None:
        return None

    def lease(self, namespace: str, name: str) -> JsonObject | None:
        return None

    def pod_group(self, namespace: str, name: str) -> JsonObject | None:
        return None

    def pending_groups(self, namespace: str, local_queue: str) -> int:
        return 0

    def claim_template(self, namespace: str, name: str) -> JsonObject | None:
        return None


def submit(manifests: Iterable[Mapping[str, Any]], namespace_labels: Mapping[str, Mapping[str, str]],
           default_namespace: str = "default") -> list[Mapping[str, Any]]:
    """Jobs become their pods; pods not yet bound are mutated as draq's webhook would at creation (their
    namespace must be managed: a namespace not among `namespace_labels` counts as managed when the pod
    names a queue). Every other manifest passes unchanged."""
    out: list[Mapping[str, Any]] = []
    jobs: dict[str, JsonObject] = {}
    pods: list[dict[str, Any]] = []
    for manifest in manifests:
        kind = (manifest.get("apiVersion"), manifest.get("kind"))
        namespace = str(_meta(manifest).get("namespace") or default_namespace)
        if kind == ("batch/v1", "Job"):
            jobs[f"{namespace}/{_meta(manifest).get('name')}"] = manifest
            pods += job_pods(manifest, namespace)
        elif kind == ("v1", "Pod"):
            pod = copy.deepcopy(dict(manifest))
            pod.setdefault("metadata", {}).setdefault("namespace", namespace)
            pods.append(pod)
        else:
            out.append(manifest)
    labels = dict(namespace_labels)
    out += [_mutated(pod, labels, jobs, index) for index, pod in enumerate(pods)]
    return out


def declared_run_times(manifests: Iterable[Mapping[str, Any]],
                       default_namespace: str = "default") -> dict[str, float | None]:
    """Run times declared with the annotation `draq.io/run-time`: group key -> seconds (None: never ends).
    A PodGroup's annotation wins over its members'; among members, the longest."""
    from_groups: dict[str, float | None] = {}
    from_pods: dict[str, float | None] = {}
    for manifest in manifests:
        declared = _annotation(manifest)
        if declared is None:
            continue
        meta = _meta(manifest)
        namespace = str(meta.get("namespace") or default_namespace)
        where = f"{manifest.get('kind')} {namespace}/{meta.get('name')}, annotation {RUN_TIME_ANNOTATION}"
        seconds = parse_duration(declared, where)
        if manifest.get("kind") == "PodGroup":
            from_groups[f"{namespace}/{meta.get('name')}"] = seconds
        elif manifest.get("kind") == "Pod" and (meta.get("labels") or {}).get(GROUP_LABEL):
            key = f"{namespace}/{meta['labels'][GROUP_LABEL]}"
            known = from_pods.get(key, 0.0)
            from_pods[key] = None if seconds is None or (key in from_pods and known is None) \
                else max(seconds, known or 0.0)
    return {**from_pods, **from_groups}


def job_pods(job: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
    """The pods the Job controller starts at once: `min(parallelism, completions)` of the template, named
    `<job>-<n>`, owned by the Job; a suspended Job starts none."""
    spec = job.get("spec") if isinstance(job.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    if spec.get("suspend") is True:
        return []
    name = str(_meta(job).get("name") or "")
    template = spec.get("template") if isinstance(spec.get("template"), Mapping) else {}
    assert isinstance(template, Mapping)
    pods = []
    for index in range(max(job_size(spec), 1)):
        meta = copy.deepcopy(dict(template.get("metadata") or {}))
        meta.update({"name": f"{name}-{index}", "namespace": namespace,
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                          "uid": str(_meta(job).get("uid") or f"job-{namespace}-{name}"),
                                          "controller": True}]})
        declared = _annotation(job)
        if declared is not None:
            meta.setdefault("annotations", {}).setdefault(RUN_TIME_ANNOTATION, declared)
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                     "spec": copy.deepcopy(dict(template.get("spec") or {}))})
    return pods


def _mutated(pod: dict[str, Any], namespaces: dict[str, Mapping[str, str]], jobs: Mapping[str, JsonObject],
             index: int) -> dict[str, Any]:
    meta = pod["metadata"]
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    if spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return pod  # already placed or done: the webhook only sees pods at creation
    namespace = str(meta["namespace"])
    if namespace not in namespaces:
        namespaces[namespace] = {"kubernetes.io/metadata.name": namespace, MANAGED_LABEL: "true"}
    request = AdmissionRequest(uid=f"simulated-{index:06d}", kind=GroupVersionKind("", "v1", "Pod"), resource="pods",
                               sub_resource="", operation="CREATE", namespace=namespace,
                               name=str(meta.get("name") or ""), username="", user_groups=(), object=pod,
                               old_object=None, dry_run=True)
    decision = mutate(request, _Lookups(namespaces, jobs))
    for operation in decision.patch:
        _apply(pod, operation)
    return pod


def _apply(document: dict[str, Any], operation: PatchOperation) -> None:
    """An `add` of the webhook's patch (the only operation it makes)."""
    *parents, last = operation.path
    target: Any = document
    for key in parents:
        target = target.setdefault(key, {}) if isinstance(target, dict) else target[int(key)]
    if isinstance(target, list):
        target.append(copy.deepcopy(operation.value))
    else:
        target[last] = copy.deepcopy(operation.value)


def _meta(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = manifest.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _annotation(manifest: Mapping[str, Any]) -> str | None:
    annotations = _meta(manifest).get("annotations")
    if isinstance(annotations, Mapping) and isinstance(annotations.get(RUN_TIME_ANNOTATION), str):
        return str(annotations[RUN_TIME_ANNOTATION])
    return None
