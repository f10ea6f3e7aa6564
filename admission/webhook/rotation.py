"""draq's own certificates over time: the CA kept in a Secret, serving certificates renewed early.

Every replica reads the same CA from the Secret (the first one to start creates it) and issues its
own serving certificate, so replicas need no coordination and the `caBundle` does not change when
serving certificates are renewed.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

from admission.core.errors import DraqError
from admission.kube import kinds
from admission.kube.client import Client, KubeApiError
from admission.kube.clock import SYSTEM_CLOCK, Clock
from admission.webhook.certificates import (
    KeyPair,
    issue_serving,
    load_pair,
    needs_renewal,
    new_ca,
    renewal_due,
    serves_hosts,
)
from admission.webhook.tls import ServingTLS

log = logging.getLogger(__name__)
CA_SECRET = "draq-webhook-ca"
_LABELS = {"app.kubernetes.io/name": "draq", "app.kubernetes.io/component": "webhook"}


class SecretCA:
    """The CA in Secret `<namespace>/draq-webhook-ca` (keys `ca.crt`, `ca.key`), created if absent."""

    def __init__(self, api: Client, namespace: str, name: str = CA_SECRET, clock: Clock = SYSTEM_CLOCK) -> None:
        self._api = api
        self._namespace = namespace
        self._name = name
        self._clock = clock

    @property
    def _path(self) -> str:
        return kinds.SECRETS.object_path(self._namespace, self._name)

    async def load_or_create(self) -> KeyPair:
        try:
            return self._decode(await self._api.get(self._path))
        except KubeApiError as err:
            if err.status != 404:
                raise
        ca = new_ca("draq-webhook-ca", self._clock.now())
        try:
            await self._api.create(kinds.SECRETS.collection_path(self._namespace), self._encode(ca))
            log.info("created CA secret %s/%s", self._namespace, self._name)
            return ca
        except KubeApiError as err:
            if err.status != 409:
                raise
        # Another replica created it first: use theirs.
        return self._decode(await self._api.get(self._path))

    def _encode(self, ca: KeyPair) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": self._name, "namespace": self._namespace, "labels": _LABELS},
            "data": {"ca.crt": base64.b64encode(ca.cert_pem).decode(),
                     "ca.key": base64.b64encode(ca.key_pem).decode()},
        }

    def _decode(self, secret: dict[str, Any]) -> KeyPair:
        data = secret.get("data") or {}
        where = f"Secret {self._namespace}/{self._name}"
        try:
            cert, key = base64.b64decode(data["ca.crt"]), base64.b64decode(data["ca.key"])
        except (KeyError, ValueError, TypeError) as err:
            raise DraqError(
                f"{where}, field data: needs base64 ca.crt and ca.key; delete it to make a new CA"
            ) from err
        return load_pair(cert, key, source=where)


class ServingCertRotator:
    """Issues the serving certificate from the CA and renews it after 2/3 of its lifetime."""

    def __init__(self, ca: KeyPair, hosts: Sequence[str], tls: ServingTLS, clock: Clock = SYSTEM_CLOCK,
                 lifetime: dt.timedelta | None = None) -> None:
        self.ca = ca
        self._hosts = list(hosts)
        self._tls = tls
        self._clock = clock
        self._lifetime = lifetime

    def ensure_current(self, force: bool = False) -> bool:
        """Install a fresh certificate if forced, there is none, it is due, or it lacks a host; True if it did."""
        now = self._clock.now()
        current = self._tls.current
        fresh = current is not None and not needs_renewal(current, now) and serves_hosts(current, self._hosts)
        if fresh and not force:
            return False
        pair = (issue_serving(self.ca, self._hosts, now, self._lifetime) if self._lifetime
                else issue_serving(self.ca, self._hosts, now))
        self._tls.install(pair)
        return True

    def seconds_until_due(self) -> float:
        if self._tls.current is None:
            return 0.0
        return max((renewal_due(self._tls.current) - self._clock.now()).total_seconds(), 0.0)

    async def run(self, max_sleep: float = 3600.0) -> None:
        while True:
            await self._clock.sleep(min(max(self.seconds_until_due(), 1.0), max_sleep))
            try:
                if self.ensure_current():
                    log.info("renewed the serving certificate")
            except Exception:  # keep serving the current certificate; try again shortly
                log.exception("renewing the serving certificate failed")
                await self._clock.sleep(30)
