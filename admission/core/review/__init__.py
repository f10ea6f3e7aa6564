"""What the admission webhooks decide, as pure functions of an AdmissionRequest and a few lookups.

One module per object kind, as a controller's mutating and validating paths:

- `pod_mutation`: Pod CREATE in a managed namespace that names a LocalQueue gets the scheduling gate
  `draq.io/admission` and the labels the operator reads (queue, pod group, group minimum).
- `pod_validation`: pods naming a LocalQueue that does not exist, pods that use devices outside every
  queue where the namespace's device policy requires one (`device_policy`), pods that would start a
  group past their LocalQueue's cap on pending groups (`pending_cap`), removal of the gate by anyone
  but draq, queue or group labels changed on a gated or admitted pod. A pod's controller owner exempts
  it from queues only for the kinds the policy names, once the owner is read and its uid matches.
- `claims`: ResourceClaims and ResourceClaimTemplates whose selectors do not compile or whose charge
  cannot be computed or could never fit their queue.
- `draq_objects`: draq's own objects that reference objects that do not exist.
- `unmanaged`, `workload_total`: pods and workloads that name a queue where draq does not manage, and Jobs
  and JobSets whose pods together ask for more than their queue could ever hold.
- `pod_group_status`, `epoch_check`: writes by draq's own user stamped with a leadership epoch that is
  not the current Lease's (a deposed leader's writes), or made while the Lease cannot be read:
  PodGroup status, pod updates (releases) and deletions (evictions), Job updates (suspensions).

`envelope` reads and answers the AdmissionReview itself. A namespace is managed when it has the label
`draq.io/managed: "true"` or the label `draq.io/default-queue` (naming the LocalQueue its pods use
when they name none).
"""

from admission.core.labels import label_value
from admission.core.models import ObjectRef
from admission.core.review.device_policy import device_use
from admission.core.review.envelope import (
    AdmissionRequest,
    Decision,
    JsonObject,
    MalformedReview,
    malformed_response,
    parse_review,
    render_response,
    request_uid,
    uid_from_prefix,
)
from admission.core.review.lookups import EXEMPTIBLE_OWNER_KINDS, GatingPolicy, Lookups
from admission.core.review.pending_cap import pending_cap, started_group
from admission.core.review.pod_mutation import mutate
from admission.core.review.queue_choice import QueueChoice, namespace_is_managed, pod_queue
from admission.core.review.validating import validate
from admission.core.review.workload_total import TOTALLED_WORKLOADS

__all__ = [
    "EXEMPTIBLE_OWNER_KINDS",
    "TOTALLED_WORKLOADS",
    "AdmissionRequest",
    "Decision",
    "GatingPolicy",
    "JsonObject",
    "Lookups",
    "MalformedReview",
    "ObjectRef",
    "QueueChoice",
    "device_use",
    "label_value",
    "malformed_response",
    "mutate",
    "namespace_is_managed",
    "parse_review",
    "pending_cap",
    "pod_queue",
    "render_response",
    "request_uid",
    "started_group",
    "uid_from_prefix",
    "validate",
]
