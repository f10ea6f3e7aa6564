"""What-if admission: the operator's admission cycle run repeatedly on a simulated cluster (`simulate`),
and the smallest set of added nodes that lets waiting groups run (`plan_nodes`; whole domains of a topology
level when the groups ask for one, `plan_domains`).

Pure: objects in, outcomes out; the clock is the snapshot's start time, passed in. `SimulatedCluster`
holds the simulated cluster's objects (each cycle's `CycleInput` is built from it), `submit` turns Jobs
and pods into what the cluster holds after the Job controller and draq's mutating webhook, `load`
parses manifests (files or a live listing) into a `SimulatedCluster` and `merged` puts changes on top,
`declared_run_times` reads the `draq.io/run-time` annotations.
"""

from admission.core.labels import RUN_TIME_ANNOTATION
from admission.core.simulate.cluster import SimulatedCluster
from admission.core.simulate.domains import DomainsToAdd, plan_domains
from admission.core.simulate.engine import (
    DEFAULT_RUN_TIME,
    Progress,
    ProgressHook,
    SimulationSettings,
    run_time,
    simulate,
)
from admission.core.simulate.inputs import Loaded, load, merged
from admission.core.simulate.plan import NodeMaker, NodesToAdd, plan_nodes
from admission.core.simulate.profiles import (
    BLOCK_LABEL,
    CLIQUE_ATTRIBUTE,
    CLIQUE_LABEL,
    PROFILES,
    RACK_LABEL,
    RACK_PROFILES,
    GpuProfile,
    Location,
    RackNode,
    RackProfile,
    device_classes,
    node_manifest,
    rack_nodes,
    resource_slices,
)
from admission.core.simulate.results import ClaimDevices, Fate, GroupOutcome, SimulationResult, render_table
from admission.core.simulate.workloads import (
    declared_run_times,
    format_duration,
    job_pods,
    parse_duration,
    submit,
)

__all__ = [
    "BLOCK_LABEL",
    "CLIQUE_ATTRIBUTE",
    "CLIQUE_LABEL",
    "DEFAULT_RUN_TIME",
    "PROFILES",
    "RACK_LABEL",
    "RACK_PROFILES",
    "RUN_TIME_ANNOTATION",
    "ClaimDevices",
    "DomainsToAdd",
    "Fate",
    "GpuProfile",
    "GroupOutcome",
    "Loaded",
    "Location",
    "NodeMaker",
    "NodesToAdd",
    "Progress",
    "ProgressHook",
    "RackNode",
    "RackProfile",
    "SimulatedCluster",
    "SimulationResult",
    "SimulationSettings",
    "declared_run_times",
    "device_classes",
    "format_duration",
    "job_pods",
    "load",
    "merged",
    "node_manifest",
    "parse_duration",
    "plan_domains",
    "plan_nodes",
    "rack_nodes",
    "render_table",
    "resource_slices",
    "run_time",
    "simulate",
    "submit",
]
