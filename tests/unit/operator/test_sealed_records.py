"""The operator acts only on records it sealed: forged Admitted and Finished records, a cleared record, the
first start's adoption of records written before sealing, and a restart that never saw the last seal."""

from __future__ import annotations

import asyncio
import base64

from admission.core.quota import seal_record
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi
from tests.unit.cycle.cycle_builders import NS

from .operator_world import bind_as_planned, cluster, gates_of, record, settle, started, submit

STATUS = f"/apis/draq.io/v1alpha1/namespaces/{NS}/podgroups"


def queue_used(api: FakeApi) -> tuple[str, str]:
    queue = api.get_object("ClusterQueue", "", "main")
    assert queue is not None
    entry = queue["status"]["quotas"][0]
    return entry["used"], entry["reserved"]


async def forge(api: FakeApi, group: str, status: dict[str, object]) -> None:
    """A tenant's write of the PodGroup's status (its old seal, if any, is left as it is)."""
    await api.merge_patch(f"{STATUS}/{group}/status", {"status": status})


def waits_as_unsealed(api: FakeApi, group: str) -> str:
    status = record(api, group)
    [condition] = status["conditions"]
    assert condition["reason"] == "RecordNotSealed", condition
    events = [w.body for w in api.writes_to("/events") if w.body["reason"] == "RecordNotSealed"]
    assert events and events[-1]["type"] == "Warning"
    return str(condition["message"])


async def _a_forged_admission_with_an_empty_charge_is_not_released_and_not_counted() -> None:
    api = cluster(gpus=4)
    submit(api, "running", 1, 4)
    operator = await started(api, FakeClock())
    await settle(operator)
    await bind_as_planned(api, "running-0", "running")
    await settle(operator)
    assert record(api, "running")["phase"] == "Running"
    submit(api, "intruder", 1, 4)
    await settle(operator)
    assert record(api, "intruder")["phase"] == "Pending"
    await forge(api, "intruder", {"phase": "Admitted", "clusterQueue": "main", "charge": []})
    await settle(operator)
    await settle(operator)
    assert gates_of(api, "intruder-0") == ["draq.io/admission"]  # no release is "finished" for it
    assert record(api, "intruder")["phase"] == "Admitted"  # the forged phase is left, never acted on
    message = waits_as_unsealed(api, "intruder")
    assert message.startswith(f"PodGroup {NS}/intruder, field status: not written by draq: its status.seal does "
                              "not verify: the record was changed after draq wrote it; draq ignores the record")
    assert queue_used(api) == ("4", "0")  # 4 of 4, not 4 + 0 with a second group running on top


async def _a_forged_finished_keeps_the_charge_and_admits_nothing_on_top() -> None:
    api = cluster(gpus=4)
    submit(api, "running", 1, 4)
    operator = await started(api, FakeClock())
    await settle(operator)
    await bind_as_planned(api, "running-0", "running")
    await settle(operator)
    await forge(api, "running", {"phase": "Finished"})
    submit(api, "next", 1, 4)
    await settle(operator)
    await settle(operator)
    assert "its status.seal does not verify" in waits_as_unsealed(api, "running")
    assert queue_used(api) == ("4", "0")  # the charge draq last sealed is still counted
    assert record(api, "next")["phase"] == "Pending" and gates_of(api, "next-0") == ["draq.io/admission"]


async def _a_cleared_record_keeps_the_charge() -> None:
    api = cluster(gpus=4)
    submit(api, "running", 1, 4)
    operator = await started(api, FakeClock())
    await settle(operator)
    await bind_as_planned(api, "running-0", "running")
    await settle(operator)
    found = api.get_object("PodGroup", NS, "running")
    assert found is not None
    found["status"] = {}  # cleared (as a replace of the status would)
    await forge(api, "running", {})
    submit(api, "next", 1, 4)
    await settle(operator)
    await settle(operator)
    assert "its status was cleared while draq's last record of it holds quota" in waits_as_unsealed(api, "running")
    assert queue_used(api) == ("4", "0")
    assert gates_of(api, "next-0") == ["draq.io/admission"]


async def _after_a_restart_a_forged_record_makes_its_queue_admit_nothing_new() -> None:
    api = cluster(gpus=4)
    submit(api, "running", 1, 4)
    operator = await started(api, FakeClock())
    await settle(operator)
    await bind_as_planned(api, "running-0", "running")
    await settle(operator)
    await forge(api, "running", {"phase": "Finished"})
    submit(api, "next", 1, 4)
    restarted = await started(api, FakeClock())  # never saw what was sealed for `running`
    await settle(restarted)
    await settle(restarted)
    assert gates_of(api, "next-0") == ["draq.io/admission"]
    queue = api.get_object("ClusterQueue", "", "main")
    assert queue is not None
    [active] = [c for c in queue["status"]["conditions"] if c["type"] == "Active"]
    assert active["reason"] == "UsageUnknown" and f"PodGroup {NS}/running carries a record draq did not write" in \
        active["message"]


async def _the_first_start_with_a_new_key_adopts_records_written_before_sealing() -> None:
    api = cluster(gpus=4)
    submit(api, "old", 1, 4)
    operator = await started(api, FakeClock())
    await settle(operator)
    assert record(api, "old")["phase"] == "Admitted"
    await forge(api, "old", {"seal": None})  # as a record from before sealing
    await api.delete("/api/v1/namespaces/draq-system/secrets/draq-seal-key")
    restarted = await started(api, FakeClock())
    await settle(restarted)
    secret = api.get_object("Secret", "draq-system", "draq-seal-key")
    assert secret is not None
    key = base64.b64decode(secret["data"]["key"])
    found = api.get_object("PodGroup", NS, "old")
    assert found is not None and found["status"]["seal"] == seal_record(key, found["metadata"]["uid"],
                                                                         found["status"])
    assert queue_used(api) == ("0", "4")
    await api.delete("/api/v1/namespaces/draq-system/secrets/draq-seal-key")  # a lost key: adopted again
    renewed = await started(api, FakeClock())
    await settle(renewed)
    secret = api.get_object("Secret", "draq-system", "draq-seal-key")
    assert secret is not None and base64.b64decode(secret["data"]["key"]) != key
    found = api.get_object("PodGroup", NS, "old")
    assert found is not None and found["status"]["seal"] == seal_record(
        base64.b64decode(secret["data"]["key"]), found["metadata"]["uid"], found["status"])
    again = await started(api, FakeClock())  # the key exists now: nothing more is adopted
    await forge(api, "old", {"seal": None})
    await settle(again)
    assert "carries no status.seal" in waits_as_unsealed(api, "old")


def test_a_forged_admission_with_an_empty_charge_is_not_released_and_not_counted() -> None:
    asyncio.run(_a_forged_admission_with_an_empty_charge_is_not_released_and_not_counted())


def test_a_forged_finished_keeps_the_charge_and_admits_nothing_on_top() -> None:
    asyncio.run(_a_forged_finished_keeps_the_charge_and_admits_nothing_on_top())


def test_a_cleared_record_keeps_the_charge() -> None:
    asyncio.run(_a_cleared_record_keeps_the_charge())


def test_after_a_restart_a_forged_record_makes_its_queue_admit_nothing_new() -> None:
    asyncio.run(_after_a_restart_a_forged_record_makes_its_queue_admit_nothing_new())


def test_the_first_start_with_a_new_key_adopts_records_written_before_sealing() -> None:
    asyncio.run(_the_first_start_with_a_new_key_adopts_records_written_before_sealing())
