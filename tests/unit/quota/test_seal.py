"""The PodGroup record seal: what it covers, what breaks it, and which records are taken as draq's."""

from __future__ import annotations

from typing import Any

import pytest

from admission.core.quota import (
    SealCheck,
    UnsealedRecord,
    check_seal,
    merged_status,
    parse_sealed_pod_group,
    seal_record,
)
from tests.support import builders as b

KEY = bytes(range(32))
RECORD: dict[str, Any] = {"phase": "Running", "clusterQueue": "main", "charge": [{"unit": "gpus", "amount": "8"}],
                          "admittedAt": "2026-01-01T00:00:00Z", "plan": {"pods": [{"name": "a-0", "node": "n1"}]},
                          "message": "all members are bound", "members": 1}


def sealed(status: dict[str, Any], uid: str = "uid-1") -> dict[str, Any]:
    return {**status, "seal": seal_record(KEY, uid, status)}


def manifest(status: dict[str, Any], uid: str = "uid-1") -> dict[str, Any]:
    found = b.pod_group("train", 1, "lq", status=status)
    found["metadata"]["uid"] = uid
    return found


def test_a_sealed_record_verifies_and_messages_and_conditions_are_not_covered() -> None:
    status = sealed(RECORD)
    assert check_seal(KEY, "uid-1", status) is SealCheck.SEALED
    assert check_seal(KEY, "uid-1", {**status, "message": "anything", "conditions": []}) is SealCheck.SEALED


@pytest.mark.parametrize("forged", [
    {"phase": "Finished"},
    {"charge": []},
    {"charge": [{"unit": "gpus", "amount": "1"}]},
    {"clusterQueue": "other"},
    {"plan": {"pods": [{"name": "a-0", "node": "n2"}]}},
    {"evictions": 3},
])
def test_changing_a_decided_field_breaks_the_seal(forged: dict[str, Any]) -> None:
    assert check_seal(KEY, "uid-1", {**sealed(RECORD), **forged}) is SealCheck.BROKEN


def test_the_seal_is_bound_to_the_uid_and_the_key() -> None:
    status = sealed(RECORD)
    assert check_seal(KEY, "uid-2", status) is SealCheck.BROKEN  # copied onto another PodGroup
    assert check_seal(bytes(32), "uid-1", status) is SealCheck.BROKEN
    assert check_seal(KEY, "uid-1", {**status, "seal": "v1:not base64!"}) is SealCheck.BROKEN
    assert check_seal(KEY, "uid-1", {**status, "seal": "v0:" + status["seal"][3:]}) is SealCheck.BROKEN


def test_an_empty_record_needs_no_seal_and_a_decided_one_without_seal_is_unsealed() -> None:
    assert check_seal(KEY, "uid-1", {}) is SealCheck.EMPTY
    assert check_seal(KEY, "uid-1", {"phase": "Pending", "message": "waiting", "members": 2}) is SealCheck.EMPTY
    assert check_seal(KEY, "uid-1", {"phase": "Admitted", "clusterQueue": "main"}) is SealCheck.UNSEALED


def test_the_seal_of_a_merge_patch_is_the_seal_of_the_merged_record() -> None:
    patch = {"phase": "Finished", "message": "done", "requeueAt": None}
    merged = merged_status(sealed(RECORD), patch)
    assert merged["phase"] == "Finished" and "requeueAt" not in merged and merged["charge"] == RECORD["charge"]
    assert check_seal(KEY, "uid-1", {**merged, "seal": seal_record(KEY, "uid-1", merged)}) is SealCheck.SEALED


def test_a_forged_record_is_bad_input_naming_the_group_and_the_way_out() -> None:
    forged = {**sealed(RECORD), "phase": "Finished"}
    with pytest.raises(UnsealedRecord, match=r"PodGroup default/train, field status: not written by draq: its "
                                             r"status.seal does not verify.*Delete the PodGroup"):
        parse_sealed_pod_group(manifest(forged), KEY)


def test_an_unsealed_record_is_adopted_only_when_asked() -> None:
    unsealed = dict(RECORD)
    with pytest.raises(UnsealedRecord, match=r"carries no status\.seal"):
        parse_sealed_pod_group(manifest(unsealed), KEY)
    assert parse_sealed_pod_group(manifest(unsealed), KEY, adopt_unsealed=True).charge.get("gpus") == 8


def test_a_new_key_adopts_a_record_sealed_with_another_key_only_when_asked() -> None:
    other = {**RECORD, "seal": seal_record(bytes(32), "uid-1", RECORD)}
    with pytest.raises(UnsealedRecord, match="does not verify"):
        parse_sealed_pod_group(manifest(other), KEY)
    assert parse_sealed_pod_group(manifest(other), KEY, adopt_unsealed=True).phase.value == "Running"


def test_a_record_cleared_over_an_admission_draq_sealed_is_not_taken_as_new() -> None:
    last = parse_sealed_pod_group(manifest(sealed(RECORD)), KEY)
    assert parse_sealed_pod_group(manifest({}), KEY).phase.value == "Pending"  # a new group
    with pytest.raises(UnsealedRecord, match="its status was cleared while draq's last record of it holds quota"):
        parse_sealed_pod_group(manifest({}), KEY, last_sealed=last)
