"""PodGroup-level resource claims (`spec.resourceClaims` of a scheduling.k8s.io PodGroup: v1alpha2 on
Kubernetes 1.36, alpha; v1beta1 on 1.37, beta; gate DRAWorkloadResourceClaims, off by default).

A pod's claim entry equal in every field (name, resourceClaimName, resourceClaimTemplateName) to a claim of
the PodGroup the pod names in `spec.schedulingGroup` is that PodGroup's claim: one ResourceClaim, reserved
for the PodGroup, whose devices every member shares. draq marks such entries on the members
(`Pod.pod_group_claims`), so the claim is planned once (the allocator's shared-claim rules: later members
go where its devices are reachable) and charged once per group, never per member. Where the release draq
models has the gate off, the scheduler would not share the claim the same way; the group waits saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from admission.core.cycle.groups import GroupView
from admission.core.features import FeatureGates
from admission.core.models import Pod, PodGroupClaim, PodResourceClaim

GATE = "DRAWorkloadResourceClaims"


def parse_pod_group_claims(manifest: Mapping[str, Any]) -> tuple[PodGroupClaim, ...]:
    """The claims of a scheduling PodGroup manifest, each with the claim generated for it from its template
    (`status.resourceClaimStatuses`); entries without a name or a source are left out (the API server
    refuses them)."""
    name = str(_map(manifest.get("metadata")).get("name") or "")
    generated = {str(s.get("name")): str(s.get("resourceClaimName") or "")
                 for s in _maps(_map(manifest.get("status")).get("resourceClaimStatuses"))}
    claims = []
    for entry in _maps(_map(manifest.get("spec")).get("resourceClaims")):
        by_name, by_template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
        if not entry.get("name") or (by_name is None) == (by_template is None):
            continue
        claim = PodResourceClaim(str(entry["name"]), _opt(by_name), _opt(by_template))
        claims.append(PodGroupClaim(name, claim, generated.get(claim.name, "")))
    return tuple(claims)


def with_pod_group_claims(group: GroupView, by_pod_group: Mapping[str, Sequence[PodGroupClaim]]) -> GroupView:
    """The group with each member's entries that match a claim of its PodGroup (`by_pod_group`, by
    `namespace/name`) marked as that claim."""
    pods = tuple(_marked(pod, by_pod_group.get(f"{pod.namespace}/{pod.scheduling_group}", ()))
                 if pod.scheduling_group else pod for pod in group.pods)
    if all(new is old for new, old in zip(pods, group.pods, strict=True)):
        return group
    return replace(group, pods=pods)


def unplannable(group: GroupView, gates: FeatureGates) -> str:
    """Why draq does not plan the group's PodGroup-level claims ("" where there are none or it does)."""
    users = sorted({(claim.pod_group, entry) for pod in group.pods for entry, claim in pod.pod_group_claims.items()})
    if not users or GATE in gates:
        return ""
    named = ", ".join(f"{entry!r} of PodGroup {group.namespace}/{pod_group}" for pod_group, entry in users)
    return (f"members use PodGroup-level resource claims ({named}), which draq plans only with the {GATE} "
            f"feature gate, off by default in Kubernetes {gates.version}: with the gate off in the scheduler "
            f"the claims are not shared by the group. If the cluster has it on, run draq with "
            f"--feature-gates {GATE}=true; else remove spec.resourceClaims from the PodGroup")


def _marked(pod: Pod, claims: Sequence[PodGroupClaim]) -> Pod:
    matched = {entry.name: claim for entry in pod.resource_claims for claim in claims if claim.entry == entry}
    return replace(pod, pod_group_claims=matched) if matched or pod.pod_group_claims else pod


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _maps(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _opt(value: object) -> str | None:
    return str(value) if value is not None else None
