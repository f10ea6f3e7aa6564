"""The admission loop: after each burst of changes, finish interrupted releases, move admitted groups
through their phases, run one admission cycle and write its decisions, then the queues' status.

An admission is written on the PodGroup status first (phase Admitted, charge, plan, admittedAt) and
only then are the gates removed, member by member. A crash in between leaves a PodGroup recorded
Admitted with gated members; the next leader's first step is to remove those gates.

With leader election, cycles run only in a term of leadership: a new term starts by reading the
PodGroups afresh, and a cycle still running when the term ends is abandoned (the writer's fence sends
nothing after the renew deadline; `docs/operator.md`, "Leadership and fencing").

The cycle's pure decisions (`decide`) run in a worker thread: the webhooks and the probe port share this
event loop, and a cycle over a thousand pending groups takes about a second (`docs/operator.md`, "The
process: kopf").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from admission.core.cycle import (
    LATE_CONDITION,
    Admit,
    Changes,
    CycleInput,
    CycleResult,
    Extend,
    GroupDecision,
    GroupView,
    LateWait,
    Parking,
    Wait,
    WaitReason,
    admitted_condition,
    admitted_event,
    admitted_status,
    charge_corrected_event,
    charge_corrections,
    charging_inventory,
    current_condition,
    decide,
    extended_status,
    late_admitted_event,
    late_wait_event,
    next_phase,
    pending_counts,
    pending_status,
    phase_change,
    slots_given_up_event,
    unreleased_members,
    waiting_condition,
)
from admission.core.errors import DraqError
from admission.core.features import gates_for, modelled_release
from admission.core.native_gangs import gang_api_of, gang_name, referenced_gang
from admission.core.quota import (
    Amounts,
    Phase,
    QueueState,
    SealCheck,
    check_seal,
    cluster_queue_status,
    device_selected,
    local_queue_status,
)
from admission.core.workloads import enabled_kinds
from admission.kube import kinds
from admission.kube.client import Client, KubeApi, KubeApiError, load_credentials
from admission.kube.clock import SYSTEM_CLOCK, Clock
from admission.kube.discovery import served, served_gang_api
from admission.kube.listing import server_release
from admission.kube.watches import table
from admission.operator.cache import OperatorCache, owner_watches
from admission.operator.eviction import Evictor
from admission.operator.health import LoopHealth
from admission.operator.heap import HeapKeeper
from admission.operator.leader import NO_FENCE, LeaderElector, LeadershipLost, default_identity
from admission.operator.metrics import OperatorMetrics
from admission.operator.owners import OwnerNotices
from admission.operator.reading import CacheReader, Reading
from admission.operator.seal_key import load_seal_key
from admission.operator.settings import OperatorSettings
from admission.operator.unit_status import UnitStatusWriter
from admission.operator.writer import Writer

log = logging.getLogger(__name__)
T = TypeVar("T")

WRITE_CONCURRENCY = 16
"""Groups whose decisions are written at the same time (each group's own writes stay in order)."""
WAIT_WRITE_SECONDS = 2.0
"""How long a pass starts writing other groups' Waits: past it the rest is left to the next pass (admissions are
always written), so that a flood of new waiting groups on a slow API server does not make one pass last a
minute while a newcomer's pods wait for the next one."""

IDLE_SETTLE_SECONDS = 0.01
"""An idle operator's quiet time after the first change: long enough for the watch events of one request
(a pod and its claims), far shorter than the debounce a busy one keeps at most (`Operator._quiet_seconds`)."""

WAIT_DETAIL_SECONDS = 30.0
"""A waiting group's status is written again at once when the reason it waits for changes or the group
itself does (its pods, PodGroup, owner); when only the rest of the cluster moved its message (the best node,
a count of free devices, which every admission elsewhere can change), at most this often. Thousands of
abandoned groups are then not all rewritten each time another tenant's group is admitted."""


def _write_order(decision: GroupDecision) -> int:
    """Admissions and extensions first (0), every other decision after them (1)."""
    return 0 if isinstance(decision, (Admit, Extend)) else 1


def _in_write_order(decisions: tuple[GroupDecision, ...]) -> list[GroupDecision]:
    """Admissions and extensions first, the rest after them, each part in the cycle's order: what a stable sort
    by `_write_order` gives, without a key call per waiting group."""
    first = [d for d in decisions if isinstance(d, (Admit, Extend))]
    if not first:
        return list(decisions)
    return first + [d for d in decisions if not isinstance(d, (Admit, Extend))]


class Operator:
    def __init__(self, settings: OperatorSettings, api: Client | None = None, clock: Clock = SYSTEM_CLOCK,
                 registry: CollectorRegistry | None = None) -> None:
        self.settings = settings
        self.api: Client = api or KubeApi(load_credentials(settings.kubeconfig, settings.context))
        self.clock = clock
        self.cache = OperatorCache(self.api, clock)
        self.reader = CacheReader(self.cache, gates_for(settings.kubernetes_version, settings.feature_gates), clock)
        self.identity = settings.identity or default_identity()
        self.elector: LeaderElector | None = None
        if settings.leader_election:
            self.elector = LeaderElector(self.api, settings.lease_namespace, settings.lease_name, self.identity,
                                         settings.election_timing(), clock)
        self.writer = Writer(self.api, self.cache, clock, self.elector or NO_FENCE)
        self.evictor = Evictor(self.writer, settings.bind_timeout_seconds)
        self.owner_notices = OwnerNotices(self.writer)
        self.unit_status = UnitStatusWriter(self.cache, self.writer)
        self.gates = self.reader.gates
        self.cycles = 0
        self.cycle_seconds: list[float] = []
        self._said: dict[str, str] = {}  # group key -> last pending message written
        self._wait_written: dict[str, tuple[WaitReason, GroupView, float]] = {}  # -> reason, group, when written
        # The last pass's Waits whose message was already written, by identity: the cycle hands the same Wait
        # objects on for groups parked or behind their LocalQueue's budget, so those are passed over at once.
        self._said_waits: dict[int, GroupDecision] = {}
        self._queue_status: dict[str, Mapping[str, Any]] = {}
        # What the last charge reconciliation read when it found nothing to correct (`_correct_charges`).
        self._no_corrections: tuple[object, ...] = ()
        self._computing: asyncio.Task[Any] | None = None  # the last pass's worker thread
        # In `run`: a pass that ends with a change already waiting leaves the metrics' figures to a later one.
        self.defer_figures = False
        self._parking = Parking(safety_seconds=settings.park_safety_seconds)  # carried from pass to pass
        self._last_pass_end: float | None = None  # monotonic; `_quiet_seconds`
        self._last_pass_seconds = 0.0
        self.health = LoopHealth(clock)
        self.heap = HeapKeeper(clock)
        self.metrics = OperatorMetrics(registry or CollectorRegistry(),
                                       lambda: self.elector is None or self.elector.leading.is_set(), clock=clock)

    async def choose_release(self) -> None:
        """Model the API server's own release unless one was given; say what draq does not model."""
        if self.settings.kubernetes_version is None:
            release, notes = modelled_release(await server_release(self.api))
            self.gates = self.reader.gates = gates_for(release, self.settings.feature_gates)
            for note in notes:
                log.warning("%s", note)
        log.info("allocation modelled as Kubernetes %s", self.gates.version)
        for note in self.gates.unmodelled():
            log.warning("not modelled: %s", note)

    async def run(self) -> None:
        """Run until cancelled; on the way out the Lease is released, so another replica takes over at once.

        The election starts before the caches list: a replica that replaces a crashed leader starts
        counting the Lease's expiry at once, while it lists."""
        elector_task = asyncio.create_task(self.elector.run()) if self.elector else None
        term = 0
        self.defer_figures = True
        try:
            listing = self.clock.monotonic()
            await self.choose_release()
            await self.discover_gangs()
            await self.watch_owners()
            await self.cache.start()
            log.info("caches listed in %.1fs", self.clock.monotonic() - listing)
            while True:
                if self.elector is not None:
                    assert elector_task is not None
                    await self._until_leading(elector_task)
                    if self.elector.term != term:
                        if not await self._begin_term():
                            await self.clock.sleep(1.0)
                            continue
                        term = self.elector.term
                await self._wait_for_change()
                if self.elector is not None and not self.elector.may_write():
                    continue
                try:
                    started = self.clock.monotonic()
                    with self.health.running_pass():
                        await self._pass_in_term()
                    self._last_pass_end = self.clock.monotonic()
                    self._last_pass_seconds = self._last_pass_end - started
                    self.heap.after_pass()
                except LeadershipLost as err:
                    log.warning("admission cycle abandoned: %s", err)
                except (KubeApiError, OSError, TimeoutError) as err:
                    log.warning("admission cycle interrupted: %s; trying again on the next change", err)
                    self.cache.changed.set()
                    await self.clock.sleep(1.0)
        finally:
            if elector_task is not None:
                elector_task.cancel()
                await asyncio.gather(elector_task, return_exceptions=True)
            with contextlib.suppress(Exception):
                if self.elector is not None:
                    await asyncio.shield(self.elector.release())
            await self.cache.stop()
            await self.api.close()

    async def _until_leading(self, elector_task: asyncio.Task[None]) -> None:
        """Wait for a term; should the election itself fail, say so instead of waiting for ever."""
        assert self.elector is not None
        if self.elector.leading.is_set():
            return
        leading = asyncio.create_task(self.elector.leading.wait())
        try:
            await asyncio.wait({leading, elector_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            leading.cancel()
        if elector_task.done():
            elector_task.result()
            raise DraqError("leader election stopped")

    async def _begin_term(self) -> bool:
        """A new term: forget what earlier terms believed they wrote and read the PodGroups afresh. The
        read is consistent and made after the Lease changed hands, so the records a previous leader wrote
        before it stopped count even where the watch is behind (its later writes fail on the fence)."""
        self._said.clear()
        self._said_waits = {}
        self._wait_written.clear()
        self._queue_status.clear()
        self._parking = Parking(safety_seconds=self.settings.park_safety_seconds)  # a new term evaluates all
        try:
            listing = await self.api.get(kinds.POD_GROUPS.list_path())
        except KubeApiError as err:
            if err.status != 404:  # 404: the CRD is not installed, there is nothing to read
                log.warning("new term: reading the PodGroups: %s; trying again", err)
                return False
            listing = {}
        except (OSError, TimeoutError) as err:
            log.warning("new term: reading the PodGroups: %s; trying again", err)
            return False
        for item in listing.get("items") or []:
            self.cache.assume("PodGroup", item)
        self.cache.changed.set()
        return True

    async def _pass_in_term(self) -> None:
        """One pass; with leader election it is cancelled as soon as the term ends."""
        if self.elector is None:
            await self.reconcile()
            return
        cycle = asyncio.create_task(self.reconcile())
        deposed = asyncio.create_task(self.elector.deposed.wait())
        try:
            done, _ = await asyncio.wait({cycle, deposed}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            cycle.cancel()
            deposed.cancel()
            await asyncio.gather(cycle, deposed, return_exceptions=True)
            raise
        deposed.cancel()
        if cycle not in done:
            cycle.cancel()
            await asyncio.gather(cycle, return_exceptions=True)
            raise LeadershipLost("the term of leadership ended during the cycle")
        cycle.result()

    async def _wait_for_change(self) -> None:
        """Wait for a change (or the resync period), then for quiet: the debounce when the last pass ended
        less than a debounce ago (a burst goes on: decided in one pass), a moment otherwise (an idle
        operator answers at once; the events of one request arrive within it)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.settings.resync_seconds):  # not wait_for: it can swallow a cancel
                await self.cache.changed.wait()
        await self.clock.sleep(self._quiet_seconds())
        self.cache.changed.clear()

    def _quiet_seconds(self) -> float:
        """While passes follow each other, as long as the last pass took (at least a moment, at most the
        debounce): a burst whose passes grow long is gathered into few passes, the loop spends at most about
        half its time deciding, and a change after a quick pass is answered at once."""
        debounce = self.settings.debounce_seconds
        settle = min(IDLE_SETTLE_SECONDS, debounce)
        busy = self._last_pass_end is not None and self.clock.monotonic() - self._last_pass_end < debounce
        return min(debounce, max(settle, self._last_pass_seconds)) if busy else settle

    async def discover_gangs(self) -> None:
        """The gang API the cluster serves: the PodGroups draq creates for `spec.schedulingGroup` are of it."""
        if self.settings.native_gangs == "off":
            log.info("native gangs off (--native-gangs off): no Workload or PodGroup is created or watched")
            return
        self.writer.gang_api = await served_gang_api(self.api)
        served = self.writer.gang_api
        log.info("gang API served: %s", served.describe() if served is not None else "none (no native gangs)")
        if served is not None and served.kind == "PodGroup":  # their PodGroup-level resource claims
            self.cache.add_watches(self.api, table((kinds.scheduling_pod_groups(served),)))

    async def watch_owners(self) -> None:
        """Before the cache starts: watch the enabled integrations' kinds that the API server serves."""
        owners = await served(self.api, kinds.workload_resources(enabled_kinds(self.settings.frameworks)))
        self.cache.add_watches(self.api, owner_watches(owners))
        self.reader.workload_kinds = frozenset(r.kind for r in owners)

    async def reconcile(self) -> None:
        """One full pass; safe to repeat (every write is conditional on what it finds)."""
        await self._abandoned_cycle_done()
        await self._seal_ready()
        started = self.clock.monotonic()
        reading = self.reader.read()
        now = self.clock.now()
        await self.owner_notices.post(reading)
        changed = await self._finish_releases(reading)
        changed |= await self._advance_phases(reading)
        changed |= await self._correct_charges(reading)
        changed |= await self.evictor.finish_evictions(reading)
        changed |= await self.evictor.evict_overdue(reading, now)
        changed |= await self.evictor.resume_due(reading, now)
        if changed:
            reading = self.reader.read()
        await self.unit_status.write(reading)
        if not reading.usage_current:
            return  # admitting against usage that could not be rebuilt could overcommit (the reader said why)
        changes = Changes(self.reader.capacity_epoch, self.clock.monotonic())
        result = await self._decide(replace(reading.cycle, parking=self._parking.fed(changes)))
        self._parking = result.parking or self._parking
        groups = reading.by_key
        gate = asyncio.Semaphore(WRITE_CONCURRENCY)
        writing_since, deferred = self.clock.monotonic(), 0

        async def write(decision: GroupDecision) -> None:
            nonlocal deferred
            group = groups[decision.group]
            async with gate:
                if _write_order(decision) and self.clock.monotonic() - writing_since > WAIT_WRITE_SECONDS:
                    deferred += 1  # not said: the next pass writes it
                    return
                try:
                    if isinstance(decision, Admit):
                        await self._admit(reading, group, decision)
                    elif isinstance(decision, Extend):
                        await self._extend(reading, group, decision)
                    elif isinstance(decision, LateWait):
                        await self._report_late_wait(reading, group, decision)
                    else:
                        await self._report_wait(reading, group, decision)
                except KubeApiError as err:
                    self._group_failed(group, err)

        # Groups are written side by side; within a group the order stays record first, then release. Admissions
        # take the write slots first: a burst of new groups' Wait writes (a flood) must not hold up a release.
        said_before, said = self._said_waits, {}
        try:
            async with asyncio.TaskGroup() as writing:
                for decision in _in_write_order(result.decisions):
                    if said_before.get(id(decision)) is decision:  # the same Wait the last pass found said
                        said[id(decision)] = decision
                    elif not self._already_said(decision, groups[decision.group]):
                        writing.create_task(write(decision))
                    elif isinstance(decision, Wait) and self._said.get(decision.group) == decision.message:
                        said[id(decision)] = decision
                self._said_waits = said
        except BaseExceptionGroup as failed:  # the first failure ends the cycle (e.g. LeadershipLost)
            raise failed.exceptions[0] from None
        if deferred:
            log.info("%d waiting groups' status left to the next pass (writes took over %.0f s)", deferred,
                     WAIT_WRITE_SECONDS)
            self.cache.changed.set()
        if result.preemptions.preempts:
            await self.evictor.preempt(reading, result.preemptions, now)
        await self._write_queue_status(reading, result.state, result.waiting)
        self.cycles += 1
        self.cycle_seconds.append(self.clock.monotonic() - started)
        del self.cycle_seconds[:-1000]
        await self._off_loop(self.metrics.cycle, reading, result, self.cycle_seconds[-1], self.clock.now(),
                             self.defer_figures and self.cache.changed.is_set())

    async def _seal_ready(self) -> None:
        """Load the record seal's key before the first reading; on the start that created it, seal the
        records it finds (written before sealing existed, or under a lost key) as they are (`docs/operator.md`,
        "Sealed records")."""
        if self.writer.seal_key is None:
            loaded = await load_seal_key(self.api, self.settings.lease_namespace, self.settings.seal_secret)
            self.reader.seal_key = self.writer.seal_key = loaded.key
            self.reader.adopting = self.writer.adopting = loaded.created
            self.writer.untraceable = self.reader.untraceable
        if self.writer.adopting and await self._adopt_unsealed():
            self.reader.adopting = self.writer.adopting = False

    async def _adopt_unsealed(self) -> bool:
        """Seal every record that does not verify with the new key (none, or another key's seal); True when
        none is left (a conflict is tried again next pass)."""
        done = True
        for manifest in self.cache.objects("PodGroup"):
            meta = manifest.get("metadata") or {}
            if check_seal(self.writer.seal_key or b"", str(meta.get("uid") or ""),
                          manifest.get("status") or {}) not in (SealCheck.UNSEALED, SealCheck.BROKEN):
                continue
            try:
                await self.writer.pod_group_status(str(meta.get("namespace")), str(meta.get("name")), {},
                                                   str(meta.get("resourceVersion") or ""))
                log.info("adopted the record of PodGroup %s/%s: sealed as it stands", meta.get("namespace"),
                         meta.get("name"))
            except KubeApiError as err:
                if err.status != 404:
                    log.warning("adopting the record of PodGroup %s/%s: %s", meta.get("namespace"),
                                meta.get("name"), err)
                    done = False
        return done

    async def _decide(self, cycle: CycleInput) -> CycleResult:
        """The core's `decide` in a worker thread, so that webhook reviews and probes are answered meanwhile."""
        result: CycleResult = await self._off_loop(decide, cycle)
        return result

    async def _off_loop(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` in a worker thread: the cycle's decisions and the metrics' figures, pure and slow.

        They read the reading's snapshot and the compiled selectors, whose memo dicts are not thread-safe;
        on the loop only a reconcile pass touches them (the webhooks compile selectors but evaluate none),
        before or after this await. A thread cannot be stopped: when the pass is cancelled (the term
        ends), the shield lets it run to its end, its result is dropped, nothing is written for it, and
        the next pass waits for it before it reads (`_abandoned_cycle_done`).
        """
        self._computing = asyncio.create_task(asyncio.to_thread(work, *args))
        self._computing.add_done_callback(_retrieve)
        return await asyncio.shield(self._computing)

    async def _abandoned_cycle_done(self) -> None:
        """Wait for the thread of a cancelled pass: the next reading shares the snapshot's memos with it."""
        if self._computing is not None and not self._computing.done():
            log.info("waiting for the abandoned admission cycle to finish before reading again")
            await asyncio.wait({self._computing})

    # ----- admission --------------------------------------------------------------------------------
    async def _admit(self, reading: Reading, group: GroupView, admit: Admit) -> None:
        manifest = reading.manifests.get(group.ref)
        if manifest is None:
            manifest = await self.writer.ensure_pod_group(group.namespace, group.name, group.min_member,
                                                          group.queue)
        version = str((manifest.get("metadata") or {}).get("resourceVersion") or "")
        try:
            written = await self.writer.pod_group_status(group.namespace, group.name,
                                                         admitted_status(admit, len(group.pods), self.writer.now()),
                                                         version)
        except KubeApiError as err:
            if err.status == 409:
                log.info("group %s changed while being admitted; deciding again", group.key)
                self.cache.changed.set()
                return
            raise
        log.info("admitted %s to %s: %s", group.key, admit.cluster_queue, admit.charge.describe())
        self._said.pop(group.key, None)
        self._wait_written.pop(group.key, None)
        await self._ensure_native_gang(reading, group)
        for pod in group.gated:
            await self.writer.ungate(pod.namespace, pod.name, reading.pod_manifest(pod.namespace, pod.name),
                                     admit.placement.nodes.get(pod.key))
        self.metrics.released(group, admit, self.clock.now())
        # The Event tells what the record already says: it follows the release, off its critical path.
        await self.writer.event(written, "Admitted", admitted_event(admit))
        admitted = admitted_condition(admit.cluster_queue, self.writer.now())
        for pod in group.gated:  # only members that were told they wait
            manifest = reading.pod_manifest(pod.namespace, pod.name)
            if manifest is not None and current_condition(manifest) is not None:
                await self.writer.pod_condition(self.cache.current("Pod", (pod.namespace, pod.name)) or manifest,
                                                admitted)

    async def _extend(self, reading: Reading, group: GroupView, grown: Extend) -> None:
        """Late members: the group's record grows first (charge, plan), then they are released pinned."""
        manifest = reading.manifests.get(group.ref) or {}
        version = str((manifest.get("metadata") or {}).get("resourceVersion") or "")
        borrowed = group.pod_group.borrowed if group.pod_group is not None else Amounts()
        written = await self.writer.pod_group_status(group.namespace, group.name,
                                                     extended_status(grown, len(group.pods), borrowed), version)
        self._said.pop(f"late {group.key}", None)
        if grown.plan.slots:  # admitted from its declared shape, maybe before any member (and its Workload) existed
            await self._ensure_native_gang(reading, group)
        for pod in group.gated:
            if pod.key in grown.placement.nodes:
                await self.writer.ungate(pod.namespace, pod.name, reading.pod_manifest(pod.namespace, pod.name),
                                         grown.placement.nodes[pod.key])
        if grown.given_up:
            given_up = slots_given_up_event(grown)
            await self.writer.event(written, given_up.reason, given_up.message, warning=given_up.warning)
        if grown.placement.nodes:
            await self.writer.event(written, LATE_CONDITION, late_admitted_event(grown))

    async def _report_late_wait(self, reading: Reading, group: GroupView, wait: LateWait) -> None:
        if self._said.get(f"late {group.key}") == wait.message:
            return
        written = reading.manifests.get(group.ref)
        if written is not None:
            event = late_wait_event(wait)
            await self.writer.event(written, event.reason, event.message, warning=event.warning)
        self._said[f"late {group.key}"] = wait.message

    async def _ensure_native_gang(self, reading: Reading, group: GroupView) -> None:
        """Members made native gang members by the webhook need their Workload or PodGroup before they are
        released."""
        wanted = gang_name(group.name)
        manifests = [dict(reading.pod_manifest(pod.namespace, pod.name) or {}) for pod in group.pods]
        members = [m for m in manifests if referenced_gang(m) == wanted]
        if not members:  # members using a claim by name are left out of the gang by the webhook
            return
        gang = gang_api_of(members[0], self.writer.gang_api)
        if gang is None:
            log.warning("group %s/%s: its pods name native gang %s, whose API this cluster does not serve",
                        group.namespace, group.name, wanted)
            return
        await self.writer.ensure_gang(gang, group.namespace, group.name, min(len(members), group.min_member))

    async def _finish_releases(self, reading: Reading) -> bool:
        changed = False
        for group in reading.holding:  # only a group that holds quota has members to release
            names = unreleased_members(group)
            if not names:
                continue
            log.info("finishing the release of %s: %s still gated", group.key, ", ".join(names))
            try:
                await self._ensure_native_gang(reading, group)
                planned = dict(group.pod_group.plan.nodes) if group.pod_group is not None else {}
                for name in names:
                    changed |= await self.writer.ungate(group.namespace, name,
                                                        reading.pod_manifest(group.namespace, name),
                                                        planned.get(name))
            except KubeApiError as err:
                self._group_failed(group, err)
        return changed

    def _group_failed(self, group: GroupView, err: KubeApiError) -> None:
        """One group's write failed (e.g. it was deleted meanwhile): the others go on; the next pass retries."""
        log.warning("group %s: %s", group.key, err)
        self.cache.changed.set()

    def _already_said(self, decision: GroupDecision, group: GroupView) -> bool:
        """A wait whose message this term already wrote needs no write, nor one of the same reason for the
        same group (an equal view: nothing of the group changed) written less than `WAIT_DETAIL_SECONDS`
        ago: thousands of groups that wait cost a dictionary lookup each, not a task or a write."""
        if isinstance(decision, LateWait):
            return self._said.get(f"late {decision.group}") == decision.message
        if not isinstance(decision, Wait):
            return False
        if self._said.get(decision.group) == decision.message:
            return True
        written = self._wait_written.get(decision.group)
        if written is None or written[0] != decision.reason \
                or self.clock.monotonic() - written[2] >= WAIT_DETAIL_SECONDS:
            return False
        return written[1] is group or written[1] == group

    async def _report_wait(self, reading: Reading, group: GroupView, wait: Wait) -> None:
        manifest = reading.manifests.get(group.ref)
        current = (manifest or {}).get("status") or {}
        if self._said.get(group.key) == wait.message or (
                current.get("message") == wait.message and current.get("members") == len(group.pods)):
            self._said[group.key] = wait.message
            return
        if manifest is None:
            manifest = await self.writer.ensure_pod_group(group.namespace, group.name, group.min_member,
                                                          group.queue)
        written = await self.writer.pod_group_status(group.namespace, group.name,
                                                     pending_status(wait, len(group.pods), self.writer.now()))
        self._said[group.key] = wait.message
        before = self._wait_written.get(group.key)
        self._wait_written[group.key] = (wait.reason, group, self.clock.monotonic())
        await self.writer.event(written, wait.reason.value, wait.message, warning=True)
        await self._tell_members(reading, group, wait, reason_changed=before is None or before[0] is not wait.reason)

    async def _tell_members(self, reading: Reading, group: GroupView, wait: Wait, reason_changed: bool) -> None:
        """Where people look: each gated member's condition (written only when it says something else), and
        when the reason changes an Event on the group's top-level workload and on one member."""
        condition = waiting_condition(wait, self.writer.now())
        members = [m for p in group.gated if (m := reading.pod_manifest(p.namespace, p.name)) is not None]
        for manifest in members:
            await self.writer.pod_condition(manifest, condition)
        if not reason_changed:
            return
        message = condition["message"]
        top = next((m.top for m in reading.memberships.get(group.key, {}).values() if m.top is not None), None)
        watched = top is not None and top.kind in self.cache.reflectors
        owner = self.cache.current(top.kind, (top.namespace, top.name)) if watched and top is not None else None
        if owner is not None:
            await self.writer.event(owner, wait.reason.value, message, warning=True)
        if members:
            await self.writer.event(members[0], wait.reason.value, message, warning=True)

    # ----- after admission --------------------------------------------------------------------------
    async def _advance_phases(self, reading: Reading) -> bool:
        changed = False
        for group in reading.holding:  # only a group that holds quota moves on
            phase = next_phase(group)
            if phase is None:
                continue
            change = phase_change(phase, len(group.pods))
            try:
                written = await self.writer.pod_group_status(group.namespace, group.name, change.status)
            except KubeApiError as err:
                self._group_failed(group, err)
                continue
            changed = True
            log.info("group %s is %s", group.key, phase.value)
            await self.writer.event(written, change.reason, change.message)
        return changed

    async def _correct_charges(self, reading: Reading) -> bool:
        """Running groups: the recorded charge follows what their claims really hold."""
        cycle = reading.cycle
        running = [g for g in reading.holding if g.pod_group is not None and g.pod_group.phase is Phase.RUNNING]
        if not running:
            return False
        inventory = charging_inventory(cycle.snapshot, self.gates)
        inputs = (cycle.snapshot.claims, cycle.snapshot.templates, inventory, *cycle.units, *running)
        if _same_objects(self._no_corrections, inputs):
            return False  # the same groups, claims and units found nothing to correct last time
        corrections = charge_corrections(running, cycle.snapshot.claims, cycle.snapshot.templates, cycle.units,
                                         inventory, device_selected)
        self._no_corrections = () if corrections else inputs
        changed = False
        for correction in corrections:
            group = next(g for g in running if g.key == correction.group)
            assert group.pod_group is not None
            try:
                written = await self.writer.pod_group_status(group.namespace, group.name,
                                                             correction.status(group.pod_group.borrowed))
            except KubeApiError as err:
                self._group_failed(group, err)
                continue
            changed = True
            log.info("group %s: charge corrected: %s", group.key, correction.describe())
            event = charge_corrected_event(correction)
            await self.writer.event(written, event.reason, event.message, warning=event.warning)
        return changed

    async def _write_queue_status(self, reading: Reading, state: QueueState, waiting: tuple[Wait, ...]) -> None:
        pending = pending_counts(waiting, reading.by_key)
        for queue in reading.cluster_queues:
            status = cluster_queue_status(state, queue.name, pending.cluster_queues.get(queue.name, 0))
            if self._queue_status.get(f"cq {queue.name}") != status:
                await self._queue_write(f"cq {queue.name}", status,
                                        self.writer.cluster_queue_status(queue.name, status))
        for key, local in reading.cycle.local_queues.items():
            status = local_queue_status(state, key, pending.local_queues.get(key, 0))
            if self._queue_status.get(f"lq {key}") != status:
                await self._queue_write(f"lq {key}", status,
                                        self.writer.local_queue_status(local.namespace, local.name, status))

    async def _queue_write(self, memo: str, status: Mapping[str, Any], write: Any) -> None:
        try:
            await write
            self._queue_status[memo] = status
        except KubeApiError as err:
            log.warning("status of %s: %s", memo, err)


def _same_objects(before: tuple[object, ...], now: tuple[object, ...]) -> bool:
    return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a decision's failure as seen: the pass that awaited it raises it, an abandoned one drops it."""
    if not task.cancelled():
        task.exception()
