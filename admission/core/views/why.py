"""`draq why POD|GROUP`: why a group waits, in the words of its PodGroup's `Admitted` condition (the message
the operator writes, the same as its Event and `kubectl describe`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from admission.core.cycle.status import ADMITTED_CONDITION
from admission.core.errors import DraqError
from admission.core.labels import GROUP_LABEL


@dataclass(frozen=True, slots=True)
class Why:
    group: str  # namespace/name
    phase: str  # "" when there is no PodGroup yet
    waiting: bool
    reason: str
    message: str
    since: str = ""  # when the condition last changed
    pod: str = ""  # the pod asked about, when it was a pod

    def text(self) -> str:
        asked = f"pod {self.pod} is in group {self.group}; " if self.pod else ""
        if not self.phase:
            return f"{asked}{self.group} waits: {self.message}"
        if self.waiting:
            since = f" since {self.since}" if self.since else ""
            return f"{asked}{self.group} waits ({self.reason}{since}): {self.message}"
        return f"{asked}{self.group} does not wait: phase {self.phase}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "pod": self.pod or None, "phase": self.phase or None, "waiting": self.waiting,
                "reason": self.reason, "message": self.message, "since": self.since or None}


NO_RECORD = ("no PodGroup yet: draq's operator has not decided on this group (it writes the PodGroup on its "
             "first cycle after the members are created; is `draq run` running?)")


def group_of_pod(pod: Mapping[str, Any]) -> str:
    """The name of the group a pod belongs to, from the label draq's webhook sets."""
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    assert isinstance(labels, Mapping)
    group = labels.get(GROUP_LABEL)
    if not isinstance(group, str) or not group:
        raise DraqError(f"pod {meta.get('namespace')}/{meta.get('name')} has no label {GROUP_LABEL}: draq does not "
                        "manage it (its namespace is not under draq, or it was created before draq's webhook ran)")
    return group


def why(group: str, pod_group: Mapping[str, Any] | None, pod: str = "") -> Why:
    """Why the group `namespace/name` waits, from its PodGroup manifest (None: there is none yet)."""
    if pod_group is None:
        return Why(group, "", True, "NoPodGroup", NO_RECORD, pod=pod)
    status = pod_group.get("status") if isinstance(pod_group.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    phase = str(status.get("phase") or "Pending")
    admitted = next((c for c in status.get("conditions") or []
                     if isinstance(c, Mapping) and c.get("type") == ADMITTED_CONDITION), None)
    if admitted is None:
        return Why(group, phase, phase == "Pending", "NotDecided", str(status.get("message") or NO_RECORD), pod=pod)
    waiting = admitted.get("status") != "True" and phase not in ("Running", "Finished")
    message = str(admitted.get("message") or "")
    if not waiting and status.get("message") and status.get("message") != message:
        message = f"{message}; {status.get('message')}" if message else str(status.get("message"))
    return Why(group, phase, waiting, str(admitted.get("reason") or ""), message,
               str(admitted.get("lastTransitionTime") or ""), pod)
