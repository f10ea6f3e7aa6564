"""Leadership as the core sees it: when a replica may take the Lease, the epoch a leader writes under,
and the timing of the election. Pure.

An epoch names one term of one leader: the Lease's uid, its `leaseTransitions` and its holder. draq
counts a transition every time a process starts a term (a takeover, a restart under the same
identity, a leader that had stepped down and leads again), so two terms never share an epoch.
Every PodGroup status draq writes carries the epoch it was decided under (`status.epoch`; the
admission record also in `status.admittedBy`), and so does every pod and Job draq releases, evicts,
suspends or resumes (annotation `draq.io/epoch`, in the same patch). The validating webhook refuses a
write of draq's whose epoch is not the current Lease's: a deposed leader's late writes fail.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from admission.core.errors import InvalidInput
from admission.core.labels import EPOCH_ANNOTATION

EPOCH_FIELD = "epoch"
"""PodGroup status: the epoch of the leader that wrote it last."""
ADMITTED_BY_FIELD = "admittedBy"
"""PodGroup status: the epoch of the leader that admitted the group (set and cleared with admittedAt)."""
DEFAULT_LEASE_NAME = "draq-operator"


@dataclass(frozen=True, slots=True)
class Epoch:
    holder: str
    transitions: int
    lease_uid: str = ""

    def to_status(self) -> dict[str, Any]:
        return {"holder": self.holder, "leaseTransitions": self.transitions, "leaseUID": self.lease_uid}

    def describe(self) -> str:
        return f"{self.holder} (lease transition {self.transitions})"

    def to_annotation(self) -> str:
        """The value of the `draq.io/epoch` annotation: the status form as compact JSON."""
        return json.dumps(self.to_status(), sort_keys=True, separators=(",", ":"))


def lease_epoch(lease: Mapping[str, Any]) -> Epoch | None:
    """The epoch a Lease stands for now; None when nobody holds it."""
    spec = _mapping(lease.get("spec"))
    holder = spec.get("holderIdentity")
    if not isinstance(holder, str) or not holder:
        return None
    transitions = spec.get("leaseTransitions")
    uid = _mapping(lease.get("metadata")).get("uid")
    return Epoch(holder, transitions if isinstance(transitions, int) else 0, uid if isinstance(uid, str) else "")


def read_epoch(value: object, where: str = "status.epoch", kind: str = "PodGroup") -> Epoch | None:
    """An epoch as written in a PodGroup status (or an annotation); None when absent. `InvalidInput`
    for another shape."""
    if value is None:
        return None
    fields = _mapping(value)
    holder, transitions, uid = fields.get("holder"), fields.get("leaseTransitions"), fields.get("leaseUID", "")
    if (not isinstance(value, Mapping) or not isinstance(holder, str) or not holder
            or not isinstance(transitions, int) or isinstance(transitions, bool) or not isinstance(uid, str)):
        raise InvalidInput(kind, where, "expected {holder: string, leaseTransitions: integer, "
                           f"leaseUID: string}}, got {value!r:.200}")
    return Epoch(holder, transitions, uid)


def annotated_epoch(obj: Mapping[str, Any]) -> Epoch | None:
    """The epoch stamped on an object (annotation `draq.io/epoch`); None when it carries none.
    `InvalidInput` when the annotation is not an epoch."""
    annotations = _mapping(_mapping(obj.get("metadata")).get("annotations"))
    text = annotations.get(EPOCH_ANNOTATION)
    if text is None:
        return None
    where = f"metadata.annotations[{EPOCH_ANNOTATION}]"
    kind = str(obj.get("kind") or "object")
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        raise InvalidInput(kind, where, f"expected the JSON of an epoch, got {text!r:.200}") from None
    return read_epoch(value, where, kind)


def fenced_status(status: Mapping[str, Any], epoch: Epoch | None) -> dict[str, Any]:
    """A PodGroup status body stamped with the epoch it is written under (None without leader election:
    the field is then removed, so an epoch left by an earlier leader is not checked). `admittedBy`
    follows `admittedAt`: set with the admission record, cleared when the record is cleared."""
    stamp = epoch.to_status() if epoch is not None else None
    body = {**status, EPOCH_FIELD: stamp}
    if "admittedAt" in status:
        body[ADMITTED_BY_FIELD] = stamp if status["admittedAt"] else None
    return body


# ----- taking the Lease ---------------------------------------------------------------------------
def age_on_server(lease: Mapping[str, Any], server_now: dt.datetime | None) -> float:
    """How long the Lease has certainly gone unwritten, by the API server's own clock: from the latest
    `managedFields[].time` (set by the server when a renewal changed `renewTime`) to `server_now` (the
    `Date` of a response of that server). Both are whole seconds, so one second is taken off; 0 when
    either is unknown. A replica that has just started counts the expiry from this much before it first
    saw the Lease, instead of waiting a whole lease duration after a holder that is already gone."""
    if server_now is None:
        return 0.0
    written: list[dt.datetime] = []
    for entry in _mapping(lease.get("metadata")).get("managedFields") or []:
        stamp = _mapping(entry).get("time")
        if isinstance(stamp, str):
            try:
                written.append(dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")))
            except ValueError:
                continue
    if not written or any(w.tzinfo is None for w in written) or server_now.tzinfo is None:
        return 0.0
    return max(0.0, (server_now - max(written)).total_seconds() - 1.0)



class Claim(StrEnum):
    RENEW = "renew"  # this term goes on: same epoch
    ACQUIRE = "acquire"  # a new term: leaseTransitions + 1
    WAIT = "wait"  # another replica holds a live Lease


@dataclass(frozen=True, slots=True)
class LeaseView:
    holder: str
    incarnation: str
    duration: float  # the Lease's leaseDurationSeconds
    observed_for: float  # seconds since this replica first saw the Lease's current version


@dataclass(frozen=True, slots=True)
class Candidate:
    identity: str
    incarnation: str
    leading: bool  # in a term now (renewed within the renew deadline)
    has_led: bool  # this process has held the Lease before


def claim(lease: LeaseView, me: Candidate) -> Claim:
    """Whether a replica renews, takes or waits for the Lease.

    Expiry is measured on the replica's own clock from when it first saw the Lease's current version
    (not from the holder's renewTime), so clocks that disagree between machines do not matter.
    A Lease held under this replica's identity by another incarnation is a previous run of it
    (killed, restarted): it is taken at once, in a new term, unless this process has led before (then
    the other one is a newer duplicate, and it waits as for any holder).
    """
    if lease.holder == me.identity and lease.incarnation == me.incarnation:
        return Claim.RENEW if me.leading else Claim.ACQUIRE
    if not lease.holder:
        return Claim.ACQUIRE  # released on a clean stop
    if lease.holder == me.identity and not me.has_led:
        return Claim.ACQUIRE
    return Claim.ACQUIRE if lease.observed_for >= lease.duration else Claim.WAIT


# ----- timing -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ElectionTiming:
    """Lease duration, renew deadline and retry period, in seconds.

    The leader decides only until `renew_deadline` after sending its last successful renewal; another
    replica takes over no earlier than `lease_seconds` after it first saw that renewal, so the leader
    has stopped `lease_seconds - renew_deadline` before anyone else can start. Replicas try every
    `retry_period`; a standby checks again right when the Lease it watches expires, so a killed
    leader is replaced within `lease_seconds + retry_period` of its last renewal.
    """

    lease_seconds: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    @staticmethod
    def for_lease(lease_seconds: float, renew_deadline: float | None = None,
                  retry_period: float | None = None) -> ElectionTiming:
        """The defaults scale with the lease: 15 s -> renew deadline 10 s, retry period 2 s."""
        return ElectionTiming(lease_seconds,
                              renew_deadline if renew_deadline is not None else lease_seconds * 2 / 3,
                              retry_period if retry_period is not None else lease_seconds * 2 / 15)

    def problem(self) -> tuple[str, str] | None:
        """(option, reason) when the timing cannot work, else None."""
        if self.lease_seconds < 1 or self.lease_seconds != int(self.lease_seconds):
            return "--lease-seconds", (f"{self.lease_seconds:g} is not a whole number of seconds of at least 1 "
                                       "(a Lease's leaseDurationSeconds is whole seconds)")
        if not 0 < self.renew_deadline < self.lease_seconds:
            return "--renew-deadline", (f"{self.renew_deadline:g} must be above 0 and below the lease duration "
                                        f"({self.lease_seconds:g} s): the leader must stop deciding before "
                                        "another replica may take over")
        if not 0 < self.retry_period < self.renew_deadline:
            return "--retry-period", (f"{self.retry_period:g} must be above 0 and below the renew deadline "
                                      f"({self.renew_deadline:g} s), so a leader can retry a failed renewal")
        return None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
