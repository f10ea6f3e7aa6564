"""The seal on a PodGroup's record: proof that draq wrote the decided fields of its status.

A PodGroup's status is writable by whoever may write the `podgroups/status` subresource, which a
namespace administrator can often be granted. draq therefore signs what it decides: `status.seal` is
an HMAC-SHA256, keyed by a secret only draq reads, over the group's uid and a canonical form of the
decided fields (phase, ClusterQueue, charge, plan, admission time and term, epoch, evictions, requeue
time, suspended Jobs). A record whose seal does not verify was not written by draq as it stands; the
operator never acts on it (`docs/operator.md`, "Sealed records"). Pure: the shell loads the key.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, hmac

from admission.core.errors import InvalidInput
from admission.core.leadership import ADMITTED_BY_FIELD, EPOCH_FIELD
from admission.core.quota.podgroup import PodGroup, parse_pod_group

SEAL_FIELD = "seal"
SEAL_VERSION = "v1"
SEAL_KEY_BYTES = 32
SEALED_FIELDS = ("phase", "clusterQueue", "charge", "plan", "admittedAt", ADMITTED_BY_FIELD, EPOCH_FIELD,
                 "evictions", "requeueAt", "suspendedJobs")
"""The status fields a seal covers: every one the admission decisions and the usage are read from."""

_EMPTY: tuple[Any, ...] = (None, "", 0, [], {})


class SealCheck(StrEnum):
    SEALED = "sealed"  # the seal verifies over the record as it stands
    EMPTY = "empty"  # no decided field is set: a new group, nothing to prove
    UNSEALED = "unsealed"  # decided fields without a seal (written before sealing existed, or by someone else)
    BROKEN = "broken"  # a seal that does not verify: the record was changed after draq wrote it
    CLEARED = "cleared"  # empty, where draq last sealed an admission: someone else cleared the record


class UnsealedRecord(InvalidInput):
    """A PodGroup record draq cannot trace to its own writes."""


def decided_fields(status: Mapping[str, Any]) -> dict[str, Any]:
    """The sealed fields of `status`, empty values (absent, null, "", 0, [], {}) left out; `phase`
    Pending counts as empty."""
    decided = {name: status[name] for name in SEALED_FIELDS if status.get(name) not in _EMPTY}
    if decided.get("phase") == "Pending":
        del decided["phase"]
    return decided


def is_empty_record(status: Mapping[str, Any]) -> bool:
    """True when the record decides nothing (a new group's status)."""
    return not decided_fields(status)


def seal_record(key: bytes, uid: str, status: Mapping[str, Any]) -> str:
    """The seal of the record `status` of the PodGroup with `uid`."""
    mac = hmac.HMAC(key, hashes.SHA256())
    mac.update(_message(uid, status))
    return f"{SEAL_VERSION}:{base64.b64encode(mac.finalize()).decode()}"


def check_seal(key: bytes, uid: str, status: Mapping[str, Any]) -> SealCheck:
    """Whether `status` is draq's record, checked in constant time."""
    written = status.get(SEAL_FIELD)
    if not written:
        return SealCheck.EMPTY if is_empty_record(status) else SealCheck.UNSEALED
    if not isinstance(written, str) or not written.startswith(f"{SEAL_VERSION}:"):
        return SealCheck.BROKEN
    try:
        digest = base64.b64decode(written[len(SEAL_VERSION) + 1:], validate=True)
    except ValueError:
        return SealCheck.BROKEN
    mac = hmac.HMAC(key, hashes.SHA256())
    mac.update(_message(uid, status))
    try:
        mac.verify(digest)
    except InvalidSignature:
        return SealCheck.BROKEN
    return SealCheck.SEALED


def unsealed_record(namespace: str, name: str, check: SealCheck) -> UnsealedRecord:
    """The error that makes a record draq cannot trace bad input, naming what is wrong and the way out."""
    why = {SealCheck.BROKEN: "its status.seal does not verify: the record was changed after draq wrote it",
           SealCheck.CLEARED: "its status was cleared while draq's last record of it holds quota"}.get(
        check, "its status records a decision (phase, clusterQueue, charge or plan) but carries no status.seal")
    return UnsealedRecord(
        f"PodGroup {namespace}/{name}", "status",
        f"not written by draq: {why}; draq ignores the record and keeps counting the charge it last sealed for "
        "the group. Delete the PodGroup (a label-defined group gets a new one) or put back the record draq "
        "wrote (its fields and seal as they were)")


def parse_sealed_pod_group(manifest: Mapping[str, Any], key: bytes, adopt_unsealed: bool = False,
                           last_sealed: PodGroup | None = None) -> PodGroup:
    """A PodGroup whose record is draq's: sealed, empty, or (`adopt_unsealed`, on the first start with a
    new key) without a seal or with another key's. An empty record where draq last sealed one that holds
    quota (`last_sealed`) was cleared by someone else. Raises UnsealedRecord for a record draq cannot
    trace, InvalidInput when the PodGroup does not parse."""
    pod_group = parse_pod_group(manifest)
    meta, status = _map(manifest.get("metadata")), _map(manifest.get("status"))
    check = check_seal(key, str(meta.get("uid") or ""), status)
    if check is SealCheck.EMPTY and last_sealed is not None and last_sealed.holds_quota:
        check = SealCheck.CLEARED
    if check is SealCheck.CLEARED or (check in (SealCheck.UNSEALED, SealCheck.BROKEN) and not adopt_unsealed):
        raise unsealed_record(pod_group.namespace, pod_group.name, check)
    return pod_group


def merged_status(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `patch` merged in as a JSON merge patch (RFC 7386) does it: null removes a field."""
    merged = dict(base)
    for name, value in patch.items():
        if value is None:
            merged.pop(name, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(name), Mapping):
            merged[name] = merged_status(merged[name], value)
        else:
            merged[name] = value
    return merged


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _message(uid: str, status: Mapping[str, Any]) -> bytes:
    canonical = json.dumps(decided_fields(status), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return f"draq.io/PodGroup/{SEAL_VERSION}\n{uid}\n{canonical}".encode()
