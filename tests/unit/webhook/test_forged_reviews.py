"""Reviews no API server would send (anyone who reaches the port can send one): clear answers, no effect.

A `draq.io/group-min` of thousands of digits, a namespace that is a path, a namespace draq does not know.
Bodies larger than the webhook accepts are refused before they are read (test_limits.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, MAX_GROUP_MIN, QUEUE_LABEL
from admission.core.review import GatingPolicy, mutate, validate
from admission.core.review.envelope import MalformedReview, parse_review, uid_from_prefix
from admission.core.review.pod_validation import group_min_value
from admission.webhook.handlers import AdmissionHandlers

from .builders import POD, cluster, pod, review

POLICY = GatingPolicy()


def labelled(group_min: str) -> dict[str, Any]:
    return pod("x", labels={QUEUE_LABEL: "gpu", GROUP_LABEL: "g", GROUP_MIN_LABEL: group_min}, gates=[GATE])


# ----- draq.io/group-min -----------------------------------------------------------------------------

@pytest.mark.parametrize("digits", [4301, 5000, 100_000])
def test_a_group_min_of_thousands_of_digits_is_denied_clearly(digits: int) -> None:
    value = "9" * digits
    handlers = AdmissionHandlers(cluster(), POLICY)
    request = parse_review(review(POD, labelled(value)))
    decision = asyncio.run(handlers._decide(request, lambda r, lookups: validate(r, lookups, POLICY)))
    assert not decision.allowed and decision.code == 422 and decision.reason == "Invalid"
    assert f"label {GROUP_MIN_LABEL}" in decision.message
    assert f"({digits} characters) is not a group size" in decision.message
    assert f"from 1 to {MAX_GROUP_MIN}" in decision.message
    assert len(decision.message) < 400  # the value is abridged, not repeated whole


def test_a_long_group_min_on_a_gated_pod_update_is_denied_too() -> None:
    old = labelled("2")
    request = parse_review(review(POD, labelled("1" * 6000), operation="UPDATE", old=old))
    decision = validate(request, cluster(), POLICY)
    assert not decision.allowed and decision.code == 422 and "6000 characters" in decision.message


def test_group_min_values() -> None:
    assert group_min_value("1") == 1
    assert group_min_value(str(MAX_GROUP_MIN)) == MAX_GROUP_MIN
    assert group_min_value("0" * 5000 + "7") == 7  # leading zeros do not count as digits
    for bad in ("", "0", "000", str(MAX_GROUP_MIN + 1), "9" * 4301, "1" * 7, "-1", "+1", " 1", "٣", "1e3"):
        assert group_min_value(bad) is None, bad


# ----- namespaces that are paths -------------------------------------------------------------------

@pytest.mark.parametrize("namespace", ["team-a/configmaps/victim", "..", "victim/../kube-system", "Victim",
                                       "victim%2Fconfigmaps", "victim?watch=1", "-victim", "a" * 64])
def test_a_namespace_that_no_namespace_can_have_is_a_malformed_review(namespace: str) -> None:
    document = review(POD, pod("x", namespace="team-a", labels={QUEUE_LABEL: "gpu"}), namespace=namespace)
    with pytest.raises(MalformedReview, match=r"field request\.namespace") as caught:
        parse_review(document)
    assert "not a namespace name" in str(caught.value) and "DNS-1123 label" in str(caught.value)


def test_cluster_scoped_objects_have_no_namespace() -> None:
    document = review(POD, pod("x", namespace=""), namespace="")
    assert parse_review(document).namespace == ""


# ----- a namespace draq does not know ---------------------------------------------------------------

def test_a_pod_in_a_namespace_draq_does_not_know_is_not_let_through_ungated() -> None:
    lookups = cluster()
    obj = pod("x", namespace="fresh", labels={QUEUE_LABEL: "gpu"})
    request = parse_review(review(POD, obj))
    assert mutate(request, lookups).patch == ()  # draq cannot gate what it cannot place
    decision = validate(request, lookups, POLICY)
    assert not decision.allowed and decision.code == 403
    assert "namespace 'fresh' is not known to draq yet" in decision.message
    assert "create the pod again in a moment" in decision.message
    lookups.namespaces["fresh"] = {"draq.io/managed": "true"}
    lookups.with_queue("fresh", "gpu")
    gated = {**obj, "spec": {**obj["spec"], "schedulingGates": [{"name": GATE}]}}
    assert validate(parse_review(review(POD, gated)), lookups, POLICY).allowed


# ----- uid of a body read only in part ------------------------------------------------------------

def api_server_review(uid: str, filler: int) -> bytes:
    """Field order as the API server writes it: the uid first in `request`, the objects later."""
    document = review(POD, pod("x", labels={"big": "x"}), uid=uid)
    document["request"]["object"]["metadata"]["annotations"] = {"blob": "a" * filler}
    return json.dumps(document).encode()


def test_uid_from_prefix_reads_request_uid_only() -> None:
    body = api_server_review('uid-"quoted"-é', 100)
    assert uid_from_prefix(body[:300]) == 'uid-"quoted"-é'
    assert uid_from_prefix(b'{"request": {"object": {"uid": "inner"}, "uid": "outer"') == "outer"
    assert uid_from_prefix(b'{"items": [{"request": {"uid": "nested"}}], "request": {"uid": "top"}}') == "top"
    assert uid_from_prefix(b'{"request": {"uid": 5, "x": "y"}}') == ""
    assert uid_from_prefix(b'[{"request": {"uid": "in-a-list"}}]') == ""
    assert uid_from_prefix(b'{"request": {"uid": "cut-off') == ""
    assert uid_from_prefix(b'{"request": {"object": {"blob": "' + b"a" * 64 * 1024) == ""
    assert uid_from_prefix(b"\xff\xfe not json") == ""
