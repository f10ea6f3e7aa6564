"""`draq webhook` as a whole: cache, certificates, server and configurations, started and stopped together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry

from admission.core.errors import DraqError
from admission.core.labels import DEFAULT_DRAQ_USER
from admission.core.native_gangs import GangApi, discovery_note
from admission.core.review import GatingPolicy
from admission.core.workloads import DEFAULT_FRAMEWORKS, enabled_kinds
from admission.kube import kinds
from admission.kube.client import KubeApi, load_credentials
from admission.kube.clock import SYSTEM_CLOCK, Clock
from admission.kube.discovery import served, served_gang_api
from admission.kube.listing import server_release
from admission.kube.probes import Probes, process_registry, start_probe_server
from admission.kube.reflector import Reflector
from admission.webhook.cache import WebhookCache, owner_watches
from admission.webhook.clients import TokenFile
from admission.webhook.configurations import WebhookTarget, configurations
from admission.webhook.handlers import AdmissionHandlers, BodyLimits
from admission.webhook.metrics import WebhookMetrics
from admission.webhook.publisher import ConfigurationPublisher
from admission.webhook.rotation import SecretCA, ServingCertRotator
from admission.webhook.server import ConnectionLimits, RunningServer, build_app, start_server
from admission.webhook.tls import CertFileWatcher, ServingTLS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WebhookSettings:
    """Everything `draq webhook` can be told."""

    kubeconfig: Path | None = None
    context: str | None = None
    host: str = "0.0.0.0"
    port: int = 9443
    # draq's namespace: the CA Secret and the leader Lease live here, and it is never under the webhooks.
    namespace: str = "draq-system"
    # The user allowed to remove the gate (draq's operator).
    draq_user: str = DEFAULT_DRAQ_USER
    # How the API server reaches this process (url, or a Service).
    target: WebhookTarget = field(default_factory=lambda: WebhookTarget(
        service_namespace="draq-system", service_name="draq-webhook"))
    # DNS names / IPs for draq's own serving certificate.
    cert_hosts: tuple[str, ...] = ("draq-webhook.draq-system.svc", "127.0.0.1")
    # Externally provided certificates (e.g. cert-manager): used and watched instead of draq's CA.
    cert_file: Path | None = None
    key_file: Path | None = None
    ca_file: Path | None = None
    # Native gang scheduling: "auto" (where the Workload API is served), "on" or "off".
    native_gangs: str = "auto"
    # The workload integrations whose owner chains group pods (`core.workloads.FRAMEWORKS`).
    frameworks: tuple[str, ...] = DEFAULT_FRAMEWORKS
    # Create and keep current the webhook configurations (with the caBundle).
    manage_configurations: bool = True
    # Create them when absent (False: only fill those the Helm chart creates, so that uninstalling removes them).
    create_configurations: bool = True
    resync_seconds: float = 60.0
    # How often externally provided certificate files are checked for changes.
    cert_reload_seconds: float = 10.0
    # Managed namespaces without draq.io/device-policy: require-queue or allow.
    device_policy: str = GatingPolicy().default_device_policy
    # Controller kinds whose pods stay outside queues (once the owner is read and its uid matches).
    exempt_owner_kinds: tuple[str, ...] = ()
    # The cap on pending groups of a LocalQueue that sets no spec.maxPendingGroups (0: none).
    max_pending_groups: int = GatingPolicy().max_pending_groups
    # What a client may hold: connections (and their timeouts) and request bodies.
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    bodies: BodyLimits = field(default_factory=BodyLimits)
    # Client authentication, off unless given: the CA of the API server's client certificate (mTLS) and a
    # file of accepted bearer tokens.
    client_ca_file: Path | None = None
    client_token_file: Path | None = None


class WebhookService:
    def __init__(self, settings: WebhookSettings, registry: CollectorRegistry | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.clock = clock
        self.metrics = WebhookMetrics(registry or CollectorRegistry())
        self.api = KubeApi(load_credentials(settings.kubeconfig, settings.context))
        self.cache = WebhookCache(self.api, clock=clock)
        self.tls = ServingTLS()
        self.server: RunningServer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._bundle: Callable[[], Awaitable[bytes]] | None = None

    async def start(self) -> int:
        """Serve; returns the bound port once the cache is synced and requests are answered."""
        settings = self.settings
        owners = await served(self.api, kinds.workload_resources(enabled_kinds(settings.frameworks)))
        self.cache.add(Reflector(self.api, resource, project) for resource, project in owner_watches(owners))
        await self.cache.start()
        await self._start_certificates()
        gang_api, native = await self._native_gangs()
        policy = GatingPolicy(settings.draq_user, gang_api=gang_api, native_gangs=native,
                              lease_namespace=settings.namespace,
                              default_device_policy=settings.device_policy,
                              exempt_owner_kinds=frozenset(settings.exempt_owner_kinds),
                              max_pending_groups=settings.max_pending_groups,
                              workload_kinds=frozenset(r.kind for r in owners))
        clients = TokenFile(settings.client_token_file) if settings.client_token_file else None
        handlers = AdmissionHandlers(self.cache, policy, self.cache, self.metrics, settings.bodies, clients,
                                     starts=self.cache)
        if settings.client_ca_file is not None:
            self.tls.require_client_certificates(settings.client_ca_file)
        self.server = await start_server(build_app(handlers), self.tls.context, settings.host, settings.port,
                                         settings.connections)
        if settings.manage_configurations:
            publisher = ConfigurationPublisher(self.api, lambda bundle: configurations(
                settings.target, bundle, settings.namespace, settings.draq_user), settings.create_configurations)
            await self._publish(publisher)
            self._spawn(self._keep_published(publisher))
        log.info("serving admission webhooks on %s:%d", settings.host, self.server.port)
        return self.server.port

    def unready(self) -> str:
        """Why the webhooks cannot answer yet ("" once the cache has listed everything and the server listens)."""
        if not self.cache.synced:
            return "the webhook cache has not listed every resource yet"
        return "" if self.server is not None else "the webhook server is not listening yet"

    async def _native_gangs(self) -> tuple[GangApi | None, bool]:
        """The gang API the cluster serves, and whether groups become native gangs (`auto`: where one is
        served). Pods naming a gang of an API not served are refused either way."""
        wanted = self.settings.native_gangs
        served = await served_gang_api(self.api)
        note = discovery_note(await server_release(self.api), served, wanted)
        if wanted == "on" and served is None:
            raise DraqError(f"--native-gangs on: {note.removeprefix('native gangs off: ')}")
        log.info("%s", note)
        return served, wanted != "off" and served is not None

    async def _start_certificates(self) -> None:
        settings = self.settings
        if settings.cert_file and settings.key_file:
            watcher = CertFileWatcher(self.tls, settings.cert_file, settings.key_file,
                                      settings.cert_reload_seconds)
            watcher.load()
            self._spawn(watcher.run())
            ca_file = settings.ca_file
            self._bundle = (lambda: asyncio.to_thread(ca_file.read_bytes)) if ca_file else _no_bundle
            return
        ca = await SecretCA(self.api, settings.namespace, clock=self.clock).load_or_create()
        rotator = ServingCertRotator(ca, settings.cert_hosts, self.tls, self.clock)
        rotator.ensure_current()
        self._spawn(rotator.run())
        self._bundle = lambda: _constant(ca.cert_pem)

    async def _publish(self, publisher: ConfigurationPublisher) -> None:
        assert self._bundle is not None
        await publisher.apply(await self._bundle())

    async def _keep_published(self, publisher: ConfigurationPublisher) -> None:
        while True:
            await self.clock.sleep(self.settings.resync_seconds)
            try:
                publisher.forget()
                await self._publish(publisher)
            except Exception as err:  # the API may be briefly away; the next round tries again
                log.warning("keeping the webhook configurations current: %s", err)

    def _spawn(self, work: Awaitable[None]) -> None:
        self._tasks.append(asyncio.ensure_future(work))

    async def stop(self, remove_configurations: bool = False) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if remove_configurations:
            with contextlib.suppress(Exception):
                await ConfigurationPublisher(self.api, lambda bundle: configurations(
                    self.settings.target, bundle, self.settings.namespace, self.settings.draq_user)).delete()
        if self.server is not None:
            await self.server.stop()
        await self.cache.stop()
        await self.api.close()
        self.tls.close()


async def _no_bundle() -> bytes:
    return b""


async def _constant(value: bytes) -> bytes:
    return value


async def serve_forever(settings: WebhookSettings, metrics_address: tuple[str, int] | None = None) -> None:
    """Serve until SIGTERM or SIGINT; requests in flight are answered before the listener closes. With a
    metrics address, /metrics, /healthz and /readyz are served there over plain HTTP."""
    registry = process_registry()
    service = WebhookService(settings, registry)
    probe_server = None
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        if metrics_address is not None:
            probes = Probes(registry, ready=[("webhook", service.unready)])
            probe_server = await start_probe_server(probes, *metrics_address)
        await service.start()
        await stopping.wait()
        log.info("stopping")
    finally:
        await service.stop()
        if probe_server is not None:
            await probe_server.stop()
