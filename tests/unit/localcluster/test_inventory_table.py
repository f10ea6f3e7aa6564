"""The demo's device table prints memory exactly, with GiB beside it when the exact unit is small."""

from __future__ import annotations

from fractions import Fraction

from admission.core.quantity import parse_quantity
from admission.localcluster.inventory import NodeDevices, format_device_table, memory_text


def test_memory_is_exact_and_readable() -> None:
    assert memory_text(8 * parse_quantity("196592Mi").value) == "1572736Mi (1535.9Gi)"
    assert memory_text(8 * parse_quantity("192Gi").value) == "1536Gi"
    assert memory_text(8 * parse_quantity("80Gi").value) == "640Gi"
    assert memory_text(Fraction(0)) == "0"


def test_the_table_uses_it() -> None:
    row = NodeDevices("node-a", "gpu.amd.com", 8, {"AMD_Instinct_MI300X_OAM"}, 8 * parse_quantity("196592Mi").value)
    assert "1572736Mi (1535.9Gi)" in format_device_table([row])
