"""`draq run`: the operator (admission cycles, gang release, queue status) and, unless told otherwise,
the admission webhooks in the same process, against the current kubeconfig or in cluster.

kopf runs the process (`admission.operator.runtime`): its startup handler starts the probe port, the
webhooks and the admission loop. SIGTERM and SIGINT stop it cleanly: the cycle in progress is abandoned,
the Lease is given up (another replica takes over at once), then the webhooks and the probe port stop."""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from prometheus_client import CollectorRegistry

from admission.cli import webhook_limits
from admission.cli.admission_policy import add_policy_options, policy_settings
from admission.cli.options import cluster_options
from admission.core.errors import DraqError, InvalidInput
from admission.core.features import SUPPORTED_VERSIONS, gates_for, normalize_version, parse_gate_flag
from admission.core.leadership import ElectionTiming
from admission.core.workloads import FRAMEWORKS, enabled_kinds
from admission.kube.probes import Probes, ProbeServer, process_registry, start_probe_server
from admission.operator import Operator, OperatorSettings
from admission.operator.health import operator_checks
from admission.operator.runtime import KopfProcess, Part, configure_logging
from admission.operator.settings import DEFAULTS
from admission.webhook.configurations import WebhookTarget
from admission.webhook.service import WebhookService, WebhookSettings

HELP = "run draq's operator (gang admission, queue status) and its admission webhooks"
WEBHOOK_DEFAULTS = WebhookSettings()
METRICS_PORT = 8080


def configure(parser: argparse.ArgumentParser) -> None:
    cluster_options(parser)
    parser.add_argument("--kubernetes-version", help="release whose DRA behaviour to follow (1.34 to 1.37; "
                        "default: the API server's own, read at start)")
    parser.add_argument("--feature-gates", default="", metavar="Gate=true,...",
                        help="DRA feature gates the cluster sets otherwise than the release's defaults (e.g. "
                        "DRAWorkloadResourceClaims=true for PodGroup-level claims)")
    parser.add_argument("--namespace", default=DEFAULTS.lease_namespace,
                        help="draq's namespace: the leader Lease and the webhook CA live here (default %(default)s)")
    parser.add_argument("--no-leader-election", action="store_true",
                        help="run cycles without holding the Lease (only with a single replica)")
    parser.add_argument("--identity", default=DEFAULTS.identity,
                        help="holder identity in the Lease (default: $POD_NAME, else the host name; keep it "
                             "stable across restarts and unique per replica)")
    parser.add_argument("--lease-seconds", type=float, default=DEFAULTS.lease_seconds, metavar="SECONDS",
                        help="lease duration: a killed leader is replaced within this plus --retry-period "
                             "(default %(default)s)")
    parser.add_argument("--renew-deadline", type=float, default=DEFAULTS.renew_deadline_seconds, metavar="SECONDS",
                        help="the leader stops deciding this long after sending its last successful renewal; "
                             "below the lease duration (default: two thirds of it)")
    parser.add_argument("--retry-period", type=float, default=DEFAULTS.retry_period_seconds, metavar="SECONDS",
                        help="how often replicas renew or try to take the Lease (default: 2/15 of the lease)")
    parser.add_argument("--debounce", type=float, default=DEFAULTS.debounce_seconds, metavar="SECONDS",
                        help="the longest quiet time after a change before a cycle runs, when the last pass ended "
                             "less than that ago: as long as that pass took, up to this (default %(default)s); an "
                             "idle operator waits 10 ms")
    parser.add_argument("--park-safety", type=float, default=DEFAULTS.park_safety_seconds, metavar="SECONDS",
                        help="a pending group that was evaluated and not admitted is evaluated again only when "
                             "something that could change its answer happens, and at least this often "
                             "(default %(default)s)")
    parser.add_argument("--bind-timeout", type=int, default=DEFAULTS.bind_timeout_seconds, metavar="SECONDS",
                        help="evict and requeue an admitted group whose members are not all bound within this "
                             "time (default %(default)s; a ClusterQueue's spec.bindTimeoutSeconds overrides it)")
    parser.add_argument("--native-gangs", choices=("auto", "on", "off"), default=WEBHOOK_DEFAULTS.native_gangs,
                        help="make draq's groups native gangs of the scheduler (Workload API, Kubernetes 1.35+ "
                             "alpha): auto where the cluster serves it (default %(default)s)")
    add_integrations(parser)
    parser.add_argument("--no-webhook", action="store_true", help="run the operator only")
    parser.add_argument("--webhook-url", help="base URL the API server calls for the webhooks "
                        "(default: the Service draq-webhook in --namespace)")
    parser.add_argument("--webhook-host", default=WEBHOOK_DEFAULTS.host,
                        help="address the webhooks listen on (default %(default)s)")
    parser.add_argument("--webhook-port", type=int, default=WEBHOOK_DEFAULTS.port,
                        help="port the webhooks listen on (default %(default)s)")
    parser.add_argument("--webhook-service", default=WEBHOOK_DEFAULTS.target.service_name,
                        help="Service (in --namespace) the API server calls when no --webhook-url is given "
                             "(default %(default)s)")
    parser.add_argument("--draq-user", help="the only user allowed to remove the gate: draq's own identity "
                        "(default system:serviceaccount:<--namespace>:draq)")
    parser.add_argument("--cert-file", type=Path, help="serve this certificate (e.g. from cert-manager; watched "
                        "and reloaded) instead of issuing one from draq's CA Secret")
    parser.add_argument("--key-file", type=Path, help="key of --cert-file")
    parser.add_argument("--ca-file", type=Path, help="CA of --cert-file, published as the webhooks' caBundle")
    add_policy_options(parser)
    parser.add_argument("--no-webhook-configurations", action="store_true",
                        help="do not create or update the webhook configurations (another owner, such as the "
                             "Helm chart, keeps them)")
    parser.add_argument("--adopt-webhook-configurations", action="store_true",
                        help="fill in the webhook configurations but never create them: the Helm chart creates "
                             "them empty, so that helm uninstall removes them")
    parser.add_argument("--metrics-host", default=WEBHOOK_DEFAULTS.host,
                        help="address the metrics and probe port listens on (default %(default)s)")
    parser.add_argument("--metrics-port", type=int, default=METRICS_PORT,
                        help="plain-HTTP port for /metrics, /healthz and /readyz (default %(default)s; 0: none)")
    webhook_limits.configure(parser)
    parser.add_argument("-v", "--verbose", action="store_true")


