"""The options `draq webhook` and `draq run` share for what the webhook's clients may hold and who they must
be: connection and body limits, and client authentication (mTLS, bearer tokens)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from admission.core.errors import InvalidInput
from admission.webhook.handlers import BodyLimits
from admission.webhook.server import ConnectionLimits

CONNECTIONS = ConnectionLimits()
BODIES = BodyLimits()


@dataclass(frozen=True)
class ClientLimits:
    connections: ConnectionLimits
    bodies: BodyLimits
    client_ca_file: Path | None
    client_token_file: Path | None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-connections", type=int, default=CONNECTIONS.max_connections,
                        help="webhook connections open at once, TLS handshakes included; more are closed at "
                             "accept (default %(default)s, lowered to leave 256 of the file limit free)")
    parser.add_argument("--handshake-timeout", type=float, default=CONNECTIONS.handshake_seconds,
                        metavar="SECONDS", help="a webhook connection's TLS handshake must end within this "
                        "(default %(default)s)")
    parser.add_argument("--idle-timeout", type=float, default=CONNECTIONS.idle_seconds, metavar="SECONDS",
                        help="a webhook connection is closed when a request's headers have not all arrived "
                             "this long after it opened or after its last answer (default %(default)s)")
    parser.add_argument("--body-timeout", type=float, default=BODIES.body_seconds, metavar="SECONDS",
                        help="a review's body must arrive within this after its headers (default %(default)s)")
    parser.add_argument("--max-body-bytes", type=int, default=BODIES.max_body_bytes,
                        help="larger review bodies are refused with 413 (default %(default)s: the largest "
                             "review the API server sends)")
    parser.add_argument("--body-budget-bytes", type=int, default=BODIES.budget_bytes,
                        help="bytes of review bodies held at once (default %(default)s)")
    parser.add_argument("--body-wait", type=float, default=BODIES.wait_seconds, metavar="SECONDS",
                        help="how long a review waits for room in the body budget before a 429 "
                             "(default %(default)s)")
    parser.add_argument("--max-json-values", type=int, default=BODIES.max_values,
                        help="a review of more JSON values (counted as its commas plus one) is denied unparsed "
                             "(default %(default)s)")
    parser.add_argument("--client-ca-file", type=Path,
                        help="require webhook clients to present a certificate signed by a CA in this PEM file "
                             "(mTLS; the API server's admission configuration gives it one)")
    parser.add_argument("--client-token-file", type=Path,
                        help="require webhook clients to send a bearer token listed in this file, one a line "
                             "(reread when it changes)")


def limits_from(args: argparse.Namespace, command: str) -> ClientLimits:
    if args.max_connections < 1:
        raise InvalidInput(command, "--max-connections", f"{args.max_connections} is not a positive number")
    for option in ("handshake_timeout", "idle_timeout", "body_timeout"):
        if not getattr(args, option) > 0:
            raise InvalidInput(command, "--" + option.replace("_", "-"), "must be a positive number of seconds")
    if args.body_wait < 0:
        raise InvalidInput(command, "--body-wait", f"{args.body_wait} is negative")
    bodies = BodyLimits(max_body_bytes=args.max_body_bytes, budget_bytes=args.body_budget_bytes,
                        wait_seconds=args.body_wait, body_seconds=args.body_timeout,
                        max_values=args.max_json_values)
    if problem := bodies.problem():
        raise InvalidInput(command, "--max-body-bytes/--body-budget-bytes/--max-json-values", problem)
    connections = ConnectionLimits(max_connections=args.max_connections,
                                   handshake_seconds=args.handshake_timeout, idle_seconds=args.idle_timeout)
    return ClientLimits(connections, bodies, args.client_ca_file, args.client_token_file)
