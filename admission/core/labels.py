"""draq's vocabulary on Kubernetes objects: API group, labels, the scheduling gate, annotations; label values
made from names.

Defined once here and imported everywhere else (webhook decisions, the admission cycle, the
operator's writes, the CLI and the tests).
"""

import hashlib
import re

API_GROUP = "draq.io"
API_GROUP_VERSION = "v1alpha1"
"""The version of draq's API group alone, as the group/version/plural APIs and watches want it."""
API_VERSION = f"{API_GROUP}/{API_GROUP_VERSION}"
"""`apiVersion` of draq's kinds."""

GATE = "draq.io/admission"
"""The scheduling gate the mutating webhook adds and only draq removes, when the group is admitted."""

QUEUE_LABEL = "draq.io/queue"
GROUP_LABEL = "draq.io/pod-group"
GROUP_MIN_LABEL = "draq.io/group-min"
GROUP_LABELS = (QUEUE_LABEL, GROUP_LABEL, GROUP_MIN_LABEL)

MANAGED_LABEL = "draq.io/managed"
"""On a Namespace: `"true"` puts its pods under draq."""
DEFAULT_QUEUE_LABEL = "draq.io/default-queue"
"""On a Namespace: the LocalQueue its pods use when they name none (and it makes the namespace managed)."""
DEVICE_POLICY_LABEL = "draq.io/device-policy"
"""On a managed Namespace: whether pods that use devices must go through a queue (`require-queue`) or may
run outside every queue (`allow`); without it, the webhook's default applies."""
REQUIRE_QUEUE = "require-queue"
ALLOW_OFF_QUEUE = "allow"
DEVICE_POLICIES = (REQUIRE_QUEUE, ALLOW_OFF_QUEUE)

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "draq"

INCARNATION_ANNOTATION = "draq.io/leader-incarnation"
"""On the Lease: which process of the holder identity holds it (a restart under the same identity is
another incarnation)."""
EPOCH_ANNOTATION = "draq.io/epoch"
"""On a pod or a Job draq released, evicted, suspended or resumed: the leadership epoch of that write
(JSON, as `status.epoch` of a PodGroup); draq's validating webhook refuses it when the epoch has ended."""
RUN_TIME_ANNOTATION = "draq.io/run-time"
"""On a PodGroup or a member pod: how long the group runs once admitted, for `draq simulate`."""

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""Static pods' mirror objects, which no webhook can gate."""

DEFAULT_DRAQ_USER = "system:serviceaccount:draq-system:draq"
"""The user draq acts as, by default: the only one allowed to remove the gate."""

MAX_GROUP_MIN = 100_000


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_VALUE_MAX = 63


def label_value(name: str) -> str:
    """A valid label value for a name: unchanged when it fits, else shortened with a hash suffix."""
    if len(name) <= _LABEL_VALUE_MAX and _LABEL_VALUE.match(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    cleaned = re.sub(r"[^-A-Za-z0-9_.]", "-", name)[: _LABEL_VALUE_MAX - 11].strip("-_.")
    return f"{cleaned}-{digest}" if cleaned else digest
