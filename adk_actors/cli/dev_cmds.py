"""The developer-tooling commands: ``adk serve``, ``adk inspect``, ``adk session`` and ``adk resume``.

::

    adk serve --config FILE [--emulator] [--dev-port N] [--bind IP [--allow-remote-bind]] [--mcp] [--a2a]
              [--legacy-a2a] [--resources NAME]
    adk inspect [--port N] agents | agent NAME | run RUN_ID | diagnostics | metrics
    adk inspect [--url URL] memory APP USER | artifacts APP USER SESSION | artifact APP USER SESSION --name N
                          | context APP USER SESSION | context-lifecycle APP USER SESSION --model M
    adk session [--port N] list [--app A] [--user U] [--limit N] | show APP USER SESSION [--events N]
                           | delete APP USER SESSION
    adk resume [--port N] RUN_ID --response JSON [--wait SECONDS]

``serve`` starts a node with ``dev_server`` on, spawns the file's agent, prints one JSON line with the console's URL
once it answers, and serves until interrupted; the token is ``ADK_DEV_TOKEN`` (docs/DEV_CONSOLE.md). The others
attach to a running node by its admin port and print JSON. They call the same operations as ``/dev/v1``
(:class:`~adk_actors.devapi.DevOps`), with the same bounds and reasons; a failure is reported by reason on stderr
with exit status 1. The memory, artifact and context subjects of ``inspect`` talk HTTP to the developer server
that holds those services (:mod:`adk_actors.cli.resource_cmds`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from adk_actors.cli import resource_cmds
from adk_actors.cli.launch import add_launch_arguments, open_agent, options_from_args
from adk_actors.cli.output import print_error, print_json
from adk_actors.errors import AdkError, ConfigError, ValidationError
from adk_actors.settings import load_settings

__all__ = ["add_parser", "inspect", "resume", "serve", "session"]

_READY_S = 30.0


def _with_port() -> argparse.ArgumentParser:
    """A parent parser with ``--port`` (given to each leaf command, so it may follow the subcommand)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--port", type=int, default=None, help="admin port (default: settings / $ADK_SYSTEM_PORT)")
    return parent


def add_parser(sub: Any) -> None:
    """Register ``serve``, ``inspect``, ``session`` and ``resume`` on the ``adk`` subparsers."""
    serve_parser = sub.add_parser(
        "serve",
        help="run a node with the /dev/v1 API and the browser console",
        description="Start a node with the developer server on, spawn the agent in FILE and serve until interrupted.",
    )
    add_launch_arguments(serve_parser)
    serve_parser.add_argument("--dev-port", type=int, default=None, help="the server's port (default: settings)")
    serve_parser.add_argument("--bind", default=None, help="the server's address (default: settings, 127.0.0.1)")
    serve_parser.add_argument("--allow-remote-bind", action="store_true", help="allow a non-loopback --bind")
    serve_parser.add_argument(
        "--mcp", action="store_true", help="also expose the agent as an MCP tool at /mcp (Streamable HTTP)"
    )
    serve_parser.add_argument(
        "--a2a", action="store_true", help="also serve the agent over A2A 1.0 at /a2a/v1 (loopback only)"
    )
    serve_parser.add_argument(
        "--legacy-a2a", action="store_true", help="also serve the legacy POST /a2a/prompt endpoint (loopback only)"
    )
    serve_parser.add_argument(
        "--resources",
        metavar="NAME",
        default=None,
        help='the application\'s resource provider for the memory, artifact and context routes ("pkg.module:name")',
    )
    serve_parser.set_defaults(handler=serve)

    port = [_with_port()]
    inspect_parser = sub.add_parser("inspect", help="inspect agents, runs and the node (JSON)")
    what = inspect_parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    what.add_parser("agents", help="the running agents", parents=port)
    what.add_parser("agent", help="one agent", parents=port).add_argument("name")
    what.add_parser("run", help="a run's status", parents=port).add_argument("run_id")
    what.add_parser("diagnostics", help="version, node status and public settings", parents=port)
    what.add_parser("metrics", help="the node's metrics snapshot", parents=port)
    resource_cmds.add_inspect_parsers(what)
    inspect_parser.set_defaults(handler=inspect)

    session_parser = sub.add_parser("session", help="list, show or delete sessions (JSON)")
    action = session_parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = action.add_parser("list", help="sessions, newest first", parents=port)
    listing.add_argument("--app", default="dev")
    listing.add_argument("--user", default=None)
    listing.add_argument("--limit", type=int, default=20)
    show = action.add_parser("show", help="one session with its state and newest events", parents=port)
    for name in ("app", "user", "session_id"):
        show.add_argument(name)
    show.add_argument("--events", type=int, default=100)
    delete = action.add_parser("delete", help="delete one session", parents=port)
    for name in ("app", "user", "session_id"):
        delete.add_argument(name)
    session_parser.set_defaults(handler=session)

    resume_parser = sub.add_parser("resume", help="resume a paused run with the answer to its pause", parents=port)
    resume_parser.add_argument("run_id")
    resume_parser.add_argument("--response", required=True, help="the answer as JSON, e.g. '{\"confirmed\": true}'")
    resume_parser.add_argument("--wait", type=float, default=None, help="wait this many seconds for the outcome")
    resume_parser.set_defaults(handler=resume)


