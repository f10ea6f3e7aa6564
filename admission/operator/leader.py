"""Leader election with a coordination.k8s.io Lease: only the holder runs admission cycles.

The holder renews the Lease every third of its duration; another replica takes it over once
`renewTime + leaseDurationSeconds` has passed. Updates carry the Lease's resourceVersion, so two
replicas racing for an expired Lease cannot both win.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

from admission.kube import kinds
from admission.kube.client import Client, KubeApiError
from admission.kube.clock import SYSTEM_CLOCK, Clock, micro_timestamp, parse_timestamp

log = logging.getLogger(__name__)
_NEVER = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class LeaderElector:
    def __init__(self, api: Client, namespace: str, name: str, identity: str, lease_seconds: float,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.api = api
        self.path = kinds.LEASES.object_path(namespace, name)
        self.collection = kinds.LEASES.collection_path(namespace)
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.leading = asyncio.Event()
        self._last_renewal = -1e18

    async def run(self) -> None:
        """Acquire and keep renewing; `leading` is set while this replica holds the Lease."""
        while True:
            await self.step()
            await self.clock.sleep(self.lease_seconds / 3)

    async def step(self) -> None:
        """One round: try to acquire or renew, then set or clear `leading`."""
        try:
            held = renewed = await self.try_acquire()
        except (KubeApiError, OSError, TimeoutError) as err:
            log.warning("leader election: %s", err)
            renewed = False
            held = self.leading.is_set() and self.clock.monotonic() - self._last_renewal < self.lease_seconds
        if renewed:
            self._last_renewal = self.clock.monotonic()
        if held:
            if not self.leading.is_set():
                log.info("leading as %s (Lease %s/%s)", self.identity, self.namespace, self.name)
            self.leading.set()
        elif self.leading.is_set():
            log.warning("lost the Lease %s/%s: stopping admission", self.namespace, self.name)
            self.leading.clear()

    async def try_acquire(self) -> bool:
        moment = self.clock.now()
        try:
            lease = await self.api.get(self.path)
        except KubeApiError as err:
            if err.status != 404:
                raise
            return await self._create(moment)
        spec: dict[str, Any] = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renewed = parse_timestamp(spec.get("renewTime"))
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        expired = renewed is None or moment > renewed + dt.timedelta(seconds=duration)
        if holder not in (None, "", self.identity) and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
        spec.update({"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_seconds),
                     "renewTime": micro_timestamp(moment), "leaseTransitions": transitions})
        if holder != self.identity:
            spec["acquireTime"] = micro_timestamp(moment)
        lease["spec"] = spec
        try:
            await self.api.replace(self.path, lease)
        except KubeApiError as err:
            if err.status == 409:
                return False  # someone else updated it first
            raise
        return True

    async def _create(self, moment: dt.datetime) -> bool:
        stamp = micro_timestamp(moment)
        body = {"apiVersion": kinds.LEASES.api_version, "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_seconds),
                         "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}}
        try:
            await self.api.create(self.collection, body)
        except KubeApiError as err:
            if err.status == 409:
                return False
            raise
        return True

    async def release(self) -> None:
        """Give the Lease up on a clean stop, so another replica takes over at once."""
        if not self.leading.is_set():
            return
        self.leading.clear()
        try:
            lease = await self.api.get(self.path)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") == self.identity:
                spec["holderIdentity"] = ""
                spec["renewTime"] = micro_timestamp(_NEVER)
                await self.api.replace(self.path, lease)
        except (KubeApiError, OSError, TimeoutError) as err:
            log.warning("releasing the Lease: %s", err)
