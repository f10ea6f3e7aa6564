"""AdmissionReview parsing and rendering."""

from __future__ import annotations

import base64
import json

import pytest

from admission.core.review.envelope import (
    Decision,
    MalformedReview,
    PatchOperation,
    json_pointer,
    malformed_response,
    parse_review,
    render_response,
    request_uid,
)

from .builders import POD, pod, review


def test_parse_reads_every_field() -> None:
    document = review(POD, pod("train-0"), username="bob", uid="u-1")
    request = parse_review(document)
    assert (request.uid, request.operation, request.namespace, request.name) == ("u-1", "CREATE", "team-a",
                                                                                 "train-0")
    assert request.kind == POD and request.resource == "pods" and request.username == "bob"
    assert request.object is not None and request.object["metadata"]["name"] == "train-0"
    assert request.describe() == "Pod team-a/train-0"


def test_describe_uses_generate_name_when_the_name_is_not_known_yet() -> None:
    request = parse_review(review(POD, pod("", generate_name="train-")))
    assert request.describe() == "Pod team-a/train-*"


@pytest.mark.parametrize(
    ("mutilate", "problem"),
    [
        (lambda d: d.pop("request"), "request is missing"),
        (lambda d: d.update(kind="Pod"), "kind is 'Pod'"),
        (lambda d: d.update(apiVersion="admission.k8s.io/v1beta1"), "apiVersion"),
        (lambda d: d["request"].pop("uid"), "request.uid"),
        (lambda d: d["request"].update(operation="PATCH"), "request.operation"),
        (lambda d: d["request"].update(object=[1, 2]), "request.object is not an object"),
        (lambda d: d["request"].update(namespace=7), "request.namespace is not a string"),
        (lambda d: d["request"].update(kind="Pod"), "request.kind"),
        (lambda d: d["request"].update(resource={"resource": 3}), "request.resource.resource"),
    ],
)
def test_malformed_reviews_are_named(mutilate, problem: str) -> None:  # type: ignore[no-untyped-def]
    document = review(POD, pod())
    mutilate(document)
    with pytest.raises(MalformedReview, match=problem.replace(".", r"\.")):
        parse_review(document)


def test_request_uid_is_best_effort() -> None:
    assert request_uid({"request": {"uid": "abc"}}) == "abc"
    assert request_uid({"request": {"uid": 5}}) == ""
    assert request_uid([]) == ""


def test_denial_carries_status() -> None:
    rendered = render_response("u", Decision.deny("no such queue", "NotFound", 404))
    assert rendered["apiVersion"] == "admission.k8s.io/v1" and rendered["kind"] == "AdmissionReview"
    assert rendered["response"] == {
        "uid": "u", "allowed": False, "status": {"code": 404, "reason": "NotFound", "message": "no such queue"}
    }


def test_patch_is_base64_json_patch_with_escaped_pointers() -> None:
    decision = Decision.allow([PatchOperation("add", ("metadata", "labels", "draq.io/queue"), "gpu")])
    response = render_response("u", decision)["response"]
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    assert ops == [{"op": "add", "path": "/metadata/labels/draq.io~1queue", "value": "gpu"}]


def test_json_pointer_escapes_tilde_before_slash() -> None:
    assert json_pointer(["a~/b", "-"]) == "/a~0~1b/-"


def test_malformed_response_denies_with_400() -> None:
    response = malformed_response("", "the body is not JSON")["response"]
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert "the body is not JSON" in response["status"]["message"]


def test_warnings_are_passed_on() -> None:
    response = render_response("u", Decision.allow(warnings=["careful"]))["response"]
    assert response["warnings"] == ["careful"] and "patch" not in response
