"""A group's declared shape as the admission cycle takes it: the roles' pod templates parsed as Pods."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from admission.core.errors import InvalidInput
from admission.core.models import DeclaredShape, ObjectRef, Role
from admission.core.models._fields import Fields
from admission.core.models.pod import parse_pod
from admission.core.workloads.membership import Membership


def declared_shape(member: Membership) -> DeclaredShape | None:
    """The shape the group's owners declare, or None when they declare none (or a template does not parse:
    the group is then sized by its pods alone)."""
    top = member.top
    if top is None or not member.roles:
        return None
    roles = []
    for name, template, count in member.roles:
        label = f"{top} role {name} pod template"
        try:
            pod = parse_pod(label, Fields(label, {**template, "metadata": _template_meta(template)}), top.namespace)
        except InvalidInput:
            return None
        roles.append(Role(name, replace(pod, meta=replace(pod.meta, name="")), count))
    return DeclaredShape(ObjectRef(top.kind, top.namespace, top.name), tuple(roles))


def _template_meta(template: Mapping[str, Any]) -> dict[str, Any]:
    """A template has no name; the parser wants one, and the Role's pod gets an empty one after."""
    meta = template.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return {"name": "template", "labels": labels if isinstance(labels, Mapping) else {}}