@contextlib.contextmanager
def _ops(port: int | None) -> Iterator[Any]:
    from adk_actors.devapi import DevOps
    from adk_actors.runtime.system import attach

    handle = attach(port, load_settings(), make_default=False)
    try:
        yield DevOps(handle)
    finally:
        handle.detach()


def _run(port: int | None, call: Callable[[Any], Any]) -> int:
    try:
        with _ops(port) as ops:
            print_json(call(ops))
    except AdkError as err:
        print_error(err)
        return 1
    return 0


def inspect(args: argparse.Namespace) -> int:
    """``adk inspect``; returns the exit status."""
    if args.what in resource_cmds.INSPECT_WHATS:
        return resource_cmds.inspect(args)
    calls: dict[str, Callable[[Any], Any]] = {
        "agents": lambda ops: ops.list_agents(),
        "agent": lambda ops: ops.describe(args.name),
        "run": lambda ops: ops.run_status(args.run_id),
        "diagnostics": lambda ops: ops.diagnostics(),
        "metrics": lambda ops: ops.metrics(),
    }
    return _run(args.port, calls[args.what])


def session(args: argparse.Namespace) -> int:
    """``adk session``; returns the exit status."""
    calls: dict[str, Callable[[Any], Any]] = {
        "list": lambda ops: ops.list_sessions(args.app, args.user, args.limit),
        "show": lambda ops: ops.show_session(args.app, args.user, args.session_id, args.events),
        "delete": lambda ops: ops.delete_session(args.app, args.user, args.session_id),
    }
    return _run(args.port, calls[args.action])


def resume(args: argparse.Namespace) -> int:
    """``adk resume``; returns the exit status."""

    def call(ops: Any) -> Any:
        try:
            response = json.loads(args.response)
        except ValueError:
            raise ValidationError(
                "--response must be JSON", reason="invalid_resume_response", details={"key": "response"}
            ) from None
        resumed = ops.resume_run(args.run_id, response)
        if args.wait is None:
            return resumed
        from adk_actors import runs
        from adk_actors.devapi import outcome_json

        outcome = runs.wait(resumed["run_id"], args.wait, system=ops.system)
        return {**resumed, "outcome": outcome_json(outcome)}

    return _run(args.port, call)


def serve(args: argparse.Namespace) -> int:
    """``adk serve``; returns the exit status."""
    try:
        if args.port is not None:
            raise ConfigError(
                "adk serve starts its own node; to serve a running node, set dev_server = true in its settings",
                reason="invalid_value",
                details={"key": "port"},
            )
        changes: dict[str, Any] = {"dev_server": True, "dev_allow_remote_bind": bool(args.allow_remote_bind)}
        if args.dev_port is not None:
            changes["dev_port"] = args.dev_port
        if args.bind is not None:
            changes["dev_bind_ip"] = args.bind
        options = options_from_args(args, streaming=True)
        if args.mcp or args.a2a:
            from adk_actors.cli.agent_file import load_agent_file

            agent_name = load_agent_file(options.config_path).name
            if args.mcp:
                changes["dev_mcp"] = agent_name
            if args.a2a:
                changes["dev_a2a"] = agent_name
        if args.legacy_a2a:
            changes["dev_legacy_a2a"] = True
        if args.resources:
            changes["dev_resources"] = args.resources
        settings = load_settings().replace(**changes)
        with open_agent(options, settings) as live:
            url = _wait_listening(live.handle)
            info = {"url": f"{url}/dev", "api": f"{url}/dev/v1", "agent": live.agent.name, "port": live.handle.port}
            if args.mcp:
                info["mcp"] = f"{url}/mcp"
            if args.a2a:
                info["a2a"] = f"{url}/a2a/v1"
                info["agent_card"] = f"{url}/.well-known/agent-card.json"
            if args.legacy_a2a:
                info["legacy_a2a"] = f"{url}/a2a/prompt"
            print_json(info)
            threading.Event().wait()  # until SIGINT/SIGTERM (raised as KeyboardInterrupt/SystemExit)
    except AdkError as err:
        print_error(err)
        return 1
    return 0


def _wait_listening(handle: Any) -> str:
    from adk_actors.runtime.messages import GetStatus
    from adk_actors.web.process import EDGE_NAME

    deadline = time.monotonic() + _READY_S
    while True:
        with contextlib.suppress(AdkError):
            url = handle.ask(EDGE_NAME, GetStatus(), 5).get("url")
            if url:
                return str(url)
        if time.monotonic() > deadline:
            raise ConfigError("the dev server did not start", reason="server_start_failed", details={})
        time.sleep(0.1)
