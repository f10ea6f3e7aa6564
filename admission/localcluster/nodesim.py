"""Simulated GPU nodes for a real control plane.

It does what a kubelet and a DRA driver would do for nodes that have no machine behind them:
creates Nodes (Ready, with capacity), publishes ResourceSlices for a GPU profile, marks bound pods
Running, completes them when asked (or after the `sim.draq.io/run-seconds` annotation), and
finalizes deletions so claims are released. The API server and the scheduler stay real.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from admission.core.simulate import (
    PROFILES,
    RACK_PROFILES,
    GpuProfile,
    Location,
    RackProfile,
    device_classes,
    node_manifest,
    rack_nodes,
    resource_slices,
)

RUN_SECONDS_ANNOTATION = "sim.draq.io/run-seconds"
log = logging.getLogger("draq.nodesim")


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NodeSimulator:
    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.nodes: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._timers: list[threading.Timer] = []
        self._timed: set[str] = set()  # uids of pods whose end is scheduled
        self._started: set[str] = set()  # uids of pods this simulator has started
        self._lock = threading.Lock()

    # ----- inventory ---------------------------------------------------------------------------------
    def apply_device_classes(self) -> None:
        for klass in device_classes():
            self._create_or_replace_cluster_object("deviceclasses", klass)

    def add_node(self, name: str, profile: str | GpuProfile, *, partitions: bool = False,
                 device_plugin: bool = False, location: Location | None = None) -> None:
        gpu = PROFILES[profile] if isinstance(profile, str) else profile
        manifest = node_manifest(gpu, name, device_plugin=device_plugin, location=location)
        status = manifest.pop("status")
        try:
            self.core.create_node(manifest)
        except ApiException as err:
            if err.status != 409:
                raise
        self.core.patch_node_status(name, {"status": status})
        for rs in resource_slices(gpu, name, partitions=partitions, location=location):
            self._create_or_replace_cluster_object("resourceslices", rs)
        with self._lock:
            self.nodes.add(name)

    def add_rack(self, name: str, rack: str | RackProfile, *, block: str | None = None,
                 partitions: bool = False) -> list[str]:
        """The nodes of one rack (`nvl72`: 18 x 4 GPUs in one NVLink clique; `h100`: 4 x 8 GPUs), named
        `<name>-<n>` and labelled with the rack `name` and `block`; returns the node names."""
        profile = RACK_PROFILES[rack] if isinstance(rack, str) else rack
        members = rack_nodes(profile, name, block)
        for node in members:
            self.add_node(node.name, node.profile, partitions=partitions, location=node.location)
        return [node.name for node in members]

    def add_plain_node(self, name: str, labels: dict[str, str] | None = None, cpu: str = "32",
                       memory: str = "128Gi") -> None:
        """A node without devices (its slices, if any, are published by the caller)."""
        meta = {"name": name, "labels": {"kubernetes.io/hostname": name, "draq.io/simulated": "true", **(labels or {})}}
        try:
            self.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": meta})
        except ApiException as err:
            if err.status != 409:
                raise
        capacity = {"cpu": cpu, "memory": memory, "pods": "110"}
        self.core.patch_node_status(name, {"status": {
            "capacity": capacity, "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "simulated"}]}})
        with self._lock:
            self.nodes.add(name)

    def adopt(self, names: Iterable[str]) -> None:
        with self._lock:
            self.nodes.update(names)

    def _create_or_replace_cluster_object(self, plural: str, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        try:
            self.custom.create_cluster_custom_object("resource.k8s.io", "v1", plural, body)
        except ApiException as err:
            if err.status != 409:
                raise
            current = self.custom.get_cluster_custom_object("resource.k8s.io", "v1", plural, name)
            body = {**body, "metadata": {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
            self.custom.replace_cluster_custom_object("resource.k8s.io", "v1", plural, name, body)

    # ----- the kubelet part ---------------------------------------------------------------------------
    def start(self) -> NodeSimulator:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="nodesim", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for timer in self._timers:
            timer.cancel()
        if self._thread:
            self._thread.join(timeout=10)

    def __enter__(self) -> NodeSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def complete(self, namespace: str, name: str, succeeded: bool = True) -> None:
        """Finish a running pod as its containers would, releasing its template claims."""
        phase = "Succeeded" if succeeded else "Failed"
        reason = "Completed" if succeeded else "Error"
        pod = self.core.read_namespaced_pod(name, namespace)
        statuses = [{"name": c.name, "ready": False, "restartCount": 0, "image": c.image or "sim",
                     "imageID": "", "state": {"terminated": {"exitCode": 0 if succeeded else 1, "reason": reason,
                                                              "startedAt": _now(), "finishedAt": _now()}}}
                    for c in pod.spec.containers]
        self.core.patch_namespaced_pod_status(name, namespace, {"status": {
            "phase": phase, "containerStatuses": statuses,
            "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted"}]}})

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._sync_and_watch()
            except Exception as err:
                if not self._stop.is_set():
                    log.warning("node simulator watch failed, retrying: %s", err)
                    time.sleep(0.5)

    def _sync_and_watch(self) -> None:
        listing = self.core.list_pod_for_all_namespaces()
        for pod in listing.items:
            self._handle(pod)
        stream = watch.Watch()
        for event in stream.stream(self.core.list_pod_for_all_namespaces,
                                   resource_version=listing.metadata.resource_version, timeout_seconds=5):
            if self._stop.is_set():
                stream.stop()
                return
            if event["type"] in ("ADDED", "MODIFIED"):
                self._handle(event["object"])

    def _handle(self, pod: Any) -> None:
        node = pod.spec.node_name
        with self._lock:
            ours = node in self.nodes
        if not ours:
            return
        namespace, name = pod.metadata.namespace, pod.metadata.name
        with contextlib.suppress(ApiException):
            if pod.metadata.deletion_timestamp is not None:
                self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
            elif pod.status.phase == "Pending":
                self._mark_running(pod)
            elif pod.status.phase == "Running":
                # the Running patch may have been applied by an API server that crashed before answering
                self._schedule_end(pod)

    def _mark_running(self, pod: Any) -> None:
        """Start a pod once, and only while the API server still has it Pending: the watch can deliver an
        older Pending version of a pod after its run time ended, and a kubelet never takes a finished pod
        back to Running (it would hold no claim: its claims were released when it finished)."""
        namespace, name = pod.metadata.namespace, pod.metadata.name
        with self._lock:
            if pod.metadata.uid in self._started:
                return
            self._started.add(pod.metadata.uid)
        statuses = [{"name": c.name, "ready": True, "restartCount": 0, "image": c.image or "sim", "imageID": "",
                     "started": True, "state": {"running": {"startedAt": _now()}}} for c in pod.spec.containers]
        conditions = [{"type": t, "status": "True", "lastTransitionTime": _now()}
                      for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
        try:
            self.core.patch_namespaced_pod_status(name, namespace, [
                {"op": "test", "path": "/status/phase", "value": "Pending"},
                {"op": "replace", "path": "/status/phase", "value": "Running"},
                {"op": "add", "path": "/status/startTime", "value": _now()},
                {"op": "add", "path": "/status/hostIP", "value": "127.0.0.1"},
                {"op": "add", "path": "/status/podIP", "value": "127.0.0.1"},
                {"op": "add", "path": "/status/containerStatuses", "value": statuses},
                {"op": "add", "path": "/status/conditions", "value": conditions}])
        except Exception as err:
            if isinstance(err, ApiException) and err.status == 422:
                return  # the pod is no longer Pending: another version of it was started
            with self._lock:
                self._started.discard(pod.metadata.uid)  # not applied (the API server may be away): retried
            raise
        self._schedule_end(pod)

    def _schedule_end(self, pod: Any) -> None:
        """Complete the pod after its declared run time, once per pod."""
        seconds = (pod.metadata.annotations or {}).get(RUN_SECONDS_ANNOTATION)
        with self._lock:
            if not seconds or pod.metadata.uid in self._timed:
                return
            self._timed.add(pod.metadata.uid)
        with contextlib.suppress(ValueError):
            timer = threading.Timer(float(seconds), self._complete_quietly,
                                    (pod.metadata.namespace, pod.metadata.name))
            timer.daemon = True
            timer.start()
            self._timers.append(timer)

    def _complete_quietly(self, namespace: str, name: str) -> None:
        """Complete a pod whose run time is over; while the API server is away (restarted, etcd frozen),
        try again, as a kubelet would report the pod's end once it can."""
        deadline = time.monotonic() + 120
        while not self._stop.is_set():
            try:
                self.complete(namespace, name)
                return
            except ApiException as err:
                if err.status == 404 or time.monotonic() > deadline:
                    return
            except Exception as err:  # connection refused or reset: the API server is away
                if time.monotonic() > deadline:
                    log.warning("could not complete pod %s/%s: %s", namespace, name, err)
                    return
            time.sleep(0.5)
