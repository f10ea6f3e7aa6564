"""Events about groups' owners: a pod whose owner draq does not know (once per pod), and a top-level owner
whose declared members changed (it was scaled)."""

from __future__ import annotations

import logging
from typing import Any

from admission.core.cycle import resized_event, unknown_owner_event
from admission.core.models import ObjectRef
from admission.core.workloads import BY_KIND
from admission.operator.reading import Reading
from admission.operator.writer import Writer

log = logging.getLogger(__name__)
_REMEMBERED = 100_000  # pods warned about; the set is cleared past this (a pod may then be warned again)


class OwnerNotices:
    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self._warned: set[str] = set()  # pod uids
        self._declared: dict[str, tuple[ObjectRef, int]] = {}  # group key -> (top-level owner, declared size)

    async def post(self, reading: Reading) -> None:
        groups = reading.by_key
        seen: dict[str, tuple[ObjectRef, int]] = {}
        for key, members in reading.memberships.items():
            group = groups.get(key)
            if group is None:
                continue
            for name, member in members.items():
                if member.unknown_owner:
                    await self._warn_unknown(reading, group.namespace, name, member.unknown_owner)
            sized = next(((m.top, m.minimum) for m in members.values() if m.gang and m.top and m.minimum), None)
            if sized is None:
                continue
            owner, size = sized
            assert owner is not None and size is not None
            seen[key] = (owner, size)
            before = self._declared.get(key)
            if before is not None and before[0] == owner and before[1] != size:
                event = resized_event(group, owner, before[1], size)
                log.info("%s", event.message)
                await self.writer.event(_involved(owner), event.reason, event.message, warning=event.warning)
        self._declared = seen

    async def _warn_unknown(self, reading: Reading, namespace: str, pod: str, owner: str) -> None:
        manifest = reading.pod_manifest(namespace, pod)
        uid = str(((manifest or {}).get("metadata") or {}).get("uid") or f"{namespace}/{pod}")
        if manifest is None or uid in self._warned:
            return
        if len(self._warned) > _REMEMBERED:
            self._warned.clear()
        self._warned.add(uid)
        event = unknown_owner_event(f"{namespace}/{pod}", owner)
        await self.writer.event(manifest, event.reason, event.message, warning=event.warning)


def _involved(owner: ObjectRef) -> dict[str, Any]:
    kind = BY_KIND[owner.kind]
    return {"apiVersion": kind.api_version, "kind": owner.kind,
            "metadata": {"name": owner.name, "namespace": owner.namespace}}
