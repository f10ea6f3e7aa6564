"""kopf runs the `draq run` process: its startup handler starts the probe port, the webhooks and the
admission loop; its cleanup handler stops them (the loop first, so the Lease is given up); it handles
SIGTERM and SIGINT and configures logging.

kopf watches nothing. Every kind the operator reads, draq's own included, is on the operator's list+watch
reflectors (`admission.operator.cache`), which wake the loop; the Reconfigured Events that acknowledge a new
spec of draq's kinds are posted from what those reflectors see (`Reconfigured`), so the process holds one
watch of each kind for the operator (`docs/operator.md`, "The process: kopf"). kopf writes nothing on any
object: it has no resource handler, its progress and diff-base storages are replaced by ones that never
write, and peering is off (leadership is the Lease of `admission.operator.leader`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import kopf

from admission.kube.client import load_credentials
from admission.kube.connection import Connection, connection_of
from admission.operator.loop import Operator

log = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
RECONFIGURABLE = ("QuotaUnit", "ClusterQueue", "LocalQueue", "PodGroup")  # draq's kinds: a new spec gets an Event
EXIT_SECONDS = 60.0  # kopf kills a process whose clean exit takes longer than this


class Part(Protocol):
    """Something `draq run` serves besides the loop (the probe port, the webhooks)."""

    name: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Lifecycle:
    """What kopf's startup and cleanup handlers do. A part that fails to start, or a loop that ends with an
    error, stops the process through kopf's stop flag; `failure` is raised once kopf has exited."""

    def __init__(self, operator: Operator, parts: Sequence[Part], stop_flag: asyncio.Event) -> None:
        self.operator = operator
        self.parts = tuple(parts)
        self.stop_flag = stop_flag
        self.failure: BaseException | None = None
        self._started: list[Part] = []
        self._loop: asyncio.Task[None] | None = None

    async def start(self) -> None:
        try:
            for part in self.parts:
                await part.start()
                self._started.append(part)
        except Exception as err:
            await self.stop()
            self._fail(err)
            return
        self._loop = asyncio.create_task(self.operator.run(), name="draq admission loop")
        self._loop.add_done_callback(self._loop_ended)

    async def stop(self) -> None:
        """The loop first (it abandons its cycle and gives the Lease up), then the parts, newest first."""
        if self._loop is not None and not self._loop.done():
            log.info("stopping: giving the Lease up")
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        while self._started:
            part = self._started.pop()
            try:
                await part.stop()
            except Exception:
                log.exception("stopping %s", part.name)

    def _loop_ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        self._fail(task.exception() or RuntimeError("the admission loop ended"))

    def _fail(self, err: BaseException) -> None:
        if self.failure is None:
            self.failure = err
        self.stop_flag.set()


