"""Validating webhook, draq's own objects: references that exist, beyond what the CRD schema can say."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from admission.core.errors import DraqError, InvalidInput
from admission.core.models import ObjectRef, parse_label_selector
from admission.core.quota import DraCel, compile_unit, parse_cluster_queue, parse_quota_unit
from admission.core.review.envelope import AdmissionRequest, Decision
from admission.core.review.lookups import Lookups
from admission.core.review.readers import mapping


def _validate_local_queue(request: AdmissionRequest, lookups: Lookups) -> Decision:
    name = mapping(mapping(request.object).get("spec")).get("clusterQueue")
    if not isinstance(name, str) or not name:
        return Decision.allow()  # the CRD schema requires it and says so
    cluster_queue = lookups.cluster_queue(name)
    if cluster_queue is None:
        return Decision.deny(
            f"{request.describe()}, field spec.clusterQueue: ClusterQueue {name!r} does not exist. "
            "Create the ClusterQueue first (kubectl get clusterqueues lists them)",
            missing=[ObjectRef("ClusterQueue", "", name)],
        )
    selector = mapping(cluster_queue.get("spec")).get("namespaceSelector")
    if selector is None:
        return Decision.deny(
            f"{request.describe()}, field spec.clusterQueue: ClusterQueue {name!r} has no spec.namespaceSelector, "
            "so it serves no namespace. Its administrator sets a namespaceSelector that matches this namespace "
            "(or {} for every namespace), or point to another ClusterQueue",
        )
    namespace_labels = lookups.namespace_labels(request.namespace)
    if namespace_labels is None or not isinstance(selector, Mapping):
        return Decision.allow()
    try:
        serves = parse_label_selector(selector, f"ClusterQueue {name}", "spec.namespaceSelector")
    except InvalidInput as err:
        return Decision.deny(
            f"{request.describe()}, field spec.clusterQueue: ClusterQueue {name!r} cannot be used: {err}. "
            "Fix the ClusterQueue's namespaceSelector first",
        )
    if not serves.matches(namespace_labels):
        return Decision.deny(
            f"{request.describe()}, field spec.clusterQueue: ClusterQueue {name!r} does not serve "
            f"namespace {request.namespace!r} (its spec.namespaceSelector does not match the namespace's "
            "labels). Label the namespace to match, or point to another ClusterQueue",
        )
    return Decision.allow()


def _validate_cluster_queue(request: AdmissionRequest, lookups: Lookups) -> Decision:
    if request.object is not None:
        try:  # the policies and limits the schema cannot check (e.g. reclaim without a cohort)
            parse_cluster_queue(request.object)
        except DraqError as err:
            return Decision.deny(f"{err}", "Invalid", 422)
    quotas = mapping(mapping(request.object).get("spec")).get("quotas")
    units = [mapping(q).get("unit") for q in quotas] if isinstance(quotas, list) else []
    absent = [u for u in units if isinstance(u, str) and u and lookups.quota_unit(u) is None]
    if not absent:
        return Decision.allow()
    # Accepted with a warning: one `kubectl apply` or Helm release holding both may create the queue
    # before its units, and until they exist the queue admits nothing (its status says which is missing).
    return Decision.allow(
        warnings=[f"{request.describe()}, field spec.quotas[].unit: QuotaUnit {', '.join(map(repr, absent))} "
                  "does not exist yet; the queue admits no group until it does "
                  "(kubectl get quotaunits lists them)"],
        missing=[ObjectRef("QuotaUnit", "", u) for u in absent],
    )


def _validate_quota_unit(request: AdmissionRequest, lookups: Lookups) -> Decision:
    if request.object is None:
        return Decision.allow()
    try:
        compile_unit(parse_quota_unit(request.object), DraCel())
    except DraqError as err:
        return Decision.deny(f"{err}", "Invalid", 422)
    return Decision.allow()


DRAQ_CHECKS: dict[str, Callable[[AdmissionRequest, Lookups], Decision]] = {
    "LocalQueue": _validate_local_queue,
    "ClusterQueue": _validate_cluster_queue,
    "QuotaUnit": _validate_quota_unit,
}
