"""Reconciliation: the recorded charge against what the claims were really allocated."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from admission.core.quota.amounts import Amounts, format_amount
from admission.core.quota.charging import ChargeResult


@dataclass(frozen=True, slots=True)
class Difference:
    unit: str
    charged: Fraction
    allocated: Fraction

    @property
    def delta(self) -> Fraction:
        """Positive: the group holds more than it was charged."""
        return self.allocated - self.charged

    def describe(self) -> str:
        return (f"{self.unit}: charged {format_amount(self.charged)}, allocated "
                f"{format_amount(self.allocated)}")


@dataclass(frozen=True, slots=True)
class Reconciliation:
    differences: tuple[Difference, ...]
    # Claims not allocated yet: their part of the comparison is still open.
    unallocated: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        return not self.differences and not self.unallocated

    @property
    def complete(self) -> bool:
        return not self.unallocated

    def describe(self) -> str:
        if self.agrees:
            return "charge matches the allocations"
        parts = [d.describe() for d in self.differences]
        if self.unallocated:
            parts.append("not allocated yet: " + ", ".join(self.unallocated))
        return "; ".join(parts)


def reconcile(recorded: Amounts, allocated: ChargeResult) -> Reconciliation:
    """Every unit where the recorded charge and the real allocations differ; none is dropped.

    `allocated` is `charge_group(..., allocated_only=True)` over the claims as they are now.
    """
    units = sorted(set(recorded.units) | set(allocated.total.units))
    differences = tuple(Difference(u, recorded.get(u), allocated.total.get(u)) for u in units
                        if recorded.get(u) != allocated.total.get(u))
    return Reconciliation(differences, allocated.unallocated)
