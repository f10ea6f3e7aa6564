"""`Usage.within`: the usage cut down to the devices some nodes see (and their pools) answers allocations on
those nodes as the whole usage does; random usages of node GPUs, partitions sharing their pool's counters and a
network pool every node sees."""

from __future__ import annotations

import random

from admission.core.allocator import Allocator, Usage
from admission.core.features import exactly as gates_exactly
from admission.core.models import AllocationResult, DeviceAllocation
from tests.support.builders import claim, device, device_class, exactly, model, node, resource_slice
from tests.unit.allocator.builders import allocator

NODES = ("n0", "n1", "n2")


def _cluster() -> Allocator:
    manifests = [device_class("gpu")]
    for name in NODES:
        manifests.append(node(name))
        manifests.append(resource_slice(name, *(device(f"gpu-{i}") for i in range(4)), name=f"{name}-gpus"))
        manifests.append(resource_slice(name, *(device(f"part-{i}", consumes={"mem": {"memory": "40Gi"}})
                                                for i in range(4)), name=f"{name}-parts", pool=f"{name}-parts",
                                        counters={"mem": {"memory": "80Gi"}}))
    manifests.append(resource_slice(None, *(device(f"net-{i}") for i in range(4)), name="net", pool="net",
                                    allNodes=True))
    return allocator(*manifests, gates=gates_exactly("1.36", ["DRAPartitionableDevices"]))


def _random_usage(rng: random.Random, alloc: Allocator) -> Usage:
    devices = sorted({d.id for n in NODES for d in alloc.view(n).devices})
    usage = Usage()
    for device_id in rng.sample(devices, rng.randint(0, len(devices) // 2)):
        driver, pool, name = device_id.rsplit("/", 2)
        usage.add(AllocationResult((DeviceAllocation("gpus", driver, pool, name),)), alloc.gates)
    return usage


def test_an_allocation_on_the_nodes_kept_is_answered_alike() -> None:
    alloc = _cluster()
    allocated = smaller = 0
    for seed in range(60):
        rng = random.Random(seed)
        usage = _random_usage(rng, alloc)
        for name in NODES:
            seen = alloc.view(name).devices
            within = usage.within({d.id for d in seen}, {f"{d.driver}/{d.pool}" for d in seen})
            smaller += len(within.exclusive) < len(usage.exclusive)
            for count in (1, 2, 4, 6):
                wanted = model(claim(f"c{count}", exactly("gpus", count=count)))
                whole, cut = alloc.allocate(name, [wanted], usage), alloc.allocate(name, [wanted], within)
                assert (whole.status, whole.allocations) == (cut.status, cut.allocations), (seed, name, count)
                allocated += whole.allocatable
    # Some allocations succeed and some cut usages leave devices out, so the comparison is not vacuous.
    assert allocated and smaller
