"""Nodes that offer the same hardware twice: through a device plugin (an extended resource in the node's
allocatable) and through ResourceSlices of their own (DRA). Each path can hand out every device, so
the cluster's capacity is overstated by the smaller of the two."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction

from admission.core.errors import DraqError
from admission.core.gaps.inputs import GapInput
from admission.core.gaps.report import Gap, GapKind, measured
from admission.core.models import Device, DeviceClass, DeviceSelection, Node
from admission.core.quota import CompiledUnit, Counting, device_value, extended_resource_class

_SELECTION = "offered"


@dataclass
class DoubleOffers:
    data: GapInput
    notes: list[str] = field(default_factory=list)

    def gaps(self) -> list[Gap]:
        found: list[Gap] = []
        for node in sorted(self.data.snapshot.nodes.values(), key=lambda n: n.name):
            devices = self._local_devices(node)
            if devices and node.allocatable:
                found += self._node_gaps(node, devices)
        return found

    def _node_gaps(self, node: Node, devices: tuple[Device, ...]) -> list[Gap]:
        found, covered = [], set()
        for unit in self.data.units:
            for extended in unit.unit.extended_resources if unit.unit.counting is not Counting.CORE else ():
                offered = node.allocatable.get(extended.name)
                if offered is None or offered.value <= 0:
                    continue
                covered.add(extended.name)
                plugin = offered.value * extended.counts_as
                dra, used = self._unit_value(node, unit, devices)
                if plugin > 0 and dra > 0:
                    found.append(self._gap(node, unit.name, extended.name, offered.value, plugin, dra, used))
        for resource, device_class in self._served(node, covered):
            matching = self._matching(node, device_class, devices)
            if matching:
                amount = node.allocatable[resource].value
                found.append(self._gap(node, resource, resource, amount, amount, Fraction(len(matching)), matching))
        return found

    def _local_devices(self, node: Node) -> tuple[Device, ...]:
        """Devices published for this node alone (a slice's or a device's nodeName)."""
        index = self.data.snapshot.inventory
        view = index.node_view(node, self.data.gates)

        def local(device: Device) -> bool:
            found = index.slice_of.get((device.driver, device.pool, device.slice_name))
            return device.node_name == node.name or (found is not None and found.node_name == node.name)
        return tuple(d for d in view.devices if local(d))

    def _unit_value(self, node: Node, unit: CompiledUnit, devices: tuple[Device, ...]) -> tuple[Fraction, list[Device]]:
        total, used = Fraction(0), []
        for device in devices:
            for class_name in unit.unit.device_class_names:
                device_class = self.data.snapshot.inventory.classes.get(class_name)
                if device_class is not None and self._selects(node, device_class, device):
                    total += self._value(node, unit, device, class_name)
                    used.append(device)
                    break
        return total, used

    def _value(self, node: Node, unit: CompiledUnit, device: Device, class_name: str) -> Fraction:
        try:
            return device_value(unit, device, DeviceSelection(_SELECTION, class_name))
        except DraqError as err:
            self.notes.append(f"node {node.name}, device {device.id}: not valued in {unit.unit.label}: {err}")
            return Fraction(0)

    def _served(self, node: Node, covered: set[str]) -> Iterable[tuple[str, DeviceClass]]:
        """Extended resources in the node's allocatable that a DeviceClass serves and no unit lists."""
        classes = tuple(self.data.snapshot.inventory.classes.values())
        for resource, amount in sorted(node.allocatable.items()):
            if resource in covered or amount.value <= 0:
                continue
            device_class = extended_resource_class(resource, classes)
            if device_class is not None:
                yield resource, device_class

    def _matching(self, node: Node, device_class: DeviceClass, devices: tuple[Device, ...]) -> list[Device]:
        return [d for d in devices if self._selects(node, device_class, d)]

    def _selects(self, node: Node, device_class: DeviceClass, device: Device) -> bool:
        try:
            return self.data.matches(device, device_class, DeviceSelection(_SELECTION, device_class.name))
        except DraqError as err:
            self.notes.append(f"node {node.name}, device {device.id}: DeviceClass {device_class.name} cannot "
                              f"select it: {err}")
            return False

    def _gap(self, node: Node, measure: str, resource: str, offered: Fraction, plugin: Fraction, dra: Fraction,
             devices: list[Device]) -> Gap:
        size = min(plugin, dra)
        in_unit = "" if measure == resource else f" ({measured(measure, plugin)})"
        message = (f"node {node.name} offers {measured(resource, offered)} through a device plugin{in_unit} and "
                   f"{len(devices)} devices ({measured(measure, dra)}) through ResourceSlices: the same hardware can "
                   f"be handed out twice, {measured(measure, size)} of capacity are counted twice")
        slices = sorted({d.slice_name for d in devices})
        return Gap(GapKind.DOUBLE_OFFERED, measure, size, message, node=node.name,
                   objects=(f"Node {node.name}", *(f"ResourceSlice {s}" for s in slices)))

