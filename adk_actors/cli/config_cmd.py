"""``adk config validate FILE [--json]``: check an agent file with the rules ``spawn_agent`` applies.

Prints ``ok: FILE (agent NAME)`` or ``error: MESSAGE [reason] {details}``; with ``--json`` one object,
``{"ok": true, "file": ..., "agent": ...}`` or ``{"ok": false, "file": ..., "error": {"type", "reason",
"message", "details"}}``. Exit status 0 or 1. Values from the file are never echoed (see
:mod:`adk_actors.cli.agent_file`).
"""

from __future__ import annotations

import argparse
from typing import Any

from adk_actors.cli.agent_file import load_agent_file
from adk_actors.cli.output import error_dict, print_error, print_json, print_text
from adk_actors.errors import AdkError

__all__ = ["add_parser", "validate"]


def add_parser(sub: Any) -> None:
    """Register ``config validate`` on the ``adk`` subparsers."""
    config = sub.add_parser("config", help="agent config files", description="Agent config files.")
    actions = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = actions.add_parser(
        "validate",
        help="validate an agent config file (JSON)",
        description="Validate an agent config file with the same rules as spawn_agent.",
    )
    check.add_argument("file", metavar="FILE")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(handler=validate)


def validate(args: argparse.Namespace) -> int:
    """Run the command; returns the exit status."""
    try:
        name = load_agent_file(args.file).name
    except AdkError as err:
        if args.json:
            print_json({"ok": False, "file": args.file, "error": error_dict(err)})
        else:
            print_error(err)
        return 1
    if args.json:
        print_json({"ok": True, "file": args.file, "agent": name})
    else:
        print_text(f"ok: {args.file} (agent {name})")
    return 0
