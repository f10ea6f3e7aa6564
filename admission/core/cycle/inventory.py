"""The devices each node can use, as charging sees them, kept from one snapshot to the next."""

from __future__ import annotations

from dataclasses import dataclass

from admission.core.allocator import Snapshot, SnapshotInventory
from admission.core.features import FeatureGates
from admission.core.models import Device
from admission.core.quota import Inventory


def charging_inventory(snapshot: Snapshot, gates: FeatureGates) -> Inventory:
    """The devices each node can use, as charging sees them: built once per inventory index, and from
    the previous index's for the nodes whose view did not change."""
    held: _ChargingInventory = snapshot.inventory.derived(("charging inventory", gates), _ChargingInventory)
    if held.inventory is None:
        held.inventory = held.build(snapshot, gates)
        held.stale, held.changed = None, None
    return held.inventory


@dataclass(slots=True)
class _ChargingInventory:
    inventory: Inventory | None = None
    stale: Inventory | None = None  # the previous index's, for the nodes outside `changed`
    changed: set[str] | None = None

    def carried(self, index: SnapshotInventory, changed_devices: set[str]) -> _ChargingInventory:
        base = self.inventory or self.stale
        nodes = index.changed_nodes
        if base is None or nodes is None or (self.inventory is None and self.changed is None):
            return _ChargingInventory()
        return _ChargingInventory(None, base, nodes if self.inventory is not None else nodes | (self.changed or set()))

    def build(self, snapshot: Snapshot, gates: FeatureGates) -> Inventory:
        index, nodes = snapshot.inventory, snapshot.nodes
        if self.stale is None or self.changed is None:
            devices: dict[str, tuple[Device, ...]] = {
                name: index.node_view(node, gates).devices for name, node in nodes.items()}
            return Inventory.of(index.classes.values(), devices, nodes.values())
        stale, changed = self.stale, self.changed
        fresh = Inventory.of((), {}, (nodes[name] for name in changed if name in nodes))
        if nodes.keys() == stale.devices_by_node.keys() == stale.extended_by_node.keys():
            # The same nodes in the same order: copy, and replace the changed ones.
            by_node, extended = dict(stale.devices_by_node), dict(stale.extended_by_node)
            for name in changed:
                if name in nodes:
                    by_node[name] = index.node_view(nodes[name], gates).devices
                    extended[name] = fresh.extended_by_node[name]
        else:
            by_node = {name: index.node_view(node, gates).devices
                       if name in changed or name not in stale.devices_by_node else stale.devices_by_node[name]
                       for name, node in nodes.items()}
            extended = {name: fresh.extended_by_node[name] if name in changed or name not in stale.extended_by_node
                        else stale.extended_by_node[name] for name in nodes}
        same_ids = all(name in stale.devices_by_node and name in by_node
                       and [d.id for d in by_node[name]] == [d.id for d in stale.devices_by_node[name]]
                       for name in changed) and by_node.keys() == stale.devices_by_node.keys()
        if same_ids:  # the same devices in the same places: only the changed nodes' objects are new
            by_id = dict(stale.devices_by_id)
            for name in changed:
                for device in by_node[name]:
                    by_id[device.id] = device
        else:
            by_id = {d.id: d for devices in by_node.values() for d in devices}
        return Inventory(stale.device_classes, by_node, extended, by_id)
