"""GPU profiles publish slices a DRA driver would: valid pools, counters for partitions."""

from __future__ import annotations

from admission.core.simulate import profiles


def test_h100_node_publishes_eight_gpus_in_one_complete_pool() -> None:
    [rs] = profiles.resource_slices(profiles.PROFILES["h100"], "node-a")
    spec = rs["spec"]
    assert spec["pool"] == {"name": "node-a", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in spec["devices"]] == [f"gpu-{i}" for i in range(8)]
    first = spec["devices"][0]
    assert first["capacity"]["memory"]["value"] == "80Gi"
    assert first["attributes"]["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:10"}
    assert spec["devices"][2]["attributes"]["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:20"}


def test_partitions_consume_their_parents_counters_from_a_counter_slice() -> None:
    slices = profiles.resource_slices(profiles.PROFILES["mi300x"], "node-m", partitions=True)
    counts = {rs["spec"]["pool"]["resourceSliceCount"] for rs in slices}
    assert counts == {len(slices)}
    device_slices = [rs for rs in slices if "devices" in rs["spec"]]
    assert all(len(rs["spec"]["devices"]) <= 64 for rs in device_slices)
    [counter_slice] = [rs for rs in slices if "sharedCounters" in rs["spec"]]
    sets = {s["name"]: s["counters"] for s in counter_slice["spec"]["sharedCounters"]}
    assert len(sets) == 8
    partitions = [d for rs in device_slices for d in rs["spec"]["devices"]
                  if d["attributes"]["type"]["string"] == "amdgpu-partition"]
    assert len(partitions) == 64
    # Eight CPX partitions exactly use up one MI300X: memory and compute units add up.
    per_gpu = [p for p in partitions if p["consumesCounters"][0]["counterSet"] == "gpu-0-counters"]
    assert len(per_gpu) == 8
    assert sum(int(p["consumesCounters"][0]["counters"]["compute"]["value"]) for p in per_gpu) == 304
    assert sets["gpu-0-counters"]["compute"]["value"] == "304"


def test_device_plugin_nodes_also_advertise_the_extended_resource() -> None:
    node = profiles.node_manifest(profiles.PROFILES["a100"], "n", device_plugin=True)
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
    plain = profiles.node_manifest(profiles.PROFILES["a100"], "n")
    assert "nvidia.com/gpu" not in plain["status"]["capacity"]


def test_inventory_names_nodes_after_profiles() -> None:
    objects = profiles.inventory({"h100": 2, "mi300x": 1})
    nodes = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    assert nodes == ["h100-0", "h100-1", "mi300x-0"]
    assert sum(o["kind"] == "DeviceClass" for o in objects) == 4
