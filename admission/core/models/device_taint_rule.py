"""resource.k8s.io/v1alpha3 DeviceTaintRule (alpha, DRADeviceTaints): one taint added to every device
its selector matches, with the same effect as a taint the driver wrote into the ResourceSlice."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from admission.core.models._fields import Fields
from admission.core.models.meta import ObjectMeta, parse_meta
from admission.core.models.resource_slice import Device, DeviceTaint, ResourceSlice, parse_taint

TAINT_RULE_API = "resource.k8s.io/v1alpha3"


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    meta: ObjectMeta
    taint: DeviceTaint
    # The selector's fields; None matches any value. No selector at all matches no device.
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    selects: bool = True

    @property
    def name(self) -> str:
        return self.meta.name

    def matches(self, device: Device) -> bool:
        return self.selects and all(want is None or want == have for want, have in (
            (self.driver, device.driver), (self.pool, device.pool), (self.device, device.name)))


def parse_device_taint_rule(obj: str, manifest: Fields) -> DeviceTaintRule:
    spec = manifest.map("spec")
    selector = spec.map("deviceSelector")
    for unsupported in ("deviceClassName", "selectors"):
        if selector.has(unsupported):
            raise selector.fail(unsupported, "is not supported (Kubernetes 1.35 selects by driver, pool and "
                                "device only)")
    return DeviceTaintRule(
        meta=parse_meta(obj, manifest, namespaced=False), taint=parse_taint(spec.map("taint")),
        driver=selector.opt_str("driver"), pool=selector.opt_str("pool"), device=selector.opt_str("device"),
        selects=spec.has("deviceSelector"))


def apply_taint_rules(slices: Iterable[ResourceSlice], rules: Iterable[DeviceTaintRule]) -> list[ResourceSlice]:
    """The slices with every rule's taint added to the devices it selects (slices without such devices
    are returned as they are)."""
    rules = list(rules)
    if not rules:
        return list(slices)
    tainted = []
    for item in slices:
        devices = tuple(_with_rules(d, rules) for d in item.devices)
        changed = any(new is not old for new, old in zip(devices, item.devices, strict=True))
        tainted.append(replace(item, devices=devices) if changed else item)
    return tainted


def _with_rules(device: Device, rules: list[DeviceTaintRule]) -> Device:
    extra = tuple(r.taint for r in rules if r.matches(device))
    return replace(device, taints=device.taints + extra) if extra else device
