"""Evicting groups that were admitted but not bound in time, and requeueing them.

The record comes first (PodGroup phase Evicted, charge and plan cleared, `requeueAt`), then the
members go: the top-most owner of each member that has a suspend field (a Job, JobSet, TrainJob, RayJob,
RayCluster, PyTorchJob or MPIJob: `core.workloads`) is suspended, its controller removes the pods without
counting failures, and draq resumes it once the backoff has passed, when the new pods are gated and queued
again; members no suspension covers are deleted, and their controller (a ReplicaSet, StatefulSet or
LeaderWorkerSet) recreates them gated. If another writer resumes a suspended owner before the backoff ends,
its new pods stay gated until then: draq does not suspend it again. A pass that finds an Evicted group with
members still running (not gated) finishes the eviction, so a crash in between loses nothing and charges
nothing twice.
"""

from __future__ import annotations

import datetime as dt
import logging

from admission.core.cycle import (
    PREEMPTED,
    GroupView,
    Preemptions,
    due_for_requeue,
    evicted_status,
    overdue,
    preempted_message,
    preempted_status,
    requeue,
    victims_of,
)
from admission.core.models import ObjectRef, Pod
from admission.core.native_gangs import GangApi, gang_api_of, gang_name, referenced_gang
from admission.core.quota import Phase
from admission.kube.client import KubeApiError
from admission.operator.reading import Reading
from admission.operator.writer import Writer

log = logging.getLogger(__name__)
TERMINATED = ("Succeeded", "Failed")


def _suspended_by(pod: Pod, reading: Reading, group: GroupView) -> ObjectRef | None:
    """The owner whose suspension removes this pod: its chain's top-most suspendable owner; without a
    chain read (its integration off), its controller when that is a Job."""
    member = reading.memberships.get(group.key, {}).get(pod.name)
    if member is not None:
        return member.suspend
    controller = pod.meta.controller
    return ObjectRef("Job", pod.namespace, controller[1]) if controller is not None and controller[0] == "Job" else None


def _targets(reading: Reading, group: GroupView) -> list[ObjectRef]:
    return sorted({ref for p in group.pods if (ref := _suspended_by(p, reading, group)) is not None}, key=str)


def _native_gang(reading: Reading, group: GroupView, served: GangApi | None) -> GangApi | None:
    """The API of the group's native gang, if its members name the one draq made for it."""
    wanted = gang_name(group.name)
    for pod in group.pods:
        manifest = dict(reading.pod_manifest(pod.namespace, pod.name) or {})
        if referenced_gang(manifest) == wanted:
            return gang_api_of(manifest, served)
    return None


def _still_running(group: GroupView) -> list[Pod]:
    return [p for p in group.pods if not p.scheduling_gates and p.phase not in TERMINATED]


class Evictor:
    def __init__(self, writer: Writer, default_timeout: int) -> None:
        self.writer = writer
        self.default_timeout = default_timeout

    async def evict_overdue(self, reading: Reading, now: dt.datetime) -> bool:
        queues = {q.name: q for q in reading.cluster_queues}
        groups = reading.by_key
        changed = False
        for evict in overdue(reading.groups_index.holding, queues, now, self.default_timeout):  # admitted only
            group = groups[evict.group]
            targets = _targets(reading, group)
            manifest = reading.manifests.get(group.ref) or {}
            version = str((manifest.get("metadata") or {}).get("resourceVersion") or "")
            try:
                written = await self.writer.pod_group_status(
                    group.namespace, group.name, evicted_status(evict, len(group.pods), now, targets), version)
            except KubeApiError as err:
                log.warning("evicting %s: %s; deciding again on the next pass", group.key, err)
                continue
            log.warning("evicted %s: %s", group.key, evict.message)
            await self.writer.event(written, "Evicted", evict.message, warning=True)
            await self._remove_members(reading, group, targets)
            changed = True
        return changed

    async def preempt(self, reading: Reading, plan: Preemptions, now: dt.datetime) -> bool:
        """Evict the victims of preemptions as overdue groups are evicted: the record first (phase Evicted,
        condition Preempted naming the preemptor, requeued at once), an Event, then the members."""
        changed = False
        for preempt, group in victims_of(plan, reading.cycle.groups):
            targets = _targets(reading, group)
            manifest = reading.manifests.get(group.ref) or {}
            version = str((manifest.get("metadata") or {}).get("resourceVersion") or "")
            try:
                written = await self.writer.pod_group_status(
                    group.namespace, group.name, preempted_status(preempt, group, now, targets), version)
            except KubeApiError as err:
                log.warning("preempting %s for %s: %s; deciding again on the next pass", group.key, preempt.group,
                            err)
                continue
            log.warning("preempted %s for %s", group.key, preempt.group)
            await self.writer.event(written, PREEMPTED, preempted_message(preempt, group), warning=True)
            await self._remove_members(reading, group, targets)
            changed = True
        return changed

    async def finish_evictions(self, reading: Reading) -> bool:
        """Evicted groups whose members are still there (a crash after the record): remove them now."""
        changed = False
        for group in reading.groups_index.evicted:
            pod_group = group.pod_group
            if pod_group is None or pod_group.phase is not Phase.EVICTED or not _still_running(group):
                continue
            log.info("finishing the eviction of %s", group.key)
            await self._remove_members(reading, group, list(pod_group.suspended))
            changed = True
        return changed

    async def resume_due(self, reading: Reading, now: dt.datetime) -> bool:
        """Resume the suspended owners of evicted groups whose backoff has passed; their new pods queue again.
        One another writer resumed earlier is left as it is: its new pods stayed gated through the backoff."""
        changed = False
        for group in due_for_requeue(reading.groups_index.evicted, now):
            resumed = requeue(group)
            for owner in resumed.objects:
                await self.writer.suspend(owner, False)
            written = await self.writer.pod_group_status(group.namespace, group.name, resumed.status)
            await self.writer.event(written, resumed.event.reason, resumed.event.message,
                                    warning=resumed.event.warning)
            changed = True
        return changed

    async def _remove_members(self, reading: Reading, group: GroupView, targets: list[ObjectRef]) -> None:
        """Suspend the targets (their controllers remove their pods); delete the members no target covers
        (their controllers, if any, recreate them, gated). A native gang's Workload or PodGroup goes first
        (see `Writer.remove_gang`); the group's next release creates it again."""
        gang = _native_gang(reading, group, self.writer.gang_api)
        if gang is not None:
            await self.writer.remove_gang(gang, group.namespace, group.name)
        for owner in targets:
            await self.writer.suspend(owner, True)
        for pod in _still_running(group) + [p for p in group.pods if p.scheduling_gates]:
            if _suspended_by(pod, reading, group) not in targets:
                await self.writer.delete_pod(group.namespace, pod.name)
