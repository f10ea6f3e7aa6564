"""Declared shapes in the cycle: which member fills which role, and placeholders for the members not created yet.

A group whose owner's spec is known (`GroupView.declared`) is admitted for its whole declared shape: every
role's `count` members, the existing ones as themselves and the others as placeholder pods built from the
role's template and named after their slot (`<role>#<index>`, which no pod name can be). The plan records
one slot per declared member; a member created later takes an open slot of its role when it matches the
role's template.

A pod matches a template when it needs exactly the room the template was given: the same containers and
init containers, in order, with the same requests and limits; the same pod-level resources and overhead;
the same claims (entry names, each naming the same ResourceClaim or the same ResourceClaimTemplate); and
the same node constraints (node selector, required node affinity, tolerations, `spec.nodeName`). Names,
labels, annotations and images do not count, nor does the order of tolerations; the not-ready and
unreachable `NoExecute` tolerations the API server adds to every pod that has none
(`DefaultTolerationSeconds`) count as present in a template, which the API server never admitted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from admission.core.cycle.groups import GroupView
from admission.core.models import DeclaredShape, Pod, Role, Toleration
from admission.core.quota import Slot


@dataclass(frozen=True, slots=True)
class Gang:
    """The members a group is placed and charged for: its pods, plus a placeholder for every declared member
    not created yet. `slots` pairs each declared member's slot (node not chosen yet) with the pod standing
    in it: a member that matched its role, or a placeholder."""

    pods: tuple[Pod, ...]
    slots: tuple[tuple[Slot, Pod], ...] = ()


def gang_of(group: GroupView) -> Gang:
    """The group's members; for a declared shape, with placeholders for the members not created yet."""
    if group.declared is None:
        return Gang(group.pods)
    slots = _fill(group.declared, group.namespace, group.pods)
    placeholders = tuple(pod for slot, pod in slots if slot.open)
    return Gang(group.pods + placeholders, slots)


def _fill(shape: DeclaredShape, namespace: str, pods: Sequence[Pod]) -> tuple[tuple[Slot, Pod], ...]:
    """Every declared member's slot with its pod: the existing pods in name order take the first slots of
    the role they match; the slots left get placeholders."""
    free = list(pods)
    slots: list[tuple[Slot, Pod]] = []
    for role in shape.roles:
        for index in range(role.count):
            pod = next((p for p in free if matches(p, role.template)), None)
            if pod is None:
                slot = Slot(role.name, index, "")
                slots.append((slot, placeholder(role, slot, namespace)))
            else:
                free.remove(pod)
                slots.append((Slot(role.name, index, "", pod.name), pod))
    return _taken_by_others(slots, free)


def _taken_by_others(slots: list[tuple[Slot, Pod]], unmatched: Sequence[Pod]) -> tuple[tuple[Slot, Pod], ...]:
    """Existing members that match no role (an admission plugin changed their requests, say) still count as
    declared members: each closes an open slot, from the last, and is placed as itself, so the group is never
    given room for more members than its owner declares."""
    taken = list(slots)
    for pod in sorted(unmatched, key=lambda p: p.name):
        at = next((i for i in range(len(taken) - 1, -1, -1) if taken[i][0].open), None)
        if at is None:
            break
        slot = taken[at][0]
        taken[at] = (Slot(slot.role, slot.index, "", pod.name), pod)
    return tuple(taken)


def placeholder(role: Role, slot: Slot, namespace: str) -> Pod:
    """The role's template standing in for the member of `slot`, in the group's namespace."""
    template = role.template
    meta = dataclasses.replace(template.meta, name=slot.name, namespace=namespace)
    return dataclasses.replace(template, meta=meta, scheduling_gates=(), resource_claim_statuses=(), phase="")


def matches(pod: Pod, template: Pod) -> bool:
    """Does `pod` need exactly the room `template` was given (see the module's docstring)?"""
    return _needs(pod) == _needs(template)


def _needs(pod: Pod) -> tuple[object, ...]:
    return (
        tuple((c.requests, c.limits, c.restart_policy) for c in pod.containers),
        tuple((c.requests, c.limits, c.restart_policy) for c in pod.init_containers),
        pod.resources, pod.overhead,
        tuple((e.name, e.resource_claim_name, e.resource_claim_template_name) for e in pod.resource_claims),
        pod.node_selector, pod.node_affinity, _admitted_tolerations(pod.tolerations), pod.node_name,
    )


_NOT_READY, _UNREACHABLE = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"
_NO_EXECUTE, _EXISTS = "NoExecute", "Exists"


def _admitted_tolerations(tolerations: Iterable[Toleration]) -> frozenset[Toleration]:
    """Tolerations as the API server stores them: with a not-ready and an unreachable `NoExecute` toleration
    added where none covers that key and effect (its `DefaultTolerationSeconds` plugin; the seconds do not
    change where a pod may be placed)."""
    own = frozenset(tolerations)
    added = {Toleration(key, _EXISTS, "", _NO_EXECUTE) for key in (_NOT_READY, _UNREACHABLE)
             if not any(t.key in ("", key) and t.effect in ("", _NO_EXECUTE) for t in own)}
    return own | added


def role_template(shape: DeclaredShape | None, role: str) -> Pod | None:
    if shape is None:
        return None
    return next((r.template for r in shape.roles if r.name == role), None)


def open_slot_pods(group: GroupView) -> tuple[tuple[str, Pod], ...]:
    """An admitted group's open slots as (node, placeholder) pairs: the room they hold. Empty when the group's
    shape is no longer declared (its template unknown) or for a slot whose role it no longer has."""
    if group.pod_group is None or group.declared is None:
        return ()
    roles = {role.name: role for role in group.declared.roles}
    return tuple((slot.node, placeholder(roles[slot.role], slot, group.namespace))
                 for slot in group.pod_group.plan.open_slots if slot.role in roles and slot.node)


def take_slots(open_slots: Iterable[Slot], shape: DeclaredShape | None,
               pods: Sequence[Pod]) -> tuple[tuple[tuple[Pod, Slot], ...], tuple[Pod, ...]]:
    """Late members that take an open slot of a role they match (each slot once, lowest index first), and
    the members that take none."""
    free = list(open_slots)
    taken: list[tuple[Pod, Slot]] = []
    rest: list[Pod] = []
    for pod in pods:
        slot = next((s for s in free if (t := role_template(shape, s.role)) is not None and matches(pod, t)), None)
        if slot is None:
            rest.append(pod)
        else:
            free.remove(slot)
            taken.append((pod, slot))
    return tuple(taken), tuple(rest)
