"""Object metadata shared by every model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from admission.core.models._fields import Fields, empty_map


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """One object's identity: kind, namespace (empty for cluster-scoped kinds) and name. The one key for
    objects across the operator and the core (`Kind namespace/name` as text)."""

    kind: str
    namespace: str
    name: str

    @staticmethod
    def of(kind: str, key: str) -> ObjectRef:
        """From a `namespace/name` key, or a bare name for cluster-scoped kinds."""
        namespace, _, name = key.rpartition("/")
        return ObjectRef(kind, namespace, name)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    name: str
    namespace: str = ""
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=empty_map)
    annotations: Mapping[str, str] = field(default_factory=empty_map)
    creation_timestamp: str = ""
    generation: int = 0
    controller: tuple[str, str] | None = None  # (kind, name) of the owner reference with controller: true
    # `namespace/name`, or `name` for cluster-scoped objects; made once, as it is read very often.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}" if self.namespace else self.name)


class Named:
    """`name`, `namespace` and `key` of a model, read from its `meta`."""

    __slots__ = ()
    meta: ObjectMeta

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def key(self) -> str:
        return self.meta.key


def object_label(kind: str, manifest: Mapping[str, object]) -> str:
    """`Kind namespace/name` (or `Kind name`) for error messages, robust against broken metadata."""
    meta = manifest.get("metadata")
    name = namespace = ""
    if isinstance(meta, Mapping):
        name = meta.get("name") if isinstance(meta.get("name"), str) else ""  # type: ignore[assignment]
        namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""  # type: ignore[assignment]
    ident = f"{namespace}/{name}" if namespace else name
    return f"{kind} {ident or '(unnamed)'}"


def parse_meta(obj: str, manifest: Fields, *, namespaced: bool, default_namespace: str = "") -> ObjectMeta:
    meta = manifest.map("metadata")
    name = meta.str("name", required=True)
    namespace = meta.str("namespace") if namespaced else ""
    timestamp = meta.raw("creationTimestamp")
    return ObjectMeta(
        name=name,
        namespace=namespace or (default_namespace if namespaced else ""),
        uid=meta.str("uid"),
        labels=meta.str_map("labels"),
        annotations=meta.str_map("annotations"),
        creation_timestamp=str(timestamp) if timestamp is not None else "",
        generation=meta.int("generation"),
        controller=_controller(meta),
    )


def _controller(meta: Fields) -> tuple[str, str] | None:
    for owner in meta.maps("ownerReferences"):
        if owner.bool("controller"):
            return owner.str("kind"), owner.str("name")
    return None
