"""Reading objects for the report (clear errors for bad input), filtering, JSON and text."""

from __future__ import annotations

import pytest

from admission.core.errors import InvalidInput
from admission.core.features import gates_for
from admission.core.gaps import GapKind, find_gaps, parse_kind, read_objects, render_text
from tests.support.builders import node, resource_quota
from tests.unit.gaps.world import TEAM, base, device, held_claim, report, running_pod

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ops"}}


def two_gaps() -> list[dict[str, object]]:
    """An outside-queue pod in ops (1 GPU) and a tight ResourceQuota in team."""
    return [*base(), running_pod("x", "ops", claims={"gpu": "c"}), held_claim("c", [device("gpu-0")], "ops", ["x"]),
            resource_quota("rq", {"gpu.deviceclass.resource.k8s.io/devices": 4}, TEAM)]


def test_an_unknown_kind_is_refused_naming_it_and_what_is_supported() -> None:
    with pytest.raises(InvalidInput) as caught:
        read_objects([DEPLOYMENT], gates_for())
    assert caught.value.obj == "Deployment ops/web"
    assert "apps/v1 Deployment is not used by the gap report; supported: v1 Namespace" in str(caught.value)
    assert "--ignore-unknown" in str(caught.value)


def test_unknown_kinds_can_be_skipped() -> None:
    data = read_objects([DEPLOYMENT, node("n1")], gates_for(), ignore_unknown=True)
    assert list(data.snapshot.nodes) == ["n1"]


def test_a_malformed_object_is_an_error_for_files_and_a_note_for_a_live_cluster() -> None:
    broken = resource_quota("rq", {"requests.nvidia.com/gpu": "lots"}, TEAM)
    with pytest.raises(InvalidInput) as caught:
        read_objects([broken], gates_for())
    assert str(caught.value).startswith("ResourceQuota team/rq, field spec.hard.requests.nvidia.com/gpu")
    data = read_objects([broken, node("n1")], gates_for(), strict=False)
    assert data.resource_quotas == () and list(data.snapshot.nodes) == ["n1"]
    assert data.notes[0].startswith("left out: ResourceQuota team/rq, field spec.hard")
    assert find_gaps(data).notes == data.notes


def test_a_document_that_is_no_object_is_refused() -> None:
    with pytest.raises(InvalidInput, match="apiVersion/kind: both are required"):
        read_objects([{"metadata": {"name": "x"}}], gates_for())
    with pytest.raises(InvalidInput, match="expected a Kubernetes object"):
        read_objects(["text"], gates_for())


def test_lists_are_flattened() -> None:
    data = read_objects([{"apiVersion": "v1", "kind": "List", "items": [node("n1"), node("n2")]}], gates_for())
    assert sorted(data.snapshot.nodes) == ["n1", "n2"]


def test_filters_by_namespace_queue_and_kind() -> None:
    result = report(*two_gaps())
    assert {g.kind for g in result.gaps} == {GapKind.OUTSIDE_QUEUES, GapKind.NATIVE_QUOTA_LIMIT}
    assert {g.namespace for g in result.filtered(namespaces=["ops"]).gaps} == {"ops"}
    assert [g.kind for g in result.filtered(queues=["cq"]).gaps] == [GapKind.NATIVE_QUOTA_LIMIT]
    assert result.filtered(queues=["cq"]).native == ()
    only = result.filtered(kinds=[GapKind.OUTSIDE_QUEUES])
    assert {g.kind for g in only.gaps} == {GapKind.OUTSIDE_QUEUES}
    assert only.accounts == result.accounts


def test_kind_names_are_matched_in_any_case() -> None:
    assert parse_kind("outsidequeues") is GapKind.OUTSIDE_QUEUES
    with pytest.raises(InvalidInput, match="unknown gap kind 'Leaks'; known kinds: ChargeDiffers"):
        parse_kind("Leaks")


def test_json_form_has_quantities_as_text() -> None:
    result = report(*two_gaps()).to_dict()
    outside = next(g for g in result["gaps"] if g["kind"] == "OutsideQueues" and g["measure"] == "gpu-memory")
    assert outside == {"kind": "OutsideQueues", "namespace": "ops", "clusterQueue": "", "node": "",
                       "measure": "gpu-memory", "size": "80Gi", "objects": ["ResourceClaim ops/c", "Pod ops/x"],
                       "message": "gpu-memory 80Gi held outside every queue in namespace ops by ResourceClaim ops/c, "
                                  "Pod ops/x; namespace ops is not managed by draq"}
    assert {"namespace": "ops", "clusterQueue": "", "unit": "gpus", "held": "1", "charged": "0"} in result["accounts"]
    assert result["nativeQuota"][0]["hard"] == "4"


def test_text_lists_accounts_native_quota_and_numbered_gaps() -> None:
    text = render_text(report(*two_gaps()))
    lines = text.splitlines()
    assert lines[0].startswith("ACCOUNTS")
    assert lines[1].split() == ["NAMESPACE", "CLUSTERQUEUE", "UNIT", "HELD", "CHARGED"]
    assert lines[2].split() == ["ops", "-", "gpu-memory", "80Gi", "0"]
    assert "GAPS (3)" in lines
    assert any(line.split() == ["1", "OutsideQueues", "ops", "-", "-", "gpu-memory", "80Gi"] for line in lines)
    assert any(line.startswith("3. ClusterQueue cq lets namespace team take gpus 8") for line in lines)


def test_text_says_when_there_is_no_gap() -> None:
    assert render_text(report(*base())) == "no gaps found"
