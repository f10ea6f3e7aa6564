"""The validating webhook on ResourceClaims, ResourceClaimTemplates and QuotaUnits."""

from __future__ import annotations

from typing import Any

from admission.core.labels import API_GROUP, API_GROUP_VERSION, QUEUE_LABEL
from admission.core.review import GatingPolicy, validate
from admission.core.review.envelope import GroupVersionKind
from tests.support import builders as b

from .builders import CLAIM, CLAIM_TEMPLATE, FakeLookups, cluster, request

QUOTA_UNIT = GroupVersionKind(API_GROUP, API_GROUP_VERSION, "QuotaUnit")
GPU_CLASS = "gpu.example.com"


def unit(name: str = "gpus", selector: str | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"deviceClassNames": [GPU_CLASS]}
    if selector is not None:
        devices["selector"] = selector
    return b.quota_unit(name, devices=devices)


def with_quota(nominal: int, cohort: str | None = None, borrowing: int | None = None) -> FakeLookups:
    lookups = cluster()
    lookups.units["gpus"] = unit()
    lookups.device_classes[GPU_CLASS] = b.device_class(GPU_CLASS)
    lookups.cluster_queues["cq"] = b.cluster_queue("cq", b.quota("gpus", nominal, borrowing), cohort=cohort)
    return lookups


def gpus(count: int, selector: str | None = None) -> dict[str, Any]:
    return b.exactly("gpu", GPU_CLASS, count, selector=selector)


def claim(count: int = 1, selector: str | None = None, namespace: str = "team-a",
          queue: str | None = "gpu") -> dict[str, Any]:
    return b.claim("c", gpus(count, selector), namespace=namespace, labels={QUEUE_LABEL: queue} if queue else None)


def template(count: int, namespace: str = "team-b") -> dict[str, Any]:
    return b.template("t", gpus(count), namespace=namespace)


def check(kind: GroupVersionKind, obj: dict[str, Any], lookups: FakeLookups):  # type: ignore[no-untyped-def]
    return validate(request(kind, obj), lookups, GatingPolicy())


def test_claim_within_quota_is_allowed() -> None:
    assert check(CLAIM, claim(4), with_quota(4)).allowed


def test_claim_bigger_than_its_queue_could_ever_hold_is_denied() -> None:
    decision = check(CLAIM, claim(8), with_quota(4))
    assert not decision.allowed
    assert "asks for 8" in decision.message and "at most 4" in decision.message
    assert "ClusterQueue cq" in decision.message and "LocalQueue 'gpu'" in decision.message


def test_borrowing_limit_raises_the_ceiling() -> None:
    lookups = with_quota(4, cohort="pool", borrowing=2)
    assert check(CLAIM, claim(6), lookups).allowed
    assert not check(CLAIM, claim(7), lookups).allowed


def test_unlimited_borrowing_has_no_ceiling() -> None:
    assert check(CLAIM, claim(100), with_quota(4, cohort="pool")).allowed


def test_template_in_a_default_queue_namespace_is_checked_against_that_queue() -> None:
    lookups = with_quota(4).with_queue("team-b", "batch", "cq")
    assert check(CLAIM_TEMPLATE, template(2), lookups).allowed
    decision = check(CLAIM_TEMPLATE, template(5), lookups)
    assert not decision.allowed and "ResourceClaimTemplate team-b/t" in decision.message


def test_claim_without_a_queue_is_only_checked_for_its_charge() -> None:
    assert check(CLAIM, claim(100, queue=None), with_quota(4)).allowed


def test_selector_that_does_not_compile_is_denied_naming_the_request() -> None:
    decision = check(CLAIM, claim(1, selector="device.driver == "), with_quota(4))
    assert not decision.allowed and decision.code == 422
    assert "request gpu, selectors[0].cel.expression: does not compile" in decision.message


def test_selector_of_the_wrong_type_is_denied() -> None:
    decision = check(CLAIM, claim(1, selector="device.driver"), with_quota(4))
    assert not decision.allowed and "bool" in decision.message


def test_unknown_device_class_only_warns() -> None:
    lookups = with_quota(4)
    del lookups.device_classes[GPU_CLASS]
    decision = check(CLAIM, claim(1), lookups)
    assert decision.allowed and "DeviceClass" in decision.warnings[0]


def test_claims_of_unmanaged_namespaces_are_not_checked() -> None:
    assert check(CLAIM, claim(1, selector="1 +", namespace="plain"), with_quota(4)).allowed


def test_unreadable_claim_is_denied_with_the_field() -> None:
    bad = claim(1)
    bad["spec"]["devices"]["requests"][0]["exactly"]["count"] = "many"
    decision = check(CLAIM, bad, with_quota(4))
    assert not decision.allowed and "count" in decision.message


def test_quota_unit_with_a_broken_selector_is_denied() -> None:
    decision = check(QUOTA_UNIT, unit(selector="device.attributes["), cluster())
    assert not decision.allowed and "selector" in decision.message
    assert check(QUOTA_UNIT, unit(selector='device.driver == "gpu.example.com"'), cluster()).allowed


def test_a_broken_unit_or_queue_is_named_in_a_warning_not_silently_skipped() -> None:
    lookups = with_quota(4)
    lookups.units["broken"] = unit("broken", selector="device.attributes[")
    decision = check(CLAIM, claim(2), lookups)
    assert decision.allowed and any("QuotaUnit broken" in w for w in decision.warnings)
    lookups.cluster_queues["cq"]["spec"]["quotas"][0]["nominal"] = "lots"
    decision = check(CLAIM, claim(2), lookups)
    assert decision.allowed and any("could ever fit is not known" in w for w in decision.warnings)
