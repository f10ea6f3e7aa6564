"""Leader election with a coordination.k8s.io Lease: only the holder runs admission cycles.

The holder renews the Lease every third of its duration; another replica takes it over once
`renewTime + leaseDurationSeconds` has passed. Updates carry the Lease's resourceVersion, so two
replicas racing for an expired Lease cannot both win.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from admission.webhook.kube_api import KubeApi, KubeApiError

log = logging.getLogger(__name__)
_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def _stamp(moment: datetime) -> str:
    return moment.strftime(_FORMAT)


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    for fmt in (_FORMAT, "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


class LeaderElector:
    def __init__(self, api: KubeApi, namespace: str, name: str, identity: str, lease_seconds: float) -> None:
        self.api = api
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.leading = asyncio.Event()

    async def run(self) -> None:
        """Acquire and keep renewing; `leading` is set while this replica holds the Lease."""
        last_renewal = 0.0
        loop = asyncio.get_running_loop()
        while True:
            try:
                held = renewed = await self.try_acquire()
            except (KubeApiError, OSError, TimeoutError) as err:
                log.warning("leader election: %s", err)
                renewed = False
                held = self.leading.is_set() and loop.time() - last_renewal < self.lease_seconds
            if renewed:
                last_renewal = loop.time()
            if held:
                if not self.leading.is_set():
                    log.info("leading as %s (Lease %s/%s)", self.identity, self.namespace, self.name)
                self.leading.set()
            elif self.leading.is_set():
                log.warning("lost the Lease %s/%s: stopping admission", self.namespace, self.name)
                self.leading.clear()
            await asyncio.sleep(self.lease_seconds / 3)

    async def try_acquire(self) -> bool:
        moment = datetime.now(UTC)
        try:
            lease = await self.api.get(self.path)
        except KubeApiError as err:
            if err.status != 404:
                raise
            return await self._create(moment)
        spec: dict[str, Any] = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renewed = _parse(spec.get("renewTime"))
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        expired = renewed is None or moment > renewed + timedelta(seconds=duration)
        if holder not in (None, "", self.identity) and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
        spec.update({"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_seconds),
                     "renewTime": _stamp(moment), "leaseTransitions": transitions})
        if holder != self.identity:
            spec["acquireTime"] = _stamp(moment)
        lease["spec"] = spec
        try:
            await self.api.replace(self.path, lease)
        except KubeApiError as err:
            if err.status == 409:
                return False  # someone else updated it first
            raise
        return True

    async def _create(self, moment: datetime) -> bool:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_seconds),
                         "acquireTime": _stamp(moment), "renewTime": _stamp(moment), "leaseTransitions": 0}}
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
                spec["renewTime"] = _stamp(datetime(1970, 1, 1, tzinfo=UTC))
                await self.api.replace(self.path, lease)
        except (KubeApiError, OSError, TimeoutError) as err:
            log.warning("releasing the Lease: %s", err)