class Reconfigured:
    """A spec generation of one of draq's kinds that the leader has not seen before is acknowledged with a
    Reconfigured Event. It watches nothing itself: the operator's reflectors tell it of every object they list
    and every watch event (`OperatorCache.observe`), the same that wake the loop."""

    def __init__(self, operator: Operator) -> None:
        self.operator = operator
        self._generations: dict[str, int] = {}  # uid -> the newest metadata.generation seen
        self._posting: set[asyncio.Task[None]] = set()

    def observe(self) -> None:
        """Be told by the operator's reflectors (before the loop starts them)."""
        self.operator.cache.observe(RECONFIGURABLE, self._seen)

    def _seen(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        message = self(event_type, body)
        if message is None:
            return
        task = asyncio.get_running_loop().create_task(self.operator.writer.event(body, "Reconfigured", message))
        self._posting.add(task)
        task.add_done_callback(self._posted)

    def _posted(self, task: asyncio.Task[None]) -> None:
        self._posting.discard(task)
        if not task.cancelled() and task.exception() is not None:  # e.g. the term ended meanwhile (the fence)
            log.info("Reconfigured Event not posted: %s", task.exception())

    def __call__(self, event_type: str | None, body: Mapping[str, Any]) -> str | None:
        """The Event's message to post, or None."""
        meta = body.get("metadata") or {}
        uid, generation = str(meta.get("uid") or ""), meta.get("generation")
        if event_type == "DELETED":
            self._generations.pop(uid, None)
            return None
        if not isinstance(generation, int):
            return None
        seen = self._generations.get(uid)
        self._generations[uid] = max(generation, seen or 0)
        if seen is None or generation <= seen or not self._leading():
            return None  # first sight (e.g. the initial listing) or nothing new
        return reconfigured_message(str(body.get("kind") or "object"), generation, self.operator.identity)

    def _leading(self) -> bool:
        elector = self.operator.elector
        return elector is None or elector.leading.is_set()


def reconfigured_message(kind: str, generation: int, identity: str) -> str:
    return (f"{kind} spec generation {generation} seen by draq ({identity}); the next admission cycle "
            "decides with it")


class NoProgress(kopf.ProgressStorage):
    """kopf keeps no handler progress on objects: draq has no handler that needs it."""

    def fetch(self, *, key: Any, body: Any) -> None:
        return None

    def store(self, *, key: Any, record: Any, body: Any, patch: Any) -> None:
        return None

    def purge(self, *, key: Any, body: Any, patch: Any) -> None:
        return None

    def touch(self, *, body: Any, patch: Any, value: str | None) -> None:
        return None

    def clear(self, *, essence: Any) -> Any:
        return copy.deepcopy(essence)


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf keeps no last-handled configuration on objects (no annotation is ever written)."""

    def fetch(self, *, body: Any) -> None:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None


def kopf_settings(identity: str) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.progress_storage = NoProgress()
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.peering.standalone = True
    settings.peering.clusterwide = True
    settings.scanning.disabled = True  # no watch of CRDs (not in draq's rights); the kinds are resolved at start
    settings.posting.reporting_component = "draq"
    settings.posting.reporting_instance = identity
    settings.process.ultimate_exiting_timeout = EXIT_SECONDS
    return settings


def kopf_registry(lifecycle: Lifecycle, connect: Callable[[], Connection]) -> kopf.OperatorRegistry:
    """Startup, cleanup and login only: no handler on any resource, so kopf lists and watches nothing."""
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry, errors=kopf.ErrorsMode.PERMANENT)
    async def start(**_: Any) -> None:
        await lifecycle.start()

    @kopf.on.cleanup(registry=registry)
    async def stop(**_: Any) -> None:
        await lifecycle.stop()

    @kopf.on.login(registry=registry, errors=kopf.ErrorsMode.PERMANENT)
    def login(**_: Any) -> kopf.ConnectionInfo:
        found = connect()
        return kopf.ConnectionInfo(server=found.server, ca_path=found.ca_path, insecure=found.insecure,
                                   certificate_path=found.certificate_path, private_key_path=found.private_key_path,
                                   scheme=found.scheme, token=found.token, default_namespace="default")

    return registry


def configure_logging(verbose: bool) -> None:
    kopf.configure(verbose=verbose, log_format=LOG_FORMAT)  # type: ignore[arg-type]  # a format string works


class KopfProcess:
    """`draq run` under kopf. Its readiness waits for kopf's startup to have completed."""

    def __init__(self, operator: Operator) -> None:
        self.operator = operator
        self.ready_flag = asyncio.Event()
        self.stop_flag = asyncio.Event()

    def unready(self) -> str:
        return "" if self.ready_flag.is_set() else "kopf has not finished starting"

    async def run(self, parts: Sequence[Part]) -> None:
        """Until SIGTERM or SIGINT (then 0), or until a part or the loop fails (then its error)."""
        lifecycle = Lifecycle(self.operator, parts, self.stop_flag)
        settings = self.operator.settings

        def connect() -> Connection:
            return connection_of(load_credentials(settings.kubeconfig, settings.context))

        Reconfigured(self.operator).observe()
        await kopf.operator(registry=kopf_registry(lifecycle, connect),
                            settings=kopf_settings(self.operator.identity), clusterwide=True, standalone=True,
                            stop_flag=self.stop_flag, ready_flag=self.ready_flag)
        if lifecycle.failure is not None:
            raise lifecycle.failure
