"""``adk a2a``: talk to an A2A 1.0 agent from the shell, without a node.

::

    adk a2a discover URL [--allow-http-loopback] [--token-env NAME]
    adk a2a send URL TEXT [--context ID] [--task ID] [--stream] [--allow-http-loopback] [--token-env NAME]
    adk a2a get URL TASK_ID [--allow-http-loopback] [--token-env NAME]
    adk a2a cancel URL TASK_ID [--allow-http-loopback] [--token-env NAME]
    adk a2a tasks URL [--context ID] [--status STATE] [--allow-http-loopback] [--token-env NAME]

``URL`` is the agent's origin (its card is at ``/.well-known/agent-card.json``). Every command prints one JSON object:
the card, the ``SendMessage`` result (``{"task": ...}`` or ``{"message": ...}``), the list of stream events with
``--stream``, a task, or a ``ListTasks`` page. ``--token-env NAME`` names the environment variable holding a bearer
token, so the token is never on the command line; it is sent only to the card's RPC interface (never to the card
URL), as the card's first bearer scheme. ``http://`` is accepted only for a loopback host with
``--allow-http-loopback``. A failure prints ``error: MESSAGE [reason] {details}`` on stderr and exits 1. The
developer server's own A2A tasks (``adk serve --a2a``) are listed by ``GET /dev/v1/a2a/tasks`` and the console's A2A
panel.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from adk_actors.cli.output import print_error, print_json
from adk_actors.errors import AdkError, ConfigError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register ``a2a`` and its actions on the ``adk`` subparsers."""
    group = sub.add_parser("a2a", help="A2A 1.0 agents", description="Talk to an A2A 1.0 agent without a node.")
    actions = group.add_subparsers(dest="a2a_command", metavar="ACTION", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("url", metavar="URL", help="the agent's origin (https://host[:port])")
    common.add_argument("--allow-http-loopback", action="store_true", help="accept http:// for a loopback host")
    common.add_argument("--token-env", default=None, metavar="NAME", help="environment variable with a bearer token")
    common.add_argument("--timeout", type=float, default=60.0, metavar="S", help="deadline of the call (seconds)")
    actions.add_parser("discover", parents=[common], help="fetch and check the Agent Card")
    send = actions.add_parser("send", parents=[common], help="send a message (blocking, or --stream)")
    send.add_argument("text")
    send.add_argument("--context", default=None, help="the contextId (continue a conversation)")
    send.add_argument("--task", default=None, help="the taskId (answer an input-required task)")
    send.add_argument("--stream", action="store_true", help="SendStreamingMessage; print every event")
    for name in ("get", "cancel"):
        actions.add_parser(name, parents=[common], help=f"{name} a task").add_argument("task_id")
    tasks = actions.add_parser("tasks", parents=[common], help="list the caller's tasks")
    tasks.add_argument("--context", default=None)
    tasks.add_argument("--status", default=None, help="a TASK_STATE_* name")
    group.set_defaults(handler=run)


def _auth(args: argparse.Namespace) -> Any:
    if not args.token_env:
        return None
    name = str(args.token_env)
    if not os.environ.get(name):
        raise ConfigError("the token variable is not set", reason="missing_token", details={"env": name[:64]})

    def headers() -> dict[str, str]:
        return {"Authorization": "Bearer " + os.environ.get(name, "")}

    return headers


def _scheme(card: Any) -> str | None:
    for name, scheme in (card.security_schemes or {}).items():
        if isinstance(scheme, dict) and any(
            k in scheme for k in ("httpAuthSecurityScheme", "openIdConnectSecurityScheme", "oauth2SecurityScheme")
        ):
            return str(name)
    return None


def run(args: argparse.Namespace) -> int:
    """``adk a2a ...``; returns the exit status."""
    from adk_actors import a2a

    try:
        card = a2a.discover(args.url, allow_http_loopback=args.allow_http_loopback, timeout_s=min(args.timeout, 30.0))
        if args.a2a_command == "discover":
            print_json(card.raw)
            return 0
        auth = _auth(args)
        with a2a.A2aClient(
            card,
            auth=auth,
            auth_scheme=_scheme(card) if auth is not None else None,
            timeout_s=args.timeout,
            allow_http_loopback=args.allow_http_loopback,
        ) as client:
            if args.a2a_command == "send":
                if args.stream:
                    print_json({"events": list(client.stream(args.text, context_id=args.context, task_id=args.task))})
                else:
                    print_json(client.send(args.text, context_id=args.context, task_id=args.task))
            elif args.a2a_command == "get":
                print_json(client.get(args.task_id))
            elif args.a2a_command == "cancel":
                print_json(client.cancel(args.task_id))
            else:
                filters = {k: v for k, v in (("context_id", args.context), ("status", args.status)) if v}
                print_json(client.list(**filters))
    except AdkError as err:
        print_error(err)
        return 1
    return 0
