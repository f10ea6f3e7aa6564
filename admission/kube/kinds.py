"""The one table of API resources draq reads or writes."""

from __future__ import annotations

from collections.abc import Iterable

from admission.core.labels import API_GROUP, API_GROUP_VERSION
from admission.core.native_gangs import GANG_APIS, GangApi
from admission.core.native_gangs import GROUP as GANG_GROUP
from admission.core.workloads import KINDS, WorkloadKind
from admission.kube.paths import Resource

_DRA = ("resource.k8s.io", "v1")

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False, label_names=True)
NODES = Resource("", "v1", "nodes", "Node", False)
PODS = Resource("", "v1", "pods", "Pod", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
EVENTS = Resource("", "v1", "events", "Event", True)
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", True)
JOBS = Resource("batch", "v1", "jobs", "Job", True)
DAEMON_SETS = Resource("apps", "v1", "daemonsets", "DaemonSet", True)
STATEFUL_SETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True)
REPLICA_SETS = Resource("apps", "v1", "replicasets", "ReplicaSet", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
DEVICE_CLASSES = Resource(*_DRA, "deviceclasses", "DeviceClass", False)
RESOURCE_SLICES = Resource(*_DRA, "resourceslices", "ResourceSlice", False)
RESOURCE_CLAIMS = Resource(*_DRA, "resourceclaims", "ResourceClaim", True)
CLAIM_TEMPLATES = Resource(*_DRA, "resourceclaimtemplates", "ResourceClaimTemplate", True)
CLUSTER_QUEUES = Resource(API_GROUP, API_GROUP_VERSION, "clusterqueues", "ClusterQueue", False)
LOCAL_QUEUES = Resource(API_GROUP, API_GROUP_VERSION, "localqueues", "LocalQueue", True)
QUOTA_UNITS = Resource(API_GROUP, API_GROUP_VERSION, "quotaunits", "QuotaUnit", False)
POD_GROUPS = Resource(API_GROUP, API_GROUP_VERSION, "podgroups", "PodGroup", True)
TOPOLOGIES = Resource(API_GROUP, API_GROUP_VERSION, "topologies", "Topology", False)
DEVICE_TAINT_RULES = Resource("resource.k8s.io", "v1alpha3", "devicetaintrules", "DeviceTaintRule", False)
WORKLOADS = Resource("scheduling.k8s.io", "v1alpha1", "workloads", "Workload", True)
MUTATING_WEBHOOKS = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                             "MutatingWebhookConfiguration", False)
VALIDATING_WEBHOOKS = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                               "ValidatingWebhookConfiguration", False)
# Read by `draq doctor` only.
SERVICES = Resource("", "v1", "services", "Service", True)
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True)
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
SUBJECT_ACCESS_REVIEWS = Resource("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False)

ALL = (NAMESPACES, NODES, PODS, SECRETS, EVENTS, RESOURCE_QUOTAS, JOBS, DAEMON_SETS, STATEFUL_SETS, REPLICA_SETS,
       LEASES, DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, CLAIM_TEMPLATES, CLUSTER_QUEUES, LOCAL_QUEUES,
       QUOTA_UNITS, POD_GROUPS, TOPOLOGIES, DEVICE_TAINT_RULES, WORKLOADS, MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS)
BY_KIND = {resource.kind: resource for resource in ALL}


def gang_resource(api: GangApi) -> Resource:
    """The resource of a gang API version: v1alpha1 Workloads, or v1alpha2 / v1beta1 PodGroups (not draq's)."""
    return Resource(GANG_GROUP, api.version, api.plural, api.kind, True)


GANG_RESOURCES = tuple(gang_resource(api) for api in GANG_APIS)
SCHEDULING_POD_GROUP = "SchedulingPodGroup"
"""The key the operator's cache keeps scheduling.k8s.io PodGroups under, apart from draq's own PodGroups."""


def scheduling_pod_groups(api: GangApi) -> Resource:
    """The PodGroups of a served gang API (v1alpha2, v1beta1) as the operator's cache watches them (their
    PodGroup-level resource claims), under `SCHEDULING_POD_GROUP`."""
    return Resource(GANG_GROUP, api.version, api.plural, SCHEDULING_POD_GROUP, True)


def workload_resource(kind: WorkloadKind) -> Resource:
    """The API resource of a workload kind of the core's table (all are namespaced)."""
    group, _, version = kind.api_version.rpartition("/")
    return Resource(group, version, kind.plural, kind.kind, True)


WORKLOAD_KINDS = {kind.kind: workload_resource(kind) for kind in KINDS}
"""Every workload kind draq can group by, by kind; which are watched depends on the enabled integrations."""


def workload_resources(enabled: Iterable[WorkloadKind]) -> tuple[Resource, ...]:
    return tuple(WORKLOAD_KINDS[kind.kind] for kind in enabled)
