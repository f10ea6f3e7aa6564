"""AdmissionReview (`admission.k8s.io/v1`) in, AdmissionReview out: parsing, responses, JSON patches.

Pure: a decoded JSON document goes in, a JSON-ready dict comes out. Anything the API server would
never send (wrong types, missing uid, hostile shapes) is reported as `MalformedReview`, from which
the caller still builds a well-formed denying response.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from admission.core.models import ObjectRef

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
# A namespace name is a DNS-1123 label; the API server never sends another (an object must be in an
# existing namespace to be reviewed).
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

JsonObject = Mapping[str, Any]


class MalformedReview(ValueError):
    """A document that is not a usable AdmissionReview request; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    uid: str
    kind: GroupVersionKind
    resource: str
    sub_resource: str
    operation: str
    namespace: str
    name: str
    username: str
    user_groups: tuple[str, ...]
    object: JsonObject | None
    old_object: JsonObject | None
    dry_run: bool

    def describe(self) -> str:
        """`Pod team-a/train-0`, for messages; the name may be empty at CREATE with generateName."""
        where = f"{self.namespace}/" if self.namespace else ""
        name = self.name or _generate_name(self.object) or "(unnamed)"
        return f"{self.kind.kind} {where}{name}"


@dataclass(frozen=True, slots=True)
class PatchOperation:
    """One RFC 6902 operation; `path` is a list of raw keys, escaped when rendered."""

    op: Literal["add", "replace", "remove", "test"]
    path: tuple[str, ...]
    value: Any = None

    def to_json(self) -> dict[str, Any]:
        rendered: dict[str, Any] = {"op": self.op, "path": json_pointer(self.path)}
        if self.op != "remove":
            rendered["value"] = self.value
        return rendered


@dataclass(frozen=True, slots=True)
class Decision:
    """What a webhook answers: allowed or not, why, and for a mutation the patch to apply."""

    allowed: bool
    message: str = ""
    reason: str = ""
    code: int = 200
    patch: tuple[PatchOperation, ...] = ()
    warnings: tuple[str, ...] = ()
    # Objects the decision needed and the lookups did not have: a cache may simply be behind, so
    # the caller may fetch them and decide again.
    missing: tuple[ObjectRef, ...] = ()

    @staticmethod
    def allow(
        patch: Sequence[PatchOperation] = (),
        warnings: Sequence[str] = (),
        missing: Sequence[ObjectRef] = (),
    ) -> Decision:
        return Decision(True, patch=tuple(patch), warnings=tuple(warnings), missing=tuple(missing))

    @staticmethod
    def deny(
        message: str, reason: str = "Forbidden", code: int = 403, missing: Sequence[ObjectRef] = ()
    ) -> Decision:
        return Decision(False, message=message, reason=reason, code=code, missing=tuple(missing))


def json_pointer(keys: Sequence[str]) -> str:
    """RFC 6901: `~` becomes `~0`, `/` becomes `~1` (label keys such as `draq.io/queue` need it)."""
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in keys)


