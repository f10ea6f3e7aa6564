"""core/v1 node taints and pod tolerations (not DRA device taints: those are in resource_slice/resource_claim)."""

from __future__ import annotations

from dataclasses import dataclass

from admission.core.models._fields import Fields

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
EQUAL = "Equal"
EXISTS = "Exists"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE

    def describe(self) -> str:
        """`{key: value}`, as the scheduler names an untolerated taint."""
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration. An empty `key` with `Exists` matches every key; an empty `effect` every effect."""

    key: str = ""
    operator: str = EQUAL
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == EXISTS:
            return True
        if self.operator == EQUAL:
            return self.value == taint.value
        return False  # an operator this version does not know tolerates nothing


def parse_taint(fields: Fields) -> Taint:
    return Taint(fields.str("key", required=True), fields.str("value"), fields.str("effect", required=True))


def parse_toleration(fields: Fields) -> Toleration:
    # The API server stores an empty operator as given; it means Equal.
    return Toleration(fields.str("key"), fields.str("operator") or EQUAL, fields.str("value"), fields.str("effect"))