def add_integrations(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--integrations", default=",".join(DEFAULTS.frameworks), metavar="NAMES",
                        help="comma-separated workload integrations whose owner chains group pods, of: "
                             f"{', '.join(FRAMEWORKS)} (default %(default)s)")


def integrations_from(text: str, command: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    try:
        enabled_kinds(names)
    except ValueError as err:
        raise InvalidInput(command, "--integrations", str(err).removeprefix("integrations.frameworks: ")) from None
    return names


def settings_from(args: argparse.Namespace) -> OperatorSettings:
    if args.kubernetes_version is not None:
        try:
            normalize_version(args.kubernetes_version)
        except DraqError as err:
            raise InvalidInput("draq run", "--kubernetes-version", str(err)) from None
    gates = parse_gate_flag(args.feature_gates)
    try:
        gates_for(args.kubernetes_version or SUPPORTED_VERSIONS[-1], gates)
    except DraqError as err:
        raise InvalidInput("draq run", "--feature-gates", str(err)) from None
    if args.debounce < 0:
        raise InvalidInput("draq run", "--debounce", f"{args.debounce} is negative")
    if args.park_safety <= 0:
        raise InvalidInput("draq run", "--park-safety", f"{args.park_safety} is not positive: give the seconds "
                           "after which a parked group is evaluated again (e.g. 60)")
    if args.bind_timeout < 10:
        raise InvalidInput("draq run", "--bind-timeout", f"{args.bind_timeout} is too short: at least 10 seconds")
    problem = ElectionTiming.for_lease(args.lease_seconds, args.renew_deadline, args.retry_period).problem()
    if problem is not None and not args.no_leader_election:
        raise InvalidInput("draq run", *problem)
    return OperatorSettings(kubeconfig=args.kubeconfig, context=args.context,
                            kubernetes_version=args.kubernetes_version, feature_gates=gates,
                            native_gangs=args.native_gangs,
                            debounce_seconds=args.debounce,
                            leader_election=not args.no_leader_election, lease_namespace=args.namespace,
                            lease_seconds=args.lease_seconds, renew_deadline_seconds=args.renew_deadline,
                            retry_period_seconds=args.retry_period, identity=args.identity,
                            bind_timeout_seconds=args.bind_timeout, park_safety_seconds=args.park_safety,
                            frameworks=integrations_from(args.integrations, "draq run"))


def webhook_settings_from(args: argparse.Namespace) -> WebhookSettings | None:
    if args.no_webhook:
        return None
    if not 0 <= args.webhook_port <= 65535:
        raise InvalidInput("draq run", "--webhook-port", f"{args.webhook_port} is not a TCP port")
    if bool(args.cert_file) != bool(args.key_file):
        raise InvalidInput("draq run", "--cert-file/--key-file", "give both or neither")
    if args.ca_file and not args.cert_file:
        raise InvalidInput("draq run", "--ca-file", "only with --cert-file and --key-file")
    if args.webhook_url:
        parsed = urlparse(args.webhook_url)
        if parsed.scheme != "https" or not parsed.hostname:
            raise InvalidInput("draq run", "--webhook-url", f"{args.webhook_url!r} is not an https:// URL with a host")
        target = WebhookTarget(url=args.webhook_url)
        hosts: tuple[str, ...] = (parsed.hostname,)
    else:
        service = args.webhook_service
        target = WebhookTarget(service_namespace=args.namespace, service_name=service)
        hosts = (f"{service}.{args.namespace}.svc", f"{service}.{args.namespace}.svc.cluster.local")
    limits = webhook_limits.limits_from(args, "draq run")
    return WebhookSettings(native_gangs=args.native_gangs, kubeconfig=args.kubeconfig, context=args.context,
                           frameworks=integrations_from(args.integrations, "draq run"),
                           host=args.webhook_host,
                           port=args.webhook_port, namespace=args.namespace, target=target, cert_hosts=hosts,
                           draq_user=args.draq_user or f"system:serviceaccount:{args.namespace}:draq",
                           cert_file=args.cert_file, key_file=args.key_file, ca_file=args.ca_file,
                           manage_configurations=not args.no_webhook_configurations,
                           create_configurations=not args.adopt_webhook_configurations,
                           connections=limits.connections, bodies=limits.bodies,
                           client_ca_file=limits.client_ca_file, client_token_file=limits.client_token_file,
                           **policy_settings(args, "draq run"))


def metrics_address_from(args: argparse.Namespace) -> tuple[str, int] | None:
    if not 0 <= args.metrics_port <= 65535:
        raise InvalidInput("draq run", "--metrics-port", f"{args.metrics_port} is not a TCP port")
    return (args.metrics_host, args.metrics_port) if args.metrics_port else None


def probes(registry: CollectorRegistry, operator: Operator, process: KopfProcess,
           service: WebhookService | None) -> Probes:
    live, ready = operator_checks(operator)
    found = Probes(registry, live=[("operator", live)], ready=[("kopf", process.unready), ("operator", ready)])
    if service is not None:
        found.ready.append(("webhook", service.unready))
    return found


@dataclass
class ProbePort:
    """/metrics, /healthz and /readyz, started and stopped by kopf's startup and cleanup handlers."""

    probes: Probes
    address: tuple[str, int]
    name: str = "the probe port"
    _server: ProbeServer | None = None

    async def start(self) -> None:
        self._server = await start_probe_server(self.probes, *self.address)

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop()


@dataclass
class Webhooks:
    service: WebhookService
    name: str = "the webhooks"

    async def start(self) -> None:
        await self.service.start()

    async def stop(self) -> None:
        await self.service.stop()


async def serve(operator: Operator, webhook: WebhookSettings | None, registry: CollectorRegistry | None = None,
                metrics_address: tuple[str, int] | None = None) -> None:
    """Run under kopf until SIGTERM or SIGINT; the probe port starts first and stops last."""
    registry = registry or CollectorRegistry()
    process = KopfProcess(operator)
    service = WebhookService(webhook, registry, operator.clock) if webhook is not None else None
    parts: list[Part] = []
    if metrics_address is not None:
        parts.append(ProbePort(probes(registry, operator, process, service), metrics_address))
    if service is not None:
        parts.append(Webhooks(service))
    await process.run(parts)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    webhook = webhook_settings_from(args)
    metrics_address = metrics_address_from(args)
    configure_logging(args.verbose)
    try:
        registry = process_registry()
        asyncio.run(serve(Operator(settings, registry=registry), webhook, registry, metrics_address))
    except OSError as err:
        raise DraqError(f"draq run: {err.strerror or err}") from err
    return 0
