"""Random but realistic gang trials for the group-level differential test.

A trial is a handful of GPU nodes of 8 GPUs (some tainted, some short of cpu, some fragmented by
unmanaged pods that hold part of their GPUs, some full) and a handful of gated groups of
MIN_MEMBERS–MAX_MEMBERS members with GPU templates or a shared claim, cpu/memory requests that do and do
not fit, tolerations and zone affinity, and inter-pod placement: required anti-affinity between
members, topology spread (DoNotSchedule) over nodes or racks, members affine to each other in one
rack, and JobSet's exclusive placement (affinity to the own job, anti-affinity to other jobs, per
rack). Some groups have roles: a JobSet-shaped group's first member is a launcher without GPUs, an
LWS-shaped group's a leader with fewer GPUs than its workers. Racks (`draq.io/rack`) are the trial's
own, two nodes each. Everything of a trial carries its id (node label `draq.io/trial`, pods select it),
so trials never see each other's nodes. With `native` (a gang API), every member also names its group's
native gang with that API's pod field (`spec.workloadRef` or `spec.schedulingGroup`), as the mutating
webhook sets it where the cluster serves native gang scheduling.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from admission.core.labels import GATE, GROUP_LABEL, GROUP_MIN_LABEL, QUEUE_LABEL
from admission.core.native_gangs import GangApi, pod_reference

GPU_CLASS = "gpu.nvidia.com"
TRIAL_LABEL = "draq.io/trial"
ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "draq.io/rack"
HOSTNAME_LABEL = "kubernetes.io/hostname"
JOB_KEY = "jobset.sigs.k8s.io/job-key"  # what JobSet's exclusive placement selects on
# A group's inter-pod placement: None (most groups), or one of these.
PLACEMENTS = ("anti-host", "spread-host", "spread-rack", "together-rack", "exclusive-rack")
# A group's roles: None (every member alike), a JobSet's launcher and workers, or an LWS leader and workers.
SHAPES = ("jobset", "lws")
TAINT = {"key": "dedicated", "value": "training", "effect": "NoSchedule"}
MIN_MEMBERS, MAX_MEMBERS = 2, 8
NODE_GPUS = 8  # the h100 profile
# GPUs an unmanaged pod holds on a node before the groups arrive: free, fragmented, or full.
FILLER_GPUS = (0, 0, 2, 3, 5, 7, NODE_GPUS)


@dataclass
class TrialNode:
    name: str
    zone: str
    rack: str
    cpu: str
    tainted: bool
    filler_gpus: int  # GPUs held by an unmanaged pod before the groups arrive


@dataclass
class TrialGroup:
    name: str
    size: int
    gpus: int  # per member (or of the shared claim)
    cpu: str
    memory: str
    tolerates: bool
    zone: str | None
    shared: bool  # all members use one claim instead of one each
    placement: str | None = None  # one of PLACEMENTS
    max_skew: int = 1
    min_domains: int | None = None
    # A first member of another template, as workload controllers make them: a JobSet's launcher (cpu only)
    # or a LeaderWorkerSet's leader (fewer GPUs than its workers). None: every member alike.
    shape: str | None = None  # one of SHAPES
    leader_gpus: int = 0
    leader_cpu: str = "2"

    def manifests(self, namespace: str, trial: str, native: GangApi | None = None) -> list[dict[str, Any]]:
        request = {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": self.gpus}}
        if self.shared:
            holder: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                      "metadata": {"name": f"{self.name}-shared", "namespace": namespace},
                                      "spec": {"devices": {"requests": [request]}}}
            entry = {"name": "gpus", "resourceClaimName": f"{self.name}-shared"}
        else:
            holder = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                      "metadata": {"name": f"{self.name}-gpus", "namespace": namespace},
                      "spec": {"spec": {"devices": {"requests": [request]}}}}
            entry = {"name": "gpus", "resourceClaimTemplateName": f"{self.name}-gpus"}
        pods = [self._pod(namespace, trial, i, entry, native) for i in range(self.size)]
        if self.shape is None:
            return [holder, *pods]
        return [holder, *self._leader(namespace, pods[0]), *pods[1:]]

    def _leader(self, namespace: str, pod: dict[str, Any]) -> list[dict[str, Any]]:
        """Member 0 as the shape's launcher or leader: its own requests, its own claim or none."""
        container = pod["spec"]["containers"][0]
        container["resources"]["requests"]["cpu"] = self.leader_cpu
        pod["metadata"]["labels"]["draq.io/role"] = "leader"
        if not self.leader_gpus:
            del container["resources"]["claims"], pod["spec"]["resourceClaims"]
            return [pod]
        name = f"{self.name}-leader-gpus"
        request = {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": self.leader_gpus}}
        pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": name}]
        return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": name, "namespace": namespace},
                 "spec": {"spec": {"devices": {"requests": [request]}}}}, pod]

    @property
    def members(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(self.size)]

    def _pod(self, namespace: str, trial: str, index: int, entry: dict[str, str],
             native: GangApi | None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulingGates": [{"name": GATE}], "nodeSelector": {TRIAL_LABEL: trial},
            "containers": [{"name": "main", "image": "registry.example/train:1",
                            "resources": {"requests": {"cpu": self.cpu, "memory": self.memory},
                                          "claims": [{"name": "gpus"}]}}],
            "resourceClaims": [entry]}
        if native is not None:
            spec[native.pod_field] = pod_reference(native, self.name)
        if self.tolerates:
            spec["tolerations"] = [{"key": TAINT["key"], "operator": "Equal", "value": TAINT["value"],
                                    "effect": TAINT["effect"]}]
        if self.zone is not None:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": ZONE_LABEL, "operator": "In", "values": [self.zone]}]}]}}}
        self._place(spec)
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{self.name}-{index}", "namespace": namespace,
                             "labels": {QUEUE_LABEL: "lq", GROUP_LABEL: self.name, GROUP_MIN_LABEL: str(self.size),
                                        JOB_KEY: self.name}},
                "spec": spec}

    def _place(self, spec: dict[str, Any]) -> None:
        """The inter-pod constraints of `placement`, as workload controllers write them."""
        own = {"matchLabels": {GROUP_LABEL: self.name}}
        affinity = spec.setdefault("affinity", {})
        if self.placement == "anti-host":
            affinity["podAntiAffinity"] = _required(own, HOSTNAME_LABEL)
        elif self.placement == "together-rack":
            affinity["podAffinity"] = _required(own, RACK_LABEL)
        elif self.placement == "exclusive-rack":  # JobSet's webhook, for alpha.jobset.sigs.k8s.io/exclusive-topology
            affinity["podAffinity"] = _required(
                {"matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [self.name]}]}, RACK_LABEL)
            affinity["podAntiAffinity"] = _required(
                {"matchExpressions": [{"key": JOB_KEY, "operator": "Exists"},
                                      {"key": JOB_KEY, "operator": "NotIn", "values": [self.name]}]}, RACK_LABEL)
        elif self.placement in ("spread-host", "spread-rack"):
            constraint: dict[str, Any] = {
                "maxSkew": self.max_skew, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": own,
                "topologyKey": HOSTNAME_LABEL if self.placement == "spread-host" else RACK_LABEL}
            if self.min_domains is not None:
                constraint["minDomains"] = self.min_domains
            spec["topologySpreadConstraints"] = [constraint]
        if not affinity:
            del spec["affinity"]


def _required(selector: dict[str, Any], key: str) -> dict[str, Any]:
    return {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": selector, "topologyKey": key}]}


@dataclass
class Trial:
    seed: int
    id: str
    nodes: list[TrialNode] = field(default_factory=list)
    groups: list[TrialGroup] = field(default_factory=list)


def generate(seed: int, node_count: int = 6, group_count: int = 5) -> Trial:
    rng = random.Random(seed)
    trial = Trial(seed, f"g{seed}")
    for i in range(node_count):
        trial.nodes.append(TrialNode(
            name=f"{trial.id}-n{i}", zone=rng.choice(("a", "b")), rack=f"{trial.id}-r{i // 2}",
            cpu=rng.choice(("16", "48", "96", "96")),
            tainted=rng.random() < 0.25, filler_gpus=rng.choice(FILLER_GPUS)))
    for i in range(group_count):
        shared = rng.random() < 0.15
        size = rng.randint(MIN_MEMBERS, MAX_MEMBERS)
        # Large groups mostly ask for less per member, so that some of them fit on a trial's nodes.
        large = size > 4
        per_member = (1, 1, 2, 2, 4, 8) if large else (1, 2, 2, 4, 4, 6, 8)
        cpus = ("1", "4", "8", "24") if large else ("1", "4", "8", "24", "40")
        trial.groups.append(TrialGroup(
            name=f"{trial.id}-grp{i}", size=size,
            gpus=rng.choice((1, 2, 4)) if shared else rng.choice(per_member),
            cpu=rng.choice(cpus), memory=rng.choice(("1Gi", "16Gi", "64Gi", "300Gi")),
            tolerates=rng.random() < 0.5, zone=rng.choice(("a", "b")) if rng.random() < 0.3 else None,
            shared=shared))
    for group in trial.groups:  # drawn last, so the rest of a seed's trial stays what it was
        if rng.random() < 0.5:
            group.placement = rng.choice(PLACEMENTS)
            group.max_skew = rng.choice((1, 1, 2))
            group.min_domains = rng.choice((None, None, 4)) if group.placement == "spread-rack" else None
    for group in trial.groups:  # drawn after the placements, for the same reason
        if not group.shared and rng.random() < 0.4:
            group.shape = rng.choice(SHAPES)
            group.leader_gpus = 0 if group.shape == "jobset" else min(rng.choice((1, 2)), group.gpus)
            group.leader_cpu = rng.choice(("1", "2", "8"))
    return trial


def filler(node: TrialNode, namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """An unmanaged pod on `node` holding `filler_gpus` GPUs (fragmentation draq must see), and its claim.

    The claim is a ResourceClaim of its own rather than a template's, so it can exist before the pod: a
    pod whose claim the scheduler has not seen yet is held at PreEnqueue until the claim's event arrives,
    and a test's set-up should not depend on that ordering.
    """
    name = f"{node.name}-filler"
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": name, "namespace": namespace},
             "spec": {"devices": {"requests": [
                 {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": node.filler_gpus}}]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": node.name},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "main", "image": "registry.example/infer:1",
                                    "resources": {"requests": {"cpu": "2"}, "claims": [{"name": "gpus"}]}}],
                    "resourceClaims": [{"name": "gpus", "resourceClaimName": name}]}}
    return claim, pod
