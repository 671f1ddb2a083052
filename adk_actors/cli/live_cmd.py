"""``adk live list|status|send``: the Live sessions of the developer Live principal on a running node, as JSON.

::

    adk live [--port N] list
    adk live [--port N] status SESSION_ID
    adk live [--port N] send SESSION_ID TEXT

The principal is the node settings' ``dev_live_principal`` (``config/adk.toml`` or ``ADK_DEV_LIVE_PRINCIPAL``), never
an argument: it is an ownership capability, so it stays out of the command line and the shell history. ``list``
prints ``{"sessions": [...], "truncated": bool}``, ``status`` one session's status, ``send`` ``{"input_seq": n}``.
They attach to the node by its admin port, like ``adk inspect``, and call the same operations as the ``/dev/v1/live``
routes (:class:`~adk_actors.devapi.live.LiveOps`); a failure is reported by reason on stderr with exit status 1
(``live_unavailable`` without a principal, ``live_session_not_found`` for a missing session or another principal's).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from adk_actors.cli.output import port_parent, print_error, print_json
from adk_actors.errors import AdkError
from adk_actors.settings import load_settings

__all__ = ["add_parser", "live"]


def add_parser(sub: Any) -> None:
    """Register ``live list``, ``live status`` and ``live send`` on the ``adk`` subparsers."""
    port = port_parent()
    parser = sub.add_parser("live", help="the Live sessions of the developer Live principal (JSON)")
    action = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    action.add_parser("list", help="the principal's running Live sessions", parents=[port])
    status = action.add_parser("status", help="one Live session's status", parents=[port])
    status.add_argument("session_id", help="the Live session's id")
    send = action.add_parser("send", help="send one text input to a Live session", parents=[port])
    send.add_argument("session_id", help="the Live session's id")
    send.add_argument("text", help="the text (at most 64 KiB)")
    parser.set_defaults(handler=live)


def live(args: argparse.Namespace) -> int:
    """``adk live``; returns the exit status."""
    from adk_actors.devapi.live import LiveOps
    from adk_actors.runtime.system import attach

    calls: dict[str, Callable[[LiveOps], Any]] = {
        "list": lambda ops: ops.list_sessions(),
        "status": lambda ops: ops.status(args.session_id),
        "send": lambda ops: ops.send_text(args.session_id, args.text),
    }
    try:
        settings = load_settings()
        handle = attach(args.port, settings, make_default=False)
        try:
            print_json(calls[args.action](LiveOps(handle, settings.dev_live_principal)))
        finally:
            handle.detach()
    except AdkError as err:
        print_error(err)
        return 1
    return 0
