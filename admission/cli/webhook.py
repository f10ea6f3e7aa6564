"""`draq webhook`: serve draq's admission webhooks over TLS against the current kubeconfig."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import sys
from pathlib import Path
from urllib.parse import urlparse

import yaml

from admission.cli import webhook_limits
from admission.cli.admission_policy import add_policy_options, policy_settings
from admission.cli.options import cluster_options
from admission.cli.run import METRICS_PORT, add_integrations, integrations_from
from admission.core.errors import DraqError, InvalidInput
from admission.webhook.configurations import WebhookTarget, configurations
from admission.webhook.service import WebhookSettings, serve_forever

HELP = "serve draq's mutating and validating admission webhooks over TLS"
DEFAULTS = WebhookSettings()


def configure(parser: argparse.ArgumentParser) -> None:
    cluster_options(parser)
    parser.add_argument("--host", default=DEFAULTS.host, help="address to listen on (default %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULTS.port, help="port to listen on (default %(default)s)")
    parser.add_argument("--namespace", default=DEFAULTS.namespace,
                        help="draq's namespace: holds the CA Secret, never under the webhooks (default %(default)s)")
    parser.add_argument("--draq-user", default=DEFAULTS.draq_user,
                        help="the only user allowed to remove the gate (default %(default)s)")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--url", help="base URL the API server calls, e.g. https://127.0.0.1:9443")
    target.add_argument("--service", default=DEFAULTS.target.service_name,
                        help="Service (in --namespace) the API server calls (default %(default)s)")
    parser.add_argument("--service-port", type=int, default=DEFAULTS.target.service_port,
                        help="the Service's port (default %(default)s)")
    parser.add_argument("--cert-host", action="append", default=[],
                        help="DNS name or IP for draq's serving certificate (repeatable; default: the "
                             "Service's DNS names, or the --url host)")
    add_integrations(parser)
    parser.add_argument("--cert-file", type=Path, help="serve this certificate (watched and reloaded)")
    parser.add_argument("--key-file", type=Path, help="key of --cert-file")
    parser.add_argument("--ca-file", type=Path, help="CA of --cert-file, published as caBundle")
    parser.add_argument("--cert-reload-seconds", type=float, default=DEFAULTS.cert_reload_seconds,
                        help="how often --cert-file/--key-file are checked for changes (default %(default)s)")
    parser.add_argument("--resync-seconds", type=float, default=DEFAULTS.resync_seconds,
                        help="how often the webhook configurations are checked and repaired (default %(default)s)")
    parser.add_argument("--no-configurations", action="store_true",
                        help="do not create or update the webhook configurations")
    parser.add_argument("--metrics-host", default=DEFAULTS.host,
                        help="address the metrics and probe port listens on (default %(default)s)")
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="plain-HTTP port for /metrics, /healthz and /readyz (default 0: none; draq run, "
                             f"which runs the webhooks too, serves them on {METRICS_PORT})")
    add_policy_options(parser)
    parser.add_argument("--print-configurations", action="store_true",
                        help="print the webhook configurations as YAML manifests and exit")
    webhook_limits.configure(parser)
    parser.add_argument("-v", "--verbose", action="store_true")


def settings_from(args: argparse.Namespace) -> WebhookSettings:
    if bool(args.cert_file) != bool(args.key_file):
        raise InvalidInput("draq webhook", "--cert-file/--key-file", "give both or neither")
    for option in ("cert_reload_seconds", "resync_seconds"):
        if not getattr(args, option) > 0:
            raise InvalidInput("draq webhook", "--" + option.replace("_", "-"), "must be a positive number")
    for option in ("port", "metrics_port"):
        port = getattr(args, option)
        if not 0 <= port <= 65535:
            raise InvalidInput("draq webhook", "--" + option.replace("_", "-"), f"{port} is not a TCP port")
    if args.url:
        parsed = urlparse(args.url)
        if parsed.scheme != "https" or not parsed.hostname:
            raise InvalidInput("draq webhook", "--url", f"{args.url!r} is not an https:// URL with a host")
        target = WebhookTarget(url=args.url)
        hosts = args.cert_host or [parsed.hostname]
    else:
        target = WebhookTarget(service_namespace=args.namespace, service_name=args.service,
                               service_port=args.service_port)
        hosts = args.cert_host or [f"{args.service}.{args.namespace}.svc",
                                   f"{args.service}.{args.namespace}.svc.cluster.local"]
    for host in hosts:
        _check_host(host)
    limits = webhook_limits.limits_from(args, "draq webhook")
    return WebhookSettings(
        kubeconfig=args.kubeconfig, context=args.context, host=args.host, port=args.port,
        namespace=args.namespace, draq_user=args.draq_user, target=target, cert_hosts=tuple(hosts),
        cert_file=args.cert_file, key_file=args.key_file, ca_file=args.ca_file,
        manage_configurations=not args.no_configurations, cert_reload_seconds=args.cert_reload_seconds,
        resync_seconds=args.resync_seconds, connections=limits.connections, bodies=limits.bodies,
        client_ca_file=limits.client_ca_file, client_token_file=limits.client_token_file,
        frameworks=integrations_from(args.integrations, "draq webhook"), **policy_settings(args, "draq webhook"),
    )


def _check_host(host: str) -> None:
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    labels = host.split(".")
    if not host or len(host) > 253 or not all(0 < len(label) <= 63 for label in labels):
        raise InvalidInput("draq webhook", "--cert-host", f"{host!r} is neither an IP address nor a DNS name")


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if args.print_configurations:
        bundle = settings.ca_file.read_bytes() if settings.ca_file else b""
        documents = configurations(settings.target, bundle, settings.namespace, settings.draq_user)
        yaml.safe_dump_all(documents, sys.stdout, sort_keys=False)
        return 0
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        metrics = (args.metrics_host, args.metrics_port) if args.metrics_port else None
        asyncio.run(serve_forever(settings, metrics))
    except OSError as err:
        raise DraqError(f"cannot serve on {settings.host}:{settings.port}: {err.strerror or err}") from err
    return 0
