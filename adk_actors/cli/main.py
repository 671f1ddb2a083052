"""The ``adk`` command: ``adk --version``, ``adk emulator ...``, ``adk status --port N``.

Later issues add ``doctor``, ``config validate``, ``run``, ``console`` and ``shell``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from adk_actors import __version__

__all__ = ["main"]


def _status(args: argparse.Namespace) -> int:
    from adk_actors.errors import AdkError
    from adk_actors.runtime.system import attach
    from adk_actors.settings import load_settings

    try:
        handle = attach(args.port, load_settings(), make_default=False)
        tree = handle.tree()
        handle.detach()
    except AdkError as err:
        print(json.dumps({"ok": False, "error": err.to_dict()}), file=sys.stderr)
        return 1
    print(json.dumps(_strip(tree), indent=2, sort_keys=True, default=str))
    return 0


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("address",)}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="adk", description="adk_actors command line")
    parser.add_argument("--version", action="version", version=f"adk_actors {__version__}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("emulator", help="run the Gemini emulator (see docs/EMULATOR.md)", add_help=False)
    status = sub.add_parser("status", help="print the supervision tree of a running system as JSON")
    status.add_argument("--port", type=int, default=None, help="admin port (default: settings / $ADK_SYSTEM_PORT)")
    args, rest = parser.parse_known_args(argv)
    if args.command == "emulator":
        from adk_actors.emulator.cli import main as emulator_main

        return emulator_main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "status":
        return _status(args)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
