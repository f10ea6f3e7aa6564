"""`draq` entry point: one sub-command per module under `admission.cli`.

Each command module defines `HELP` (one line), `configure(parser)` and `run(args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

from admission.core.errors import DraqError

COMMANDS = (
    ("demo", "admission.cli.demo"),
    ("run", "admission.cli.run"),
    ("allocate", "admission.cli.allocate"),
    ("simulate", "admission.cli.simulate"),
    ("gaps", "admission.cli.gaps"),
    ("queues", "admission.cli.queues"),
    ("why", "admission.cli.why"),
    ("doctor", "admission.cli.doctor"),
    ("topology", "admission.cli.topology"),
    ("webhook", "admission.cli.webhook"),
)


def _commands() -> list[tuple[str, ModuleType]]:
    return [(name, importlib.import_module(module)) for name, module in COMMANDS]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="draq", description="Queue quotas and gang admission for Kubernetes DRA devices.", allow_abbrev=False
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in _commands():
        # No abbreviations: `--add-node` must not silently mean `--add-nodes`.
        command = sub.add_parser(name, help=module.HELP, description=module.HELP, allow_abbrev=False)
        module.configure(command)
        command.set_defaults(handler=module.run, command_parser=command)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # A sub-command's mistyped option: its own usage, not the top-level one.
        getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args))
    except DraqError as err:
        print(f"draq {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
