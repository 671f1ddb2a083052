"""The ``adk`` command: parses the arguments and dispatches to one module per command.

* ``adk --version``
* ``adk emulator ...`` — the Gemini emulator (``adk_actors.emulator.cli``, docs/EMULATOR.md)
* ``adk status [--port N]`` — the supervision tree of a running system as JSON, with the node's session
  durability guarantee (``session_backend``) and its metrics in compact form (``metrics``)
* ``adk doctor`` — :mod:`adk_actors.cli.doctor`
* ``adk config validate FILE`` — :mod:`adk_actors.cli.config_cmd`
* ``adk run --config FILE --message TEXT`` — :mod:`adk_actors.cli.run_cmd`
* ``adk console --config FILE`` — :mod:`adk_actors.cli.console`
* ``adk shell [--port N] [--json COMMAND]`` — :mod:`adk_actors.cli.shell` (docs/SHELL.md)
* ``adk serve``, ``adk inspect``, ``adk session``, ``adk resume`` — :mod:`adk_actors.cli.dev_cmds`
  (docs/DEV_CONSOLE.md)
* ``adk mcp list-tools CMD [ARGS...] | URL`` — :mod:`adk_actors.cli.mcp_cmd`
* ``adk a2a discover|send|get|cancel|tasks URL ...`` — :mod:`adk_actors.cli.a2a_cmd`
* ``adk eval run|render|compare ...`` — :mod:`adk_actors.cli.eval_cmd` (docs/EVALUATION.md)
* ``adk trigger list|status NAME [REF]`` — :mod:`adk_actors.cli.trigger_cmd` (docs/TRIGGERS.md)
* ``adk live list|status ID|send ID TEXT`` — :mod:`adk_actors.cli.live_cmd` (docs/CLI.md)
* ``adk memory search|erase``, ``adk artifact delete``, ``adk context-cache invalidate`` (and the resource subjects
  of ``adk inspect``) — :mod:`adk_actors.cli.resource_cmds`, against a running developer server

Every command reports failures by reason (``AdkError``) and exits non-zero, without a traceback; see docs/CLI.md.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from types import FrameType
from typing import Any

from adk_actors import __version__
from adk_actors.cli import (
    a2a_cmd,
    config_cmd,
    console,
    dev_cmds,
    doctor,
    eval_cmd,
    live_cmd,
    mcp_cmd,
    resource_cmds,
    run_cmd,
    shell,
    trigger_cmd,
)

__all__ = ["build_parser", "main", "node_metrics", "session_guarantee"]

EXIT_INTERRUPTED = 130


def _status(args: argparse.Namespace) -> int:
    from adk_actors.errors import AdkError
    from adk_actors.runtime.system import attach
    from adk_actors.settings import load_settings

    try:
        handle = attach(args.port, load_settings(), make_default=False)
        try:
            tree = handle.tree()
            metrics = node_metrics(handle)
        finally:
            handle.detach()
    except AdkError as err:
        print(json.dumps({"ok": False, "error": err.to_dict()}), file=sys.stderr)
        return 1
    tree["session_backend"] = session_guarantee(tree)
    tree["metrics"] = metrics
    print(json.dumps(_strip(tree), indent=2, sort_keys=True, default=str))
    return 0


def node_metrics(handle: Any) -> dict[str, Any]:
    """The node's metrics in the compact form of ``adk status`` (:func:`adk_actors.observability.metrics.compact`:
    counters by label series, histograms as count/sum/max), or ``{"unavailable": reason}`` when the node has no
    telemetry hub or it does not answer."""
    from adk_actors.errors import AdkError
    from adk_actors.observability import snapshot
    from adk_actors.observability.metrics import compact

    try:
        return compact(snapshot(handle))
    except AdkError as err:
        return {"unavailable": err.reason}


def session_guarantee(tree: dict[str, Any]) -> dict[str, Any]:
    """Which session durability guarantee the node of ``tree`` (a root status) has, read from its children.

    A product node (``adk_actors.node``) runs the in-memory ``sessions`` store as a root child exactly when
    ``session_backend = "memory"``, so its presence is the node's own answer, whatever settings this process has.
    The tags are ``adk doctor``'s: ``lost_on_store_restart`` (memory), ``durable`` (SQL); ``none`` for a node
    composed without sessions.
    """
    from adk_actors.admission.actor import ADMISSION_NAME
    from adk_actors.sessions.actor import STORE_NAME

    ids = {child.get("id") for child in tree.get("children", ()) if isinstance(child, dict)}
    if STORE_NAME in ids:
        return {
            "backend": "memory",
            "durability": "lost_on_store_restart",
            "detail": "the node's session store actor: sessions are lost when it restarts or the node stops "
            '(session_backend = "sql" keeps them)',
        }
    if ADMISSION_NAME in ids:
        return {"backend": "sql", "durability": "durable", "detail": "sessions are stored in SQL and survive restarts"}
    return {"backend": "none", "durability": "none", "detail": "this node runs no session store"}


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("address",)}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``adk`` argument parser (``emulator`` arguments are left for the emulator's own parser)."""
    parser = argparse.ArgumentParser(prog="adk", description="adk_actors command line")
    parser.add_argument("--version", action="version", version=f"adk_actors {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("emulator", help="run the Gemini emulator (see docs/EMULATOR.md)", add_help=False)
    status = sub.add_parser("status", help="print the supervision tree of a running system as JSON")
    status.add_argument("--port", type=int, default=None, help="admin port (default: settings / $ADK_SYSTEM_PORT)")
    status.set_defaults(handler=_status)
    for command in (
        doctor,
        config_cmd,
        run_cmd,
        console,
        shell,
        dev_cmds,
        mcp_cmd,
        a2a_cmd,
        resource_cmds,
        eval_cmd,
        trigger_cmd,
        live_cmd,
    ):
        command.add_parser(sub)
    return parser


def _terminate(signum: int, frame: FrameType | None) -> None:
    # SIGTERM unwinds the stack, so every `with` block stops what it started; the status is the shell's 128 + N.
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "emulator":
        from adk_actors.emulator.cli import main as emulator_main

        return emulator_main(rest)
    if rest:
        reject = getattr(args, "reject_arguments", None)
        if reject is not None:
            return int(reject(rest))
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(handler(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        # The message of an unexpected exception may quote a value; its type is enough to report.
        print(f"error: unexpected {type(exc).__name__} (please report it)", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