def parse_review(document: object) -> AdmissionRequest:
    """The request of an AdmissionReview, or `MalformedReview` naming what is wrong with it."""
    if not isinstance(document, Mapping):
        raise MalformedReview("the body is not a JSON object")
    if document.get("kind") != KIND:
        raise MalformedReview(f"kind is {document.get('kind')!r}, expected {KIND!r}")
    if document.get("apiVersion") != API_VERSION:
        raise MalformedReview(f"apiVersion is {document.get('apiVersion')!r}, expected {API_VERSION!r}")
    request = document.get("request")
    if not isinstance(request, Mapping):
        raise MalformedReview("field request is missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview("field request.uid is missing or not a string")
    operation = _string(request, "operation")
    if operation not in OPERATIONS:
        raise MalformedReview(f"field request.operation is {operation!r}, not one of {sorted(OPERATIONS)}")
    namespace = _string(request, "namespace")
    if namespace and not _NAMESPACE.match(namespace):
        raise MalformedReview(f"field request.namespace is {_abridged(namespace)}, which is not a namespace name "
                              "(a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters)")
    user = request.get("userInfo")
    user = user if isinstance(user, Mapping) else {}
    groups = user.get("groups")
    return AdmissionRequest(
        uid=uid,
        kind=_gvk(request.get("kind")),
        resource=_resource(request.get("resource")),
        sub_resource=_string(request, "subResource"),
        operation=operation,
        namespace=namespace,
        name=_string(request, "name"),
        username=_string(user, "username"),
        user_groups=tuple(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else (),
        object=_object(request, "object"),
        old_object=_object(request, "oldObject"),
        dry_run=request.get("dryRun") is True,
    )


def request_uid(document: object) -> str:
    """The uid of whatever came in, best effort, so even a malformed review gets a matching answer."""
    if isinstance(document, Mapping):
        request = document.get("request")
        if isinstance(request, Mapping) and isinstance(request.get("uid"), str):
            return str(request["uid"])
    return ""


# One JSON token after optional whitespace: a complete string, a structural character, or a bare
# scalar (number, true, false, null). Possessive, so a cut-off string fails in linear time.
_JSON_TOKEN = re.compile(
    rb'[ \t\r\n]*+(?:(?P<string>"(?:[^"\\]|\\.)*+")|(?P<mark>[{}\[\],:])|(?P<scalar>[^\s{}\[\],:"]++))')


@dataclass(slots=True)
class _Level:
    """An open object or array while scanning: its key in its parent, and for an object the key read last."""

    is_object: bool
    under: str | None
    key: str | None = None
    wants_key: bool = True


def uid_from_prefix(prefix: bytes) -> str:
    """`request.uid` read from the beginning of a body that was not (or could not be) parsed whole.

    For a body too large to accept: the webhook reads only its beginning and answers with this uid,
    so the API server can match the denial to its request. The API server writes the uid first in
    `request`, so a few hundred bytes hold it. A scan of JSON tokens, not a parser: it stops at the
    first token that is cut off or not JSON, and returns "" when the uid was not found before that.
    """
    levels: list[_Level] = []
    position = 0
    while (match := _JSON_TOKEN.match(prefix, position)) is not None and match.end() > position:
        position = match.end()
        mark, string = match.group("mark"), match.group("string")
        top = levels[-1] if levels else None
        if mark in (b"{", b"["):
            levels.append(_Level(mark == b"{", top.key if top is not None and top.is_object else None))
        elif mark in (b"}", b"]"):
            if not levels:
                return ""
            levels.pop()
        elif mark == b",":
            if top is not None and top.is_object:
                top.key, top.wants_key = None, True
        elif mark == b":":
            if top is not None:
                top.wants_key = False
        elif string is not None and top is not None:
            text = _json_string(string)
            if top.is_object and top.wants_key:
                top.key = text
            elif (text and len(levels) == 2 and levels[0].is_object and top.is_object
                  and top.under == "request" and top.key == "uid"):
                return text
    return ""


def _json_string(token: bytes) -> str | None:
    try:
        decoded = json.loads(token)
    except (ValueError, UnicodeDecodeError):
        return None
    return decoded if isinstance(decoded, str) else None


def render_response(uid: str, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview the API server expects back."""
    response: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if not decision.allowed:
        response["status"] = {
            "code": decision.code,
            "reason": decision.reason,
            "message": decision.message,
        }
    if decision.allowed and decision.patch:
        ops = [op.to_json() for op in decision.patch]
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(ops, separators=(",", ":")).encode()).decode()
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def malformed_response(uid: str, problem: str) -> dict[str, Any]:
    return render_response(uid, Decision.deny(f"malformed AdmissionReview: {problem}", "BadRequest", 400))


def _string(mapping: Mapping[str, Any], key: str) -> str:
    value = mapping.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedReview(f"field request.{key} is not a string")
    return value


def _object(mapping: Mapping[str, Any], key: str) -> JsonObject | None:
    value = mapping.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise MalformedReview(f"field request.{key} is not an object")
    return value


def _gvk(value: object) -> GroupVersionKind:
    if not isinstance(value, Mapping):
        raise MalformedReview("field request.kind is missing or not an object")
    parts = [value.get(key, "") for key in ("group", "version", "kind")]
    if not all(isinstance(part, str) for part in parts):
        raise MalformedReview("field request.kind has a non-string group, version or kind")
    return GroupVersionKind(*parts)


def _resource(value: object) -> str:
    if not isinstance(value, Mapping):
        raise MalformedReview("field request.resource is missing or not an object")
    resource = value.get("resource", "")
    if not isinstance(resource, str):
        raise MalformedReview("field request.resource.resource is not a string")
    return resource


def _abridged(value: str, limit: int = 80) -> str:
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}... ({len(value)} characters)"


def _generate_name(obj: JsonObject | None) -> str:
    metadata = obj.get("metadata") if obj else None
    if isinstance(metadata, Mapping) and isinstance(metadata.get("generateName"), str):
        return f"{metadata['generateName']}*"
    return ""


@dataclass(frozen=True, slots=True)
class ReviewBuilder:
    """Builds AdmissionReview requests (tests, benchmarks, the CLI's dry runs)."""

    kind: GroupVersionKind
    resource: str
    operation: str = "CREATE"
    namespace: str = ""
    username: str = "kubernetes-admin"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def build(
        self, uid: str, obj: JsonObject | None, old: JsonObject | None = None, name: str = ""
    ) -> dict[str, Any]:
        metadata = obj.get("metadata", {}) if obj else {}
        request: dict[str, Any] = {
            "uid": uid,
            "kind": {"group": self.kind.group, "version": self.kind.version, "kind": self.kind.kind},
            "resource": {"group": self.kind.group, "version": self.kind.version, "resource": self.resource},
            "operation": self.operation,
            "namespace": self.namespace,
            "name": name or (metadata.get("name", "") if isinstance(metadata, Mapping) else ""),
            "userInfo": {"username": self.username, "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": old,
            "dryRun": False,
            **self.extra,
        }
        return {"apiVersion": API_VERSION, "kind": KIND, "request": request}
