"""Leader election with a coordination.k8s.io Lease: only the holder runs admission cycles, and only
while its term is current.

Timing (`ElectionTiming`): the holder renews every retry period. It may write only until the renew
deadline has passed since it *sent* its last successful renewal (`current_epoch`, `may_write`); the
deadline is shorter than the lease, and once it has passed the holder steps down (`deposed`). A
standby measures expiry on its own clock from when it first saw the Lease's current version (less the
time the API server's own clock says the Lease has gone unwritten, `age_on_server`), reads the Lease at
least every `STANDBY_POLL` and looks again right when it expires, so a killed leader is replaced
within the lease duration plus `STANDBY_POLL`. Updates carry the Lease's resourceVersion, so two
replicas racing for the Lease cannot both win. Who may take the Lease when is decided by
`admission.core.leadership.claim`.

Every term counts a lease transition, so its epoch (Lease uid, leaseTransitions, holder) is unique.
`FencedClient` refuses to send a write outside a term (`LeadershipLost`), and the writer stamps the
epoch on every PodGroup status, release, eviction and Job suspension, which the validating webhook
checks against the Lease when the API server receives the write.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import os
import socket
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from admission.core.errors import DraqError, InvalidInput
from admission.core.labels import INCARNATION_ANNOTATION
from admission.core.leadership import (
    Candidate,
    Claim,
    ElectionTiming,
    Epoch,
    LeaseView,
    age_on_server,
    claim,
    lease_epoch,
)
from admission.kube import kinds
from admission.kube.client import Client, KubeApiError
from admission.kube.clock import SYSTEM_CLOCK, Clock, micro_timestamp

log = logging.getLogger(__name__)
_NEVER = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_AT_EXPIRY = 0.001  # a standby looks again this long after the Lease it watches has expired
STANDBY_POLL = 0.5
"""A standby reads the Lease at least this often: it counts the expiry from when it first saw the
holder's last renewal, so it sees that renewal at most this late and takes over at most this long
after the lease duration."""
FAILING_RETRY = 0.5
"""After a failed round (the API server away), the next one comes this soon, however long the retry
period: a leader whose term lapsed while the API server was away leads again right when it returns."""


def default_identity(environ: Mapping[str, str] | None = None, hostname: str | None = None) -> str:
    """The holder identity when none is given: the pod's name (POD_NAME, from the downward API), else
    the host name, which is the pod's name in a cluster. Stable across restarts of the process, so a
    restarted replica takes its own Lease back at once instead of waiting for it to expire."""
    env = os.environ if environ is None else environ
    return env.get("POD_NAME") or hostname or socket.gethostname()


class LeadershipLost(DraqError):
    """A write was about to be sent outside a term of leadership: the cycle is abandoned."""


class Fence(Protocol):
    def current_epoch(self) -> Epoch | None:
        """The epoch to write under; raises `LeadershipLost` when writing is no longer allowed."""
        ...


class NoFence:
    """Without leader election (a single replica): always allowed, no epoch."""

    def current_epoch(self) -> Epoch | None:
        return None


NO_FENCE: Fence = NoFence()


class FencedClient:
    """A client that sends a write only while the fence allows it; reads are not fenced."""

    def __init__(self, api: Client, fence: Fence) -> None:
        self._api = api
        self._fence = fence

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        return await self._api.get(path, params)

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._fence.current_epoch()
        return await self._api.create(path, body)

    async def merge_patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._fence.current_epoch()
        return await self._api.merge_patch(path, body)

    async def json_patch(self, path: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        self._fence.current_epoch()
        return await self._api.json_patch(path, operations)

    async def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._fence.current_epoch()
        return await self._api.replace(path, body)

    async def delete(self, path: str, resource_version: str | None = None) -> dict[str, Any]:
        self._fence.current_epoch()
        return await self._api.delete(path, resource_version)

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300) -> AsyncIterator[dict[str, Any]]:
        return self._api.watch(path, resource_version, timeout_seconds)

    def server_time(self) -> dt.datetime | None:
        return self._api.server_time()

    async def close(self) -> None:
        await self._api.close()


class LeaderElector:
    def __init__(self, api: Client, namespace: str, name: str, identity: str,
                 timing: ElectionTiming | float, clock: Clock = SYSTEM_CLOCK, incarnation: str | None = None) -> None:
        self.api = api
        self.path = kinds.LEASES.object_path(namespace, name)
        self.collection = kinds.LEASES.collection_path(namespace)
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.timing = timing if isinstance(timing, ElectionTiming) else ElectionTiming.for_lease(timing)
        problem = self.timing.problem()
        if problem is not None:
            raise InvalidInput("leader election", *problem)
        self.clock = clock
        self.incarnation = incarnation or uuid.uuid4().hex[:16]
        self.leading = asyncio.Event()
        self.deposed = asyncio.Event()  # set whenever this replica is not in a term
        self.deposed.set()
        self.term = 0  # terms begun by this process
        self._epoch: Epoch | None = None
        self._valid_until = -math.inf
        self._has_led = False
        self._seen_version: str | None = None
        self._seen_at = 0.0
        self._watch_until: float | None = None  # a standby: when the Lease it watches expires
        self._standing_by = ""  # the holder this standby last said it waits for
        self._why_not = "not leading yet"
        self._failing = False  # the last round got no answer

    # ----- the fence --------------------------------------------------------------------------------
    def current_epoch(self) -> Epoch | None:
        self._expire(self.clock.monotonic())
        if not self.leading.is_set():
            raise LeadershipLost(f"{self.identity} does not hold the Lease {self.namespace}/{self.name}: "
                                 f"{self._why_not}; nothing more is written in this cycle")
        return self._epoch

    def may_write(self) -> bool:
        self._expire(self.clock.monotonic())
        return self.leading.is_set()

    # ----- the election -----------------------------------------------------------------------------
    async def run(self) -> None:
        """Acquire and keep renewing; `leading` is set while this replica is in a term."""
        while True:
            await self.step()
            await self.clock.sleep(self._pause())

    def _pause(self) -> float:
        now = self.clock.monotonic()
        pause = self.timing.retry_period
        if self._failing:
            pause = min(pause, FAILING_RETRY)
        if self.leading.is_set():
            pause = min(pause, self._valid_until - now)
        elif self._watch_until is not None:
            pause = min(pause, STANDBY_POLL, self._watch_until - now + _AT_EXPIRY)
        return max(pause, _AT_EXPIRY)

    async def step(self) -> None:
        """One round: try to acquire or renew, then begin, continue or end the term."""
        started = self.clock.monotonic()  # the renew deadline counts from before the request is sent
        self._expire(started)
        if self.leading.is_set():
            timeout = max(self._valid_until - started, self.timing.retry_period / 2)
        else:
            timeout = self.timing.renew_deadline
        try:
            # asyncio.timeout, not wait_for: wait_for (3.11) can swallow a cancellation that arrives just
            # as the request completes, and the elector would never stop.
            async with asyncio.timeout(timeout):
                written = await self._attempt()
        except (KubeApiError, OSError, TimeoutError) as err:
            log.warning("leader election: %s", err or f"no answer from the API server within {timeout:.1f}s")
            self._failing = True
            self._expire(self.clock.monotonic())
            return
        self._failing = False
        if written is None:
            if self.leading.is_set():
                self._step_down("another replica holds the Lease")
            return
        self._in_term(written, started)

    async def _attempt(self) -> dict[str, Any] | None:
        """Renew or take the Lease; the Lease as written, or None when another replica holds it."""
        try:
            lease = await self.api.get(self.path)
        except KubeApiError as err:
            if err.status != 404:
                raise
            return await self._create()
        meta: dict[str, Any] = lease.setdefault("metadata", {})
        spec: dict[str, Any] = lease.get("spec") or {}
        now = self.clock.monotonic()
        version = str(meta.get("resourceVersion") or "")
        if version != self._seen_version:
            # First sight of this version: it was written at least `age_on_server` ago.
            self._seen_version, self._seen_at = version, now - age_on_server(lease, self.api.server_time())
        annotations: dict[str, Any] = meta.get("annotations") or {}
        duration = float(spec.get("leaseDurationSeconds") or self.timing.lease_seconds)
        view = LeaseView(str(spec.get("holderIdentity") or ""), str(annotations.get(INCARNATION_ANNOTATION) or ""),
                         duration, now - self._seen_at)
        decision = claim(view, Candidate(self.identity, self.incarnation, self.leading.is_set(), self._has_led))
        if decision is Claim.WAIT:
            if self._watch_until is None or view.holder != self._standing_by:
                log.info("standing by: the Lease %s/%s is held by %s", self.namespace, self.name, view.holder)
                self._standing_by = view.holder
            self._watch_until = self._seen_at + duration
            return None
        self._watch_until = None
        stamp = micro_timestamp(self.clock.now())
        transitions = int(spec.get("leaseTransitions") or 0)
        if decision is Claim.ACQUIRE:
            transitions += 1
            spec["acquireTime"] = stamp
            if view.holder and view.holder != self.identity:
                log.info("taking over the Lease %s/%s from %s (not renewed for %.1fs)", self.namespace, self.name,
                         view.holder, view.observed_for)
        spec.update({"holderIdentity": self.identity, "leaseDurationSeconds": int(self.timing.lease_seconds),
                     "renewTime": stamp, "leaseTransitions": transitions})
        lease["spec"] = spec
        meta["annotations"] = {**annotations, INCARNATION_ANNOTATION: self.incarnation}
        try:
            return await self.api.replace(self.path, lease)
        except KubeApiError as err:
            if err.status == 409:
                return None  # someone else updated it first
            raise

    async def _create(self) -> dict[str, Any] | None:
        stamp = micro_timestamp(self.clock.now())
        body = {"apiVersion": kinds.LEASES.api_version, "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "annotations": {INCARNATION_ANNOTATION: self.incarnation}},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.timing.lease_seconds),
                         "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}}
        try:
            return await self.api.create(self.collection, body)
        except KubeApiError as err:
            if err.status == 409:
                return None
            raise

    def _in_term(self, written: Mapping[str, Any], started: float) -> None:
        self._valid_until = started + self.timing.renew_deadline
        self._seen_version = str((written.get("metadata") or {}).get("resourceVersion") or "")
        self._seen_at = self.clock.monotonic()
        epoch = lease_epoch(written)
        if self.leading.is_set() and epoch == self._epoch:
            return
        self.term += 1
        self._epoch = epoch
        self._has_led = True
        log.info("leading as %s (Lease %s/%s, epoch %s)", self.identity, self.namespace, self.name,
                 epoch.describe() if epoch else "-")
        self.deposed.clear()
        self.leading.set()

    def _expire(self, now: float) -> None:
        if self.leading.is_set() and now >= self._valid_until:
            self._step_down(f"not renewed within the renew deadline of {self.timing.renew_deadline:g}s")

    def _step_down(self, why: str, quietly: bool = False) -> None:
        was_leading = self.leading.is_set()
        self._why_not = why
        self._valid_until = -math.inf
        self._epoch = None
        self.leading.clear()
        self.deposed.set()
        if was_leading and not quietly:
            log.warning("stopped leading (Lease %s/%s): %s", self.namespace, self.name, why)

    async def release(self) -> None:
        """Give the Lease up on a clean stop, so another replica takes over at once. Nothing is written
        under the term after this."""
        held = self.leading.is_set()
        self._step_down("released on a clean stop", quietly=True)
        if not held:
            return
        try:
            async with asyncio.timeout(self.timing.renew_deadline):
                await self._give_up()
            log.info("released the Lease %s/%s", self.namespace, self.name)
        except (KubeApiError, OSError, TimeoutError) as err:
            log.warning("releasing the Lease: %s", err or "no answer from the API server")

    async def _give_up(self) -> None:
        lease = await self.api.get(self.path)
        spec = lease.get("spec") or {}
        annotations = (lease.get("metadata") or {}).get("annotations") or {}
        if spec.get("holderIdentity") == self.identity and annotations.get(INCARNATION_ANNOTATION) == self.incarnation:
            spec["holderIdentity"] = ""
            spec["renewTime"] = micro_timestamp(_NEVER)
            await self.api.replace(self.path, lease)
