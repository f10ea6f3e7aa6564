"""The CEL engine for quota units: selectors and per-device weights over `device`."""

from __future__ import annotations

from admission.core.cel import CelCompileError, compile_expression, compile_selector
from admission.core.models import Device, DeviceClass, DeviceSelection
from admission.core.quota.device_values import DeviceNumber, DevicePredicate

_NUMERIC_RESULTS = frozenset({"int", "uint", "double", "dyn", "kubernetes.Quantity"})


class DraCel:
    """Compiles unit selectors as DRA selectors and weights as expressions giving a number."""

    def selector(self, expression: str) -> DevicePredicate:
        program = compile_selector(expression, allow_multiple_allocations=True)
        return program.evaluate

    def number(self, expression: str) -> DeviceNumber:
        compiled = compile_expression(expression, {"device": "device"})
        if str(compiled.result_type) not in _NUMERIC_RESULTS:
            raise CelCompileError(f"compilation failed: a weight must be a number (int, double or "
                                  f"quantity), this expression gives {compiled.result_type}")

        def weigh(device: Device) -> object:
            return compiled.evaluate({"device": device})

        return weigh


def device_selected(device: Device, device_class: DeviceClass, selection: DeviceSelection) -> bool:
    """Whether a device passes the class's selectors, then the (sub)request's (a SelectionFilter).

    Raises CelError for expressions that do not compile or fail on the device, as the allocator does.
    """
    for expression in (*device_class.selectors, *selection.selectors):
        if expression is None:
            raise CelCompileError("CEL expression empty (unsupported selector type?)")
        if not compile_selector(expression, allow_multiple_allocations=True).evaluate(device):
            return False
    return True
