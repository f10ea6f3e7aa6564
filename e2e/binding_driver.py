"""What a DRA driver does for devices with binding conditions (KEP-5007), for the differential.

The scheduler writes a claim's allocation together with the pod's reservation in PreBind and then
waits (polling every 5 s) until each allocated device with binding conditions has them True in the
claim's `status.devices`, or one of its binding failure conditions True. This stand-in watches the
claims of one namespace and answers each such device once per allocation: the binding conditions True
(the device is attached), or, for pools named in `fail_once`, the failure condition True the first
time the pod gets that device. The scheduler then fails PreBind, deallocates the claim in its next
attempt (the claim it made for extended resources it deletes at once and makes anew) and allocates
again; the second attach of the device for the pod succeeds.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

GROUP, VERSION, PLURAL = "resource.k8s.io", "v1", "resourceclaims"
# Every call has a client-side timeout: a call left waiting on a connection that never answers would stop the
# stand-in for good, and the scheduler would wait in PreBind for the rest of the run (its binding timeout
# is 10 minutes).
REQUEST_TIMEOUT = (5.0, 15.0)  # connect, read
WATCH_SECONDS = 5  # the server ends each watch after this long; every claim is then listed and answered again
log = logging.getLogger("draq.e2e.binding")
DeviceKey = tuple[str, str, str]  # driver, pool, device


class BindingConditionDriver:
    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.fail_once: set[str] = set()  # pools whose devices fail their first attach for each pod
        self.failed: dict[str, set[DeviceKey]] = {}  # pod -> devices whose attach failed for it
        self.attached: dict[str, set[DeviceKey]] = {}  # pod -> devices attached for it
        # pod -> its claims from a failed attach until an attach for the pod works (or the claim is gone and
        # one of another claim does: the scheduler replaces the claim it makes for extended resources)
        self._retrying: dict[str, set[str]] = {}
        self._deleted: set[str] = set()
        self._reserved: dict[str, set[str]] = {}  # claim -> pods it is reserved for
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.last_answer = time.monotonic()  # when the stand-in last wrote a device's conditions
        self._thread: threading.Thread | None = None

    def expect_failures(self, pools: Iterable[str]) -> None:
        with self._lock:
            self.fail_once.update(pools)

    def busy(self, pod: str) -> bool:
        """True while the scheduler is binding the pod (a claim is reserved for it) or is about to allocate
        again after a failed attach: its condition then still shows an earlier attempt's answer."""
        with self._lock:
            return bool(self._retrying.get(pod)) or any(pod in pods for pods in self._reserved.values())

    def start(self) -> BindingConditionDriver:
        self._thread = threading.Thread(target=self._run, name="binding-driver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)

    def __enter__(self) -> BindingConditionDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch()
            except Exception as err:
                if not self._stop.is_set():
                    log.warning("binding-condition driver watch failed, retrying: %s", err)
                    time.sleep(0.5)

    def _watch(self) -> None:
        listing: Any = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL,
                                                                 _request_timeout=REQUEST_TIMEOUT)
        for claim in listing["items"]:
            self._answer(claim)
        stream = watch.Watch()
        event: Any
        for event in stream.stream(self.custom.list_namespaced_custom_object, GROUP, VERSION, self.namespace,
                                   PLURAL, resource_version=listing["metadata"]["resourceVersion"],
                                   timeout_seconds=WATCH_SECONDS,
                                   _request_timeout=(REQUEST_TIMEOUT[0], WATCH_SECONDS + REQUEST_TIMEOUT[1])):
            if self._stop.is_set():
                stream.stop()
                return
            kind, claim = event["type"], event["object"]
            if kind in ("ADDED", "MODIFIED"):
                self._answer(claim)
            elif kind == "DELETED":
                self._forget(claim["metadata"]["name"])

    def _answer(self, claim: dict[str, Any]) -> None:
        """Handle one claim; a failure is logged and the claim answered at the next listing, without holding
        up the claims after it."""
        try:
            self._handle(claim)
        except Exception as err:
            log.warning("binding-condition driver: claim %s not answered, trying again at the next listing: %s",
                        (claim.get("metadata") or {}).get("name"), err)

    def _forget(self, claim: str) -> None:
        with self._lock:
            self._reserved.pop(claim, None)
            self._deleted.add(claim)

    def _handle(self, claim: dict[str, Any]) -> None:
        status = claim.get("status") or {}
        pods = {ref["name"] for ref in status.get("reservedFor") or [] if ref.get("resource") == "pods"}
        with self._lock:
            self._reserved[claim["metadata"]["name"]] = pods
        results = [r for r in ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
                   if r.get("bindingConditions")]
        answered = {_key(d) for d in status.get("devices") or [] if d.get("conditions")}
        waiting = [r for r in results if _key(r) not in answered]
        if not waiting or len(pods) != 1:
            return  # nothing to attach, or not (yet) reserved by the one pod the scheduler is binding
        [pod] = pods
        name = claim["metadata"]["name"]
        with self._lock:
            decisions = [(r, r["pool"] in self.fail_once and _key(r) not in self.failed.get(pod, set()))
                         for r in waiting]
        entries = [d for d in status.get("devices") or [] if _key(d) in {_key(r) for r in results}]
        entries += [_status_entry(r, fails) for r, fails in decisions]
        body = {"metadata": {"resourceVersion": claim["metadata"]["resourceVersion"]}, "status": {"devices": entries}}
        try:
            self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, self.namespace, PLURAL, name, body,
                                                              _request_timeout=REQUEST_TIMEOUT)
        except ApiException as err:
            log.debug("claim %s: answer for %s not written (%s)", name, pod, err.reason)
            return  # a newer version of the claim is on its way, and is answered then
        log.debug("claim %s (resourceVersion %s) for %s: %s", name, claim["metadata"]["resourceVersion"], pod,
                  [(r["device"], "fails" if fails else "attached") for r, fails in decisions])
        with self._lock:
            self.last_answer = time.monotonic()
            for result, fails in decisions:
                (self.failed if fails else self.attached).setdefault(pod, set()).add(_key(result))
            retrying = self._retrying.setdefault(pod, set())
            if any(fails for _, fails in decisions):
                retrying.add(name)
            else:
                retrying -= {name, *self._deleted}


def _status_entry(result: dict[str, Any], fails: bool) -> dict[str, Any]:
    """The device's status: its first failure condition True, or its binding conditions True."""
    if fails:
        conditions = [_condition(result["bindingFailureConditions"][0], "AttachFailed")]
    else:
        conditions = [_condition(c, "Attached") for c in result["bindingConditions"]]
    driver, pool, device = _key(result)
    return {"driver": driver, "pool": pool, "device": device, "conditions": conditions}


def _key(entry: dict[str, Any]) -> DeviceKey:
    return entry["driver"], entry["pool"], entry["device"]


def _condition(kind: str, reason: str) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": kind, "status": "True", "reason": reason, "message": "set by the e2e driver stand-in",
            "lastTransitionTime": now}
