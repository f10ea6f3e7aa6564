"""The condition draq keeps on the members of a waiting group, where `kubectl describe pod` shows it.

`draq.io/Admitted` is `False` while the group waits, with the PodGroup's reason and message and a hint to
`draq why`; `True` once the group is admitted. It is written through the pods/status subresource as a
JSON patch that touches that one condition, and only when the pod's own condition says something else:
a group whose reason and message stay the same costs no pod write, however many cycles it waits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from admission.core.cycle.types import Wait

POD_CONDITION = "draq.io/Admitted"
ADMITTED_REASON = "Admitted"
MAX_MESSAGE = 1024  # as an Event's: enough for a wait's message, not a megabyte per member


def why_hint(group_key: str) -> str:
    return f"details: draq why {group_key}"


def waiting_condition(wait: Wait, now: str) -> dict[str, str]:
    """The condition of a member of a waiting group: the PodGroup's reason and message, and where to look."""
    hint = f" ({why_hint(wait.group)})"
    message = wait.message if len(wait.message) + len(hint) <= MAX_MESSAGE else \
        wait.message[:MAX_MESSAGE - len(hint) - 1] + "…"
    return {"type": POD_CONDITION, "status": "False", "reason": wait.reason.value, "message": message + hint,
            "lastTransitionTime": now}


def admitted_condition(cluster_queue: str, now: str) -> dict[str, str]:
    return {"type": POD_CONDITION, "status": "True", "reason": ADMITTED_REASON,
            "message": f"admitted to ClusterQueue {cluster_queue}", "lastTransitionTime": now}


def _conditions(pod: Mapping[str, Any]) -> Sequence[Any]:
    status = pod.get("status")
    found = status.get("conditions") if isinstance(status, Mapping) else None
    return found if isinstance(found, list) else []


def current_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((c for c in _conditions(pod) if isinstance(c, Mapping) and c.get("type") == POD_CONDITION), None)


def condition_patch(pod: Mapping[str, Any], wanted: Mapping[str, str]) -> list[dict[str, Any]]:
    """The JSON patch of pods/status that sets `wanted`, or [] when the pod already says the same. The
    transition time is kept while the status stays; a `test` makes the patch fail rather than overwrite
    another condition should the list have moved since the pod was read."""
    conditions = _conditions(pod)
    at = next((i for i, c in enumerate(conditions) if isinstance(c, Mapping) and c.get("type") == POD_CONDITION),
              None)
    if at is None:
        if conditions:  # appended after the last condition as read: never twice, should two writes race
            last = len(conditions) - 1
            return [{"op": "test", "path": f"/status/conditions/{last}", "value": conditions[last]},
                    {"op": "add", "path": "/status/conditions/-", "value": dict(wanted)}]
        return [{"op": "add", "path": "/status/conditions", "value": [dict(wanted)]}]
    present = conditions[at]
    if all(present.get(k) == wanted[k] for k in ("status", "reason", "message")):
        return []
    value = dict(wanted)
    if present.get("status") == wanted["status"] and present.get("lastTransitionTime"):
        value["lastTransitionTime"] = present["lastTransitionTime"]
    return [{"op": "test", "path": f"/status/conditions/{at}/type", "value": POD_CONDITION},
            {"op": "replace", "path": f"/status/conditions/{at}", "value": value}]
