"""Stand-in controllers for JobSet and LeaderWorkerSet, for the local control plane.

The Go module proxy does not serve `sigs.k8s.io/jobset` or `sigs.k8s.io/lws`, so their controllers
cannot be built here. Their CRDs (`crds/`, written from the published API types) are installed as they
are, and these small controllers create the object graph the real ones create, as far as draq can see it:

- **JobSet** (`jobset.x-k8s.io/v1alpha2`): one child Job per replicated job and index, named
  `<jobset>-<replicatedJob>-<index>`, owned by the JobSet (controller reference), with the JobSet's labels
  (`jobset.sigs.k8s.io/jobset-name`, `replicatedjob-name`, `replicatedjob-replicas`, `job-index`) on the
  Job and its pod template; `startupPolicyOrder: InOrder` creates a replicated job's Jobs only when every
  Job of the ones before it has all its pods ready; `spec.suspend` is copied to every child Job.
- **LeaderWorkerSet** (`leaderworkerset.x-k8s.io/v1`): a leader StatefulSet named `<lws>` with
  `spec.replicas` pods (owned by the LWS), and for each leader pod a worker StatefulSet `<lws>-<index>`
  with `size - 1` pods numbered from 1 (`<lws>-<index>-1`, ...), owned by the leader pod;
  `startupPolicy: LeaderReady` creates the workers only once their leader is ready. Worker templates
  carry `leaderworkerset.sigs.k8s.io/name` and `group-index`; leader pods carry the name, and their group
  index is the StatefulSet's pod index (the real controller's pod webhook adds `group-index` to leaders;
  these stand-ins have no webhook).

Not modelled: status beyond what draq reads, failure and success policies, restarts, rolling updates,
DNS and Services, exclusive placement (the real controllers' webhooks add pod affinity for it).
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger("draq.standins")
CRD_DIR = Path(__file__).parent / "crds"
JOBSET_GROUP, JOBSET_VERSION = "jobset.x-k8s.io", "v1alpha2"
LWS_GROUP, LWS_VERSION = "leaderworkerset.x-k8s.io", "v1"
JOBSET_LABELS = "jobset.sigs.k8s.io"
LWS_LABELS = "leaderworkerset.sigs.k8s.io"


def crd_files() -> list[Path]:
    return sorted(CRD_DIR.glob("*.yaml"))


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _with_labels(template: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    out = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    return out


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def child_jobs(jobset: Mapping[str, Any], ready: Mapping[str, bool]) -> list[dict[str, Any]]:
    """The Jobs the JobSet should have now: every replicated job's, or with InOrder only up to the first
    replicated job whose Jobs are not all ready (`ready`: Job name -> all its pods are ready)."""
    meta, spec = jobset["metadata"], jobset.get("spec") or {}
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    suspend = bool(spec.get("suspend"))
    jobs: list[dict[str, Any]] = []
    for replicated in spec.get("replicatedJobs") or []:
        replicas = _int(replicated.get("replicas"), 1)
        names = [f"{meta['name']}-{replicated['name']}-{index}" for index in range(replicas)]
        for index, name in enumerate(names):
            labels = {f"{JOBSET_LABELS}/jobset-name": meta["name"],
                      f"{JOBSET_LABELS}/replicatedjob-name": replicated["name"],
                      f"{JOBSET_LABELS}/replicatedjob-replicas": str(replicas),
                      f"{JOBSET_LABELS}/job-index": str(index)}
            template = copy.deepcopy(replicated.get("template") or {})
            job_spec = template.get("spec") or {}
            job_spec["template"] = _with_labels(job_spec.get("template") or {}, labels)
            job_spec["suspend"] = suspend
            jobs.append({"apiVersion": "batch/v1", "kind": "Job",
                         "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels,
                                      "ownerReferences": [owner_reference(jobset)]},
                         "spec": job_spec})
        if in_order and not all(ready.get(name, False) for name in names):
            break
    return jobs


def leader_statefulset(lws: Mapping[str, Any]) -> dict[str, Any]:
    meta, spec = lws["metadata"], lws.get("spec") or {}
    template = spec.get("leaderWorkerTemplate") or {}
    leader = template.get("leaderTemplate") or template.get("workerTemplate") or {}
    labels = {f"{LWS_LABELS}/name": meta["name"], f"{LWS_LABELS}/worker-index": "0"}
    return _statefulset(meta["name"], meta["namespace"], _int(spec.get("replicas"), 1),
                        _with_labels(leader, labels), labels, lws)


def worker_statefulset(lws: Mapping[str, Any], leader_pod: Mapping[str, Any], index: int) -> dict[str, Any]:
    meta, spec = lws["metadata"], lws.get("spec") or {}
    template = spec.get("leaderWorkerTemplate") or {}
    size = _int(template.get("size"), 1)
    selector = {f"{LWS_LABELS}/name": meta["name"], f"{LWS_LABELS}/group-index": str(index)}
    workers = _statefulset(f"{meta['name']}-{index}", meta["namespace"], size - 1,
                           _with_labels(template.get("workerTemplate") or {}, selector), selector, leader_pod)
    workers["spec"]["ordinals"] = {"start": 1}  # the leader is worker 0 of its group
    return workers


def _statefulset(name: str, namespace: str, replicas: int, template: dict[str, Any], selector: Mapping[str, str],
                 owner: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(selector),
                         "ownerReferences": [owner_reference(owner)]},
            "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": dict(selector)}, "template": template}}


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class StandInControllers:
    """Reconciles every JobSet and LeaderWorkerSet a few times a second, in a thread."""

    def __init__(self, api_client: client.ApiClient, period: float = 0.25) -> None:
        self.api_client = api_client
        self.custom = client.CustomObjectsApi(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.core = client.CoreV1Api(api_client)
        self.period = period
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> StandInControllers:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="standins", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)

    def __enter__(self) -> StandInControllers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.reconcile()
            except ApiException as err:
                if err.status != 404:  # a CRD not installed: nothing to do
                    log.warning("stand-in controllers: %s", err)
            except Exception:  # keep reconciling; the tests see what went wrong
                log.exception("stand-in controllers")

    def reconcile(self) -> None:
        for jobset in self._list(JOBSET_GROUP, JOBSET_VERSION, "jobsets"):
            self._reconcile_jobset(jobset)
        for lws in self._list(LWS_GROUP, LWS_VERSION, "leaderworkersets"):
            self._reconcile_lws(lws)

    def _list(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        try:
            listed = self.custom.list_cluster_custom_object(group, version, plural)
            return list(listed.get("items") or []) if isinstance(listed, dict) else []
        except ApiException as err:
            if err.status == 404:
                return []
            raise

    def _reconcile_jobset(self, jobset: Mapping[str, Any]) -> None:
        meta = jobset["metadata"]
        if meta.get("deletionTimestamp"):
            return
        existing = {j.metadata.name: j for j in self.batch.list_namespaced_job(
            meta["namespace"], label_selector=f"{JOBSET_LABELS}/jobset-name={meta['name']}").items}
        ready = {name: (job.status.ready or 0) + (job.status.succeeded or 0) >= _parallelism(job)
                 for name, job in existing.items()}
        for wanted in child_jobs(jobset, ready):
            name = wanted["metadata"]["name"]
            current = existing.get(name)
            if current is None:
                self._create(lambda w=wanted: self.batch.create_namespaced_job(meta["namespace"], w))
            elif bool(current.spec.suspend) != bool(wanted["spec"]["suspend"]):
                self._ignore_conflict(lambda n=name, w=wanted: self.batch.patch_namespaced_job(
                    n, meta["namespace"], {"spec": {"suspend": w["spec"]["suspend"]}}))

    def _reconcile_lws(self, lws: Mapping[str, Any]) -> None:
        meta, spec = lws["metadata"], lws.get("spec") or {}
        if meta.get("deletionTimestamp"):
            return
        namespace = meta["namespace"]
        leader = leader_statefulset(lws)
        self._create(lambda: self.apps.create_namespaced_stateful_set(namespace, leader))
        current = self.apps.read_namespaced_stateful_set(meta["name"], namespace)
        if current.spec.replicas != leader["spec"]["replicas"]:  # scaled: as many replica groups as asked
            self._ignore_conflict(lambda: self.apps.patch_namespaced_stateful_set(
                meta["name"], namespace, {"spec": {"replicas": leader["spec"]["replicas"]}}))
        leaders = self.core.list_namespaced_pod(
            namespace, label_selector=f"{LWS_LABELS}/name={meta['name']},{LWS_LABELS}/worker-index=0").items
        wait_ready = spec.get("startupPolicy") == "LeaderReady"
        for pod in leaders:
            index = (pod.metadata.labels or {}).get("apps.kubernetes.io/pod-index")
            if index is None or pod.metadata.deletion_timestamp:
                continue
            manifest = self.api_client.sanitize_for_serialization(pod)
            manifest.setdefault("apiVersion", "v1")
            manifest.setdefault("kind", "Pod")
            if wait_ready and not _ready(manifest):
                continue
            workers = worker_statefulset(lws, manifest, int(index))
            if workers["spec"]["replicas"] > 0:
                self._create(lambda w=workers: self.apps.create_namespaced_stateful_set(namespace, w))

    @staticmethod
    def _create(call: Any) -> None:
        try:
            call()
        except ApiException as err:
            if err.status != 409:
                raise

    @staticmethod
    def _ignore_conflict(call: Any) -> None:
        try:
            call()
        except ApiException as err:
            if err.status not in (404, 409):
                raise


def _parallelism(job: Any) -> int:
    parallelism = job.spec.parallelism if job.spec.parallelism is not None else 1
    if job.spec.completions is not None:
        parallelism = min(parallelism, job.spec.completions)
    return max(parallelism, 1)
