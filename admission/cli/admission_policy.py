"""The options of `draq run` and `draq webhook` that set the webhooks' admission policy."""

from __future__ import annotations

import argparse
from typing import Any

from admission.core.errors import InvalidInput
from admission.core.labels import DEVICE_POLICIES, DEVICE_POLICY_LABEL
from admission.core.review import EXEMPTIBLE_OWNER_KINDS
from admission.webhook.service import WebhookSettings

_DEFAULTS = WebhookSettings()


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device-policy", choices=DEVICE_POLICIES, default=_DEFAULTS.device_policy,
                        help="managed namespaces without the label " + DEVICE_POLICY_LABEL + ": refuse pods that use "
                             "devices outside every queue (require-queue) or let them run (allow) "
                             "(default %(default)s)")
    parser.add_argument("--exempt-owner-kind", action="append", default=[], metavar="KIND",
                        help="pods whose controller owner is of this kind (one of "
                             f"{', '.join(sorted(EXEMPTIBLE_OWNER_KINDS))}) stay outside queues once the owner is "
                             "read and its uid matches (repeatable; default: none)")
    parser.add_argument("--max-pending-groups", type=int, default=_DEFAULTS.max_pending_groups, metavar="N",
                        help="the most groups a LocalQueue may hold pending when it sets no spec.maxPendingGroups; "
                             "a pod that would start one more is refused (0: no cap; default %(default)s)")


def policy_settings(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """The WebhookSettings fields of the policy options, checked."""
    unknown = sorted(set(args.exempt_owner_kind) - EXEMPTIBLE_OWNER_KINDS)
    if unknown:
        raise InvalidInput(command, "--exempt-owner-kind", f"{', '.join(unknown)} cannot be verified; use one of "
                           f"{', '.join(sorted(EXEMPTIBLE_OWNER_KINDS))}")
    if args.max_pending_groups < 0:
        raise InvalidInput(command, "--max-pending-groups", f"{args.max_pending_groups}: use 0 (no cap) or more")
    return {"device_policy": args.device_policy, "exempt_owner_kinds": tuple(sorted(set(args.exempt_owner_kind))),
            "max_pending_groups": args.max_pending_groups}
