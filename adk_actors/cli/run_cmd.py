"""``adk run``: one Runner turn of an agent from a config file, then everything started is stopped.

::

    adk run --config config/agent.json --message "Explain rest_for_one" [--user U] [--session S] [--json]
            [--emulator [--script PATH] | --base-url URL] [--port N] [--timeout SECONDS]

Plain output is the answer (text, or the content as JSON). ``--json`` prints one line per stored event of the
invocation, ``{"type": "event", "event": {...}}`` (redacted ``Event.to_dict()``; partial text deltas included),
then one ``{"type": "result", "ok": ..., "status": "completed" | "paused" | "failed", ...}`` line.

Exit status: 0 answered, 1 failed (the error is reported by reason, never with a traceback), 3 paused (a
confirmation or long-running tool is waiting; with an ephemeral system the pause is informational only).
"""

from __future__ import annotations

import argparse
from typing import Any

from adk_actors.cli.launch import (
    APP_NAME,
    LiveAgent,
    add_launch_arguments,
    new_session_id,
    open_agent,
    options_from_args,
)
from adk_actors.cli.output import error_dict, output_value, print_error, print_json, print_text
from adk_actors.errors import AdkError
from adk_actors.events import Event
from adk_actors.runs.logic import Paused
from adk_actors.settings import load_settings

__all__ = ["EXIT_PAUSED", "add_parser", "run"]

EXIT_PAUSED = 3


def add_parser(sub: Any) -> None:
    """Register ``run`` on the ``adk`` subparsers."""
    parser = sub.add_parser(
        "run",
        help="run one turn of an agent from a JSON config file",
        description="Run one Runner turn of the agent in FILE and print the answer.",
    )
    add_launch_arguments(parser)
    parser.add_argument("--message", required=True, help="the user's message")
    parser.add_argument("--json", action="store_true", help="print JSON events, one per line, then a result line")
    parser.add_argument("--timeout", type=float, default=None, help="seconds for the turn (default: node settings)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command; returns the exit status."""
    session_id = args.session or new_session_id()
    scope = {"user_id": args.user, "session_id": session_id, "app_name": APP_NAME}
    try:
        options = options_from_args(args, streaming=args.json)
        with open_agent(options, load_settings()) as live:
            scope["agent"] = live.agent.name
            if args.json:
                return _run_json(live, args, session_id, scope)
            outcome = live.runner.run(args.user, session_id, args.message, timeout=args.timeout)
    except AdkError as err:
        if args.json:
            print_json({"type": "result", "ok": False, "status": "failed", **scope, "error": error_dict(err)})
        else:
            print_error(err)
        return 1
    if isinstance(outcome, Paused):
        print_text(_pause_line(outcome.event))
        return EXIT_PAUSED
    value = output_value(outcome)
    if isinstance(value, str):
        print_text(value)
    else:
        print_json(value)
    return 0


def _run_json(live: LiveAgent, args: argparse.Namespace, session_id: str, scope: dict[str, Any]) -> int:
    last: Event | None = None
    for event in live.runner.stream(args.user, session_id, args.message, timeout=args.timeout):
        print_json({"type": "event", "event": event.redacted().to_dict()})
        last = event
    if last is not None and last.actions.pause is not None:
        print_json(
            {
                "type": "result",
                "ok": True,
                "status": "paused",
                **scope,
                "pause": last.redacted().actions.to_dict().get("pause"),
            }
        )
        return EXIT_PAUSED
    output = None if last is None or last.content is None else output_value(last.content.simplified())
    print_json({"type": "result", "ok": True, "status": "completed", **scope, "output": output})
    return 0


def _pause_line(event: Any) -> str:
    pause = getattr(getattr(event, "actions", None), "pause", None)
    if pause is None:
        return "paused"
    return f"paused [{pause.reason}] continuation {pause.continuation_id}"
