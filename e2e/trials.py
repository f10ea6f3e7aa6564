"""Run generated scenarios on the real control plane and read back the scheduler's verdicts."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.scenarios import Trial

GROUP, VERSION = "resource.k8s.io", "v1"


@dataclass(frozen=True)
class Verdict:
    outcome: str  # "bound", "unschedulable", "error" (any other scheduler failure) or "pending"
    message: str = ""


def create_cluster_objects(api: client.ApiClient, manifests: list[dict[str, Any]]) -> None:
    custom = client.CustomObjectsApi(api)
    for manifest in manifests:
        plural = {"DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices"}[manifest["kind"]]
        try:
            custom.create_cluster_custom_object(GROUP, VERSION, plural, manifest)
        except ApiException as err:
            if err.status != 409:
                raise


def submit(api: client.ApiClient, namespace: str, trial: Trial) -> None:
    """Create the trial's held claims (with their allocation), node, slices, and finally the pod.

    The held claims come first: a binding is final, so the scheduler must not see the node and its
    devices before the claims that hold some of them (its caches of each kind fill independently).
    """
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    for held in trial.in_use:
        body = {k: v for k, v in held.items() if k != "status"}
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", body)
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, "resourceclaims",
                                                     held["metadata"]["name"], {"status": held["status"]})
    node = {k: v for k, v in trial.node.items() if k != "status"}
    core.create_node(node)
    core.patch_node_status(trial.node_name, {"status": trial.node["status"]})
    create_cluster_objects(api, trial.slices)
    for claim in trial.claims:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim)
    core.create_namespaced_pod(namespace, trial.pod)


NODE_SELECTOR_MISMATCH = "didn't match Pod's node affinity/selector"


def verdict_of(pod: Any) -> Verdict:
    if pod.spec.node_name:
        return Verdict("bound")
    for condition in pod.status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "False" and condition.reason:
            if condition.reason == "Unschedulable":
                if _node_not_seen(condition.message or ""):
                    return Verdict("pending", "the scheduler does not know the trial's node yet")
                return Verdict("unschedulable", condition.message or "")
            if condition.reason != "SchedulingGated":
                return Verdict("error", f"{condition.reason}: {condition.message}")
    return Verdict("pending")


# "0/16 nodes are available: 1 cannot allocate all claims, 15 node(s) didn't match Pod's node
# affinity/selector. still not schedulable, preemption: ...": the reasons end at the first ". ".
_REASONS = re.compile(r"nodes are available: (.*?)\.(?: |$)")


def _node_not_seen(message: str) -> bool:
    """True when every node failed the pod's node selector ("0/N nodes are available: N node(s) didn't
    match Pod's node affinity/selector."): the scheduler's cache did not hold the trial's node yet."""
    found = _REASONS.search(message)
    return found is not None and all(NODE_SELECTOR_MISMATCH in r for r in found.group(1).split(", "))


# How long an "unschedulable" or "error" answer must hold before it counts as the scheduler's verdict.
SETTLE_SECONDS = 3.0


def await_verdicts(api: client.ApiClient, namespace: str, pods: list[str], timeout: float = 60,
                   settle: float = SETTLE_SECONDS, busy: Callable[[str], bool] = lambda pod: False,
                   progress: Callable[[], float] = lambda: 0.0,
                   settled: Callable[[str], None] = lambda pod: None) -> dict[str, Verdict]:
    """The scheduler's final verdict on each pod.

    Binding is final. "unschedulable" and "error" are not: the scheduler may answer before its caches
    hold the trial's node, slices or claims, and tries again when they arrive (after a back-off of
    about a second). So those count once the same outcome has held for `settle` seconds; taking the
    first answer seen would compare draq with a state the scheduler was about to leave. The wait ends
    `timeout` seconds after the last new verdict (a loaded machine slows the scheduler down, it does
    not stop it), or after the last step `progress` reports (the monotonic time a driver last attached a
    device): a pod for which `busy` is true is still being bound (the scheduler waits in PreBind for
    binding conditions, for seconds, and after a failed attach allocates again), whatever its condition
    says of an earlier attempt, and the wait for it lasts as long as the driver keeps answering.
    `settled` is called with each pod whose "unschedulable" or "error" verdict has just settled.
    """
    core = client.CoreV1Api(api)
    verdicts: dict[str, Verdict] = {}
    seen: dict[str, tuple[Verdict, float]] = {}  # not yet final: the current answer and since when
    wanted = set(pods)
    deadline = time.monotonic() + timeout
    while time.monotonic() < max(deadline, progress() + timeout):
        now = time.monotonic()
        for pod in core.list_namespaced_pod(namespace).items:
            name = pod.metadata.name
            if name not in wanted or name in verdicts:
                continue
            verdict = verdict_of(pod)
            if verdict.outcome == "bound":
                verdicts[name] = verdict
                deadline = now + timeout
            elif verdict.outcome == "pending" or busy(name):
                seen.pop(name, None)
            else:
                previous = seen.get(name)
                since = previous[1] if previous and previous[0].outcome == verdict.outcome else now
                seen[name] = (verdict, since)
                if now - since >= settle:
                    verdicts[name] = verdict
                    deadline = now + timeout
                    settled(name)
        if len(verdicts) == len(pods):
            break
        time.sleep(0.2)
    return {name: verdicts.get(name) or _unsettled(seen.get(name), busy(name)) for name in pods}


