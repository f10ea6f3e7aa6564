"""Every write the admission loop makes: PodGroup objects and status, gate removal, queue status, Events.

Writes return the object the API answered with and hand it to the cache (`assume`), so the next
cycle sees its own decisions even before the watch delivers them. Every write goes through the fence
(`leader.FencedClient`): none is sent once the term of leadership is over. The consequential ones also
carry the epoch they were decided under, which draq's webhook checks against the Lease when the
API server receives them (so a leader paused between the check and the send is refused too): PodGroup
status in `status.epoch`, and releases, evictions, suspensions and resumptions in the annotation
`draq.io/epoch` of the pod or Job, set in the same patch. A pod is evicted by stamping it, then
deleting it only at the resourceVersion the stamp produced. Without leader election the annotation is
removed instead, so one left by an earlier leader is not checked.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from admission.core.cycle import condition_patch, pinned_affinity
from admission.core.labels import API_VERSION, EPOCH_ANNOTATION, GATE, MANAGED_BY, MANAGED_BY_LABEL
from admission.core.leadership import fenced_status
from admission.core.models import ObjectRef
from admission.core.native_gangs import GangApi, gang_name, gang_object
from admission.core.quota import SEAL_FIELD, SealCheck, check_seal, merged_status, seal_record
from admission.core.workloads import BY_KIND
from admission.kube import kinds
from admission.kube.client import Client, KubeApiError
from admission.kube.clock import SYSTEM_CLOCK, Clock, timestamp
from admission.operator.cache import OperatorCache
from admission.operator.events import EventBook, EventKey, Posted
from admission.operator.leader import NO_FENCE, Fence, FencedClient

log = logging.getLogger(__name__)
COMPONENT = "draq-operator"
PIN_REFUSED = "PinRefused"


class Writer:
    def __init__(self, api: Client, cache: OperatorCache, clock: Clock = SYSTEM_CLOCK, fence: Fence = NO_FENCE) -> None:
        self.fence = fence
        self.api: Client = FencedClient(api, fence)
        self.cache = cache
        self.clock = clock
        self._refused_pins: set[tuple[str, str]] = set()  # (pod uid, node) whose refusal has an Event
        self.events = EventBook()
        self.seal_key: bytes | None = None  # the record seal's key, loaded by the operator before its first pass
        self.gang_api: GangApi | None = None  # the served gang API (`native_gangs.chosen`), found at start
        self.adopting = False  # the first start with a new key: records it cannot verify are sealed as they are
        self.untraceable: Collection[str] = ()  # uids of the PodGroups whose record the reader found untraceable

    def now(self) -> str:
        return timestamp(self.clock.now())

    # ----- PodGroup ---------------------------------------------------------------------------------
    async def ensure_pod_group(self, namespace: str, name: str, min_member: int, queue: str) -> dict[str, Any]:
        """Create the PodGroup of a label-defined group (or read it, when another writer was first)."""
        body = {"apiVersion": API_VERSION, "kind": "PodGroup",
                "metadata": {"name": name, "namespace": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
                "spec": {"minMember": min_member, "queue": queue}}
        try:
            created = await self.api.create(kinds.POD_GROUPS.collection_path(namespace), body)
        except KubeApiError as err:
            if err.status != 409:
                raise
            created = await self.api.get(kinds.POD_GROUPS.object_path(namespace, name))
        self.cache.assume("PodGroup", created)
        return created

    async def pod_group_status(self, namespace: str, name: str, status: Mapping[str, Any],
                               resource_version: str | None = None) -> dict[str, Any]:
        """Merge `status` into the PodGroup's status; with `resource_version`, only if unchanged since."""
        fenced = fenced_status(status, self.fence.current_epoch())
        body: dict[str, Any] = {"status": self._sealed(namespace, name, fenced)}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        written = await self.api.merge_patch(kinds.POD_GROUPS.object_path(namespace, name, "status"), body)
        self.cache.assume("PodGroup", written)
        return written

    def _sealed(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """`status` with the seal of the record it makes, merged over the record the cache holds, when that
        record is draq's own; over a record draq cannot trace nothing is sealed, so it stays untraceable."""
        if self.seal_key is None:
            return status
        base = self.cache.current("PodGroup", (namespace, name)) or {}
        uid = str((base.get("metadata") or {}).get("uid") or "")
        current = base.get("status") or {}
        check = check_seal(self.seal_key, uid, current)
        if not uid or uid in self.untraceable or (
                check in (SealCheck.UNSEALED, SealCheck.BROKEN) and not self.adopting):
            return status
        return {**status, SEAL_FIELD: seal_record(self.seal_key, uid, merged_status(current, status))}

    # ----- pods -------------------------------------------------------------------------------------
    async def ungate(self, namespace: str, name: str, cached: Mapping[str, Any] | None,
                     node: str | None = None) -> bool:
        """Release a member: remove draq's gate and, with `node`, pin the pod to it in the same patch
        (`pinned_affinity`). The `test` op makes a concurrent change of the gates fail the patch instead
        of being overwritten. False when the pod is gone or no longer gated, or when the API refuses the pin
        (the member then stays gated; the refusal is logged and reported once by a `PinRefused` Event)."""
        pod = cached
        path = kinds.PODS.object_path(namespace, name)
        pin = node
        for _ in range(4):
            if pod is None:
                try:
                    pod = await self.api.get(path)
                except KubeApiError as err:
                    if err.status == 404:
                        return False
                    raise
            spec = pod.get("spec") or {}
            gates = [g.get("name") for g in spec.get("schedulingGates") or []]
            if GATE not in gates:
                return False
            index = gates.index(GATE)
            patch: list[dict[str, Any]] = [
                {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": GATE}, *self._stamp_ops(pod)]
            if pin is not None:
                pinned = pinned_affinity(spec.get("affinity"), pin)
                patch.append({"op": "add", "path": "/spec/affinity", "value": pinned})
            patch.append({"op": "remove", "path": f"/spec/schedulingGates/{index}"})
            try:
                written = await self.api.json_patch(path, patch)
            except KubeApiError as err:
                if err.status not in (409, 422):
                    raise
                pod = await self._reread(path)
                if pod is None:
                    return False
                still = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
                if err.status == 422 and pin is not None and still == gates and not self._stamp_moved(patch, pod):
                    # The gates did not change, so the API refused the pin itself. Released unpinned, the
                    # member could be bound elsewhere than planned (on devices another group was promised):
                    # it stays gated, the refusal is reported, and the next pass tries again; a group that
                    # never gets bound is evicted when its bind timeout is over.
                    await self._pin_refused(pod, pin, err)
                    return False
                continue
            self.cache.assume("Pod", written)
            return True
        raise KubeApiError("PATCH", f"pod {namespace}/{name}", 409, "scheduling gates kept changing")

    async def pod_condition(self, pod: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
        """Set draq's condition on a member through pods/status, only when the pod says something else
        (`condition_patch`). Conditions that moved meanwhile (the scheduler's) are read again once; a pod
        gone is left alone: False."""
        meta = pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        path = kinds.PODS.object_path(namespace, name, "status")
        current: Mapping[str, Any] | None = pod
        for _ in range(2):
            if current is None:
                return False
            operations = condition_patch(current, wanted)
            if not operations:
                return False
            try:
                written = await self.api.json_patch(path, operations)
            except KubeApiError as err:
                if err.status not in (404, 409, 422):
                    raise
                log.debug("condition of pod %s/%s not written: %s", meta.get("namespace"), meta.get("name"), err)
                current = None if err.status == 404 else await self._reread(kinds.PODS.object_path(namespace, name))
                continue
            self.cache.assume("Pod", written)
            return True
        return False

    async def _pin_refused(self, pod: Mapping[str, Any], node: str, err: KubeApiError) -> None:
        """Log every refusal; a Warning Event on the pod once per (pod, node)."""
        meta = pod.get("metadata") or {}
        namespace, name = meta.get("namespace"), meta.get("name")
        log.warning("pod %s/%s: pinning to node %s refused (%s); the member stays gated", namespace, name, node, err)
        said = (str(meta.get("uid") or f"{namespace}/{name}"), node)
        if said in self._refused_pins:
            return
        self._refused_pins.add(said)
        await self.event(pod, PIN_REFUSED, f"pinning to planned node {node} was refused ({err}); the member stays "
                         "gated and is released when the pin is accepted; if the group is not bound within its bind "
                         "timeout it is evicted", warning=True)

    async def ensure_gang(self, gang: GangApi, namespace: str, group: str, min_member: int) -> None:
        """Create the native gang (Workload or PodGroup) of a group whose pods reference it; one that exists
        is kept."""
        try:
            await self.api.create(kinds.gang_resource(gang).collection_path(namespace),
                                  gang_object(gang, namespace, group, min_member))
        except KubeApiError as err:
            if err.status != 409:
                raise

    async def remove_gang(self, gang: GangApi, namespace: str, group: str) -> None:
        """Delete a group's native gang (Workload or PodGroup) before its members are removed; one already
        gone is fine.

        kube-scheduler 1.35's gang plugin keeps a member deleted while it waits at Permit in its list of
        unscheduled members, and dereferences it when another member of the gang reaches Permit (the
        scheduler exits). Without the Workload that member's Permit stops before that list is read."""
        try:
            await self.api.delete(kinds.gang_resource(gang).object_path(namespace, gang_name(group)))
        except KubeApiError as err:
            if err.status != 404:
                raise

    async def delete_pod(self, namespace: str, name: str) -> bool:
        """Delete a member of an evicted group; False when it was already gone. The pod is stamped with
        the epoch first, and deleted only at the version the stamp produced: the webhook checks the
        stamp of the pod being deleted, so a deletion sent after the term ended is refused."""
        path = kinds.PODS.object_path(namespace, name)
        for _ in range(4):
            try:
                stamped = await self.api.merge_patch(path, self._stamp_patch())
                version = str((stamped.get("metadata") or {}).get("resourceVersion") or "")
                await self.api.delete(path, version or None)
            except KubeApiError as err:
                if err.status == 404:
                    return False
                if err.status == 409:
                    continue  # changed between the stamp and the deletion (its kubelet, say): again
                raise
            return True
        raise KubeApiError("DELETE", f"pod {namespace}/{name}", 409, "the pod kept changing between stamp and deletion")

    # ----- the epoch on pods and Jobs ---------------------------------------------------------------
    def _stamp(self) -> str | None:
        """The annotation's value for a write now: the epoch of this term, None without leader election.
        Raises `LeadershipLost` outside a term."""
        epoch = self.fence.current_epoch()
        return epoch.to_annotation() if epoch is not None else None

    def _stamp_patch(self) -> dict[str, Any]:
        return {"metadata": {"annotations": {EPOCH_ANNOTATION: self._stamp()}}}

    def _stamp_ops(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        """JSON-patch operations that set the annotation (or remove one left behind, without an epoch)."""
        stamp = self._stamp()
        annotations = (obj.get("metadata") or {}).get("annotations")
        key_path = "/metadata/annotations/" + EPOCH_ANNOTATION.replace("~", "~0").replace("/", "~1")
        if stamp is None:
            return [{"op": "remove", "path": key_path}] if annotations and EPOCH_ANNOTATION in annotations else []
        if annotations:
            return [{"op": "add", "path": key_path, "value": stamp}]
        return [{"op": "add", "path": "/metadata/annotations", "value": {EPOCH_ANNOTATION: stamp}}]

    @staticmethod
    def _stamp_moved(patch: list[dict[str, Any]], pod: Mapping[str, Any]) -> bool:
        """A stamping operation that no longer applies to the pod as it is now (its annotations changed)."""
        annotations = (pod.get("metadata") or {}).get("annotations")
        for op in patch:
            if op["path"] == "/metadata/annotations" and annotations:
                return True
            if op["op"] == "remove" and op["path"].startswith("/metadata/annotations/") and (
                    not annotations or EPOCH_ANNOTATION not in annotations):
                return True
        return False

    async def suspend(self, owner: ObjectRef, suspend: bool) -> bool:
        """Suspend a workload by its kind's suspend field (its controller removes the running pods without
        counting failures) or resume it, stamped with the epoch in the same patch; False when it is gone."""
        kind = BY_KIND[owner.kind]
        try:
            await self.api.merge_patch(kinds.WORKLOAD_KINDS[owner.kind].object_path(owner.namespace, owner.name),
                                       {**self._stamp_patch(), **kind.suspend_patch(suspend)})
        except KubeApiError as err:
            if err.status == 404:
                return False
            raise
        return True

    async def _reread(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.api.get(path)
        except KubeApiError as err:
            if err.status == 404:
                return None
            raise

    # ----- queues -----------------------------------------------------------------------------------
    async def cluster_queue_status(self, name: str, status: Mapping[str, Any]) -> None:
        await self.api.merge_patch(kinds.CLUSTER_QUEUES.object_path(None, name, "status"),
                                   {"status": dict(status)})

    async def local_queue_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        await self.api.merge_patch(kinds.LOCAL_QUEUES.object_path(namespace, name, "status"),
                                   {"status": dict(status)})

    async def quota_unit_status(self, name: str, status: Mapping[str, Any]) -> None:
        await self.api.merge_patch(kinds.QUOTA_UNITS.object_path(None, name, "status"), {"status": dict(status)})

    # ----- events -----------------------------------------------------------------------------------
    async def event(self, involved: Mapping[str, Any], reason: str, message: str, warning: bool = False) -> None:
        """Post an Event, or update the one this object already has for `reason` (`events.EventBook`)."""
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        key = (namespace, str(involved.get("kind")), str(meta.get("name")), str(meta.get("uid")), reason)
        now, stamp = self.clock.monotonic(), self.now()
        try:
            posted = self.events.posted(key)
            if posted is not None:
                if self.events.due(posted, now):
                    await self._update_event(key, posted, namespace, message, stamp, now)
                return
            if not self.events.may_create(namespace, now):
                log.debug("event %s for %s/%s skipped: too many new Events in the namespace", reason, namespace,
                          meta.get("name"))
                return
            await self._create_event(key, involved, namespace, reason, message, warning, stamp, now)
        except KubeApiError as err:  # an Event is a courtesy: never fail a cycle for it
            log.warning("event %s for %s/%s: %s", reason, namespace, meta.get("name"), err)

    async def _create_event(self, key: EventKey, involved: Mapping[str, Any], namespace: str, reason: str,
                            message: str, warning: bool, stamp: str, now: float) -> None:
        meta = involved.get("metadata") or {}
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
                "involvedObject": {"apiVersion": involved.get("apiVersion"), "kind": involved.get("kind"),
                                   "name": meta.get("name"), "namespace": namespace, "uid": meta.get("uid"),
                                   "resourceVersion": meta.get("resourceVersion")},
                "reason": reason, "message": message[:1024], "type": "Warning" if warning else "Normal",
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
                "source": {"component": COMPONENT}, "reportingComponent": COMPONENT}
        created = await self.api.create(kinds.EVENTS.collection_path(namespace), body)
        name = (created.get("metadata") or {}).get("name")
        if isinstance(name, str) and name:
            self.events.remember(key, Posted(name, 1, stamp, now))

    async def _update_event(self, key: EventKey, posted: Posted, namespace: str, message: str, stamp: str,
                            now: float) -> None:
        count = posted.count + posted.unsent + 1
        try:
            await self.api.merge_patch(kinds.EVENTS.object_path(namespace, posted.name),
                                       {"count": count, "lastTimestamp": stamp, "message": message[:1024]})
        except KubeApiError as err:
            if err.status == 404:  # expired (the API server keeps Events an hour): the next one is new
                self.events.forget(key)
                return
            raise
        posted.count, posted.unsent, posted.written = count, 0, now