def _unsettled(last: tuple[Verdict, float] | None, binding: bool) -> Verdict:
    if binding:
        return Verdict("pending", "the scheduler was still binding it (waiting for binding conditions)")
    if last is None:
        return Verdict("pending", "no verdict before the timeout")
    return Verdict("pending", f"no settled verdict before the timeout; last answer: {last[0].outcome} "
                              f"({last[0].message})")


def allocated_results(api: client.ApiClient, namespace: str, claims: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The results of each claim's allocation as the scheduler wrote it (none if it is not allocated)."""
    custom = client.CustomObjectsApi(api)
    found = {}
    for name in claims:
        claim: Any = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", name)
        found[name] = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return found


def remove_pods(api: client.ApiClient, namespace: str, pods: list[str]) -> None:
    """Delete judged pods: an unschedulable or failing pod is otherwise tried again and again, and a pod
    whose allocation runs into the scheduler's filter timeout holds the scheduling loop for that long on
    every attempt, delaying the other pods."""
    core = client.CoreV1Api(api)
    for name in pods:
        try:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except ApiException as err:
            if err.status != 404:
                raise


def claim_states(api: client.ApiClient, namespace: str, pod: str) -> str:
    """For a pod without a verdict: its scheduling condition and, per claim it uses (its own and the one the
    scheduler made for extended resources), the allocated devices with binding conditions, whom the claim
    is reserved for, and the conditions written in `status.devices`."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    stored: Any = core.read_namespaced_pod(pod, namespace)
    scheduled = [f"{c.status}/{c.reason}: {c.message}" for c in stored.status.conditions or []
                 if c.type == "PodScheduled"]
    names = [c.resource_claim_name for c in stored.spec.resource_claims or [] if c.resource_claim_name]
    extended = stored.status.extended_resource_claim_status
    names += [extended.resource_claim_name] if extended else []
    lines = [f"{pod}: PodScheduled {scheduled or 'not set'}"]
    for name in names:
        try:
            claim: Any = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", name)
        except ApiException as err:
            lines.append(f"  claim {name}: {err.reason}")
            continue
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        attach = [f"{r['pool']}/{r['device']}" for r in results if r.get("bindingConditions")]
        conditions = {f"{d['pool']}/{d['device']}": [f"{c['type']}={c['status']}" for c in d.get("conditions") or []]
                      for d in status.get("devices") or []}
        reserved = [r.get("name") for r in status.get("reservedFor") or []]
        lines.append(f"  claim {name} (resourceVersion {claim['metadata']['resourceVersion']}): "
                     f"{'allocated' if results else 'not allocated'}, with binding conditions {attach}, "
                     f"reserved for {reserved}, device conditions {conditions}")
    return "\n".join(lines)


def stored_objects(api: client.ApiClient, namespace: str, trial: Trial) -> list[dict[str, Any]]:
    """The trial's objects as the API server stored them (fields of disabled features dropped)."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    node = api.sanitize_for_serialization(core.read_node(trial.node_name))
    node.setdefault("apiVersion", "v1")
    node.setdefault("kind", "Node")
    slices = custom.list_cluster_custom_object(
        GROUP, VERSION, "resourceslices", field_selector=f"spec.nodeName={trial.node_name}")["items"]
    names = [c["metadata"]["name"] for c in trial.in_use]
    claims = [custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", n) for n in names]
    classes = custom.list_cluster_custom_object(GROUP, VERSION, "deviceclasses")["items"]
    for obj in slices + claims + classes:
        obj.setdefault("apiVersion", f"{GROUP}/{VERSION}")
    for obj, kind in [(s, "ResourceSlice") for s in slices] + [(c, "ResourceClaim") for c in claims] + \
            [(c, "DeviceClass") for c in classes]:
        obj.setdefault("kind", kind)
    pending = [custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", c["metadata"]["name"])
               for c in trial.claims]
    for claim in pending:
        claim.setdefault("kind", "ResourceClaim")
        claim.setdefault("apiVersion", f"{GROUP}/{VERSION}")
        claim.pop("status", None)  # the scheduler may have allocated it by now: ask about the spec only
    return [node, *classes, *slices, *claims, *pending]
