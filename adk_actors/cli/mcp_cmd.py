"""``adk mcp list-tools``: connect to an MCP server, list its tools and disconnect, without a node.

::

    adk mcp list-tools [--json] [--timeout S] CMD [ARGS...]
    adk mcp list-tools [--json] [--timeout S] URL [--token-env NAME] [--allow-http-loopback]

A target that starts with ``http://`` or ``https://`` is a Streamable HTTP endpoint; anything else is a command
started as a stdio server, and every word after it is its argument (so this command's options go before it). The
client is the one connections use (:class:`adk_actors.mcp.core.Connection`), driven on this process's MCP loop
with no actor system: the same option checks, handshake, deadlines and reasons. ``--token-env NAME`` names the
environment variable holding the bearer token, so the token is never on the command line; it is sent only in the
``Authorization`` header and scrubbed from everything printed.

Plain output: the server's name and version, the negotiated protocol version, then one line per tool (its name and
the first line of its description; control characters a server sends are shown as ``?``). ``--json``: one object
``{"ok": true, "transport", "protocol_version", "server": {...}, "tools": [{"name", "description",
"input_schema"}]}``. A failure prints ``error: MESSAGE [reason] {details}`` on stderr (``{"ok": false, "error"}``
on stdout with ``--json``) and exits 1; bad arguments exit 2 (``invalid_arguments`` for words after a URL).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from adk_actors.cli.output import print_error, print_json, print_text
from adk_actors.errors import AdkError, ConfigError

__all__ = ["EXIT_USAGE", "add_parser", "list_tools"]

EXIT_USAGE = 2
"""Exit status for bad arguments (argparse's)."""
_CLOSE_S = 15.0
_GRACE_S = 2.0
_URL_PREFIXES = ("http://", "https://")
_MAX_LINE = 200
"""Longest description line printed (plain output)."""


def add_parser(sub: Any) -> None:
    """Register ``mcp list-tools`` on the ``adk`` subparsers."""
    group = sub.add_parser("mcp", help="MCP servers", description="Check MCP servers without a node.")
    actions = group.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list-tools",
        help="connect to an MCP server and list its tools",
        description="Connect to an MCP server (a stdio command or a Streamable HTTP URL), print the negotiated "
        "protocol version, the server and its tools, and disconnect. Options go before a command: the words after "
        "it are the command's arguments.",
    )
    _add_options(listing)
    listing.add_argument("target", metavar="CMD|URL", help="the server's command, or its http(s) endpoint URL")
    listing.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="the command's arguments")
    listing.set_defaults(handler=list_tools)


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--token-env", default=None, metavar="NAME", help="(URL) the environment variable holding the bearer token"
    )
    parser.add_argument("--allow-http-loopback", action="store_true", help="(URL) allow plain http to a loopback host")
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="deadline of the handshake and of the listing"
    )


def _url_options(args: argparse.Namespace) -> argparse.Namespace:
    """For a URL target, the options given after it too (a URL takes no arguments).

    Raises:
        ConfigError: ``invalid_arguments`` for anything else after the URL.
    """
    if not args.args:
        return args
    after = argparse.ArgumentParser(prog="adk mcp list-tools URL", add_help=False, exit_on_error=False)
    _add_options(after)
    try:
        extra, rest = after.parse_known_args(args.args)
    except argparse.ArgumentError:
        rest = ["?"]
    if rest:
        raise ConfigError(
            "after a URL only --json, --token-env NAME, --allow-http-loopback and --timeout S are allowed",
            reason="invalid_arguments",
            details={"key": "args"},
        )
    merged = vars(args).copy()
    for key, value in vars(extra).items():
        if value != after.get_default(key):
            merged[key] = value
    merged["args"] = []
    return argparse.Namespace(**merged)


def _connect_options(args: argparse.Namespace) -> tuple[str, str, dict[str, Any]]:
    """``(transport, target, options)`` for :func:`adk_actors.mcp.core.check_options`."""
    timeout = args.timeout
    options: dict[str, Any] = {"connect_timeout_s": timeout, "request_timeout_s": timeout}
    if args.target.startswith(_URL_PREFIXES):
        if args.allow_http_loopback:
            options["allow_http_loopback"] = True
        if args.token_env is not None:
            token = os.environ.get(args.token_env, "")
            if not token:
                raise ConfigError(
                    "the environment variable named by --token-env is not set",
                    reason="missing_token",
                    details={"env": args.token_env[:128]},
                )
            options["token"] = token
        return "http", args.target, options
    for flag, given in (
        ("--token-env", args.token_env is not None),
        ("--allow-http-loopback", args.allow_http_loopback),
    ):
        if given:
            raise ConfigError(f"{flag} goes with a URL", reason="invalid_value", details={"key": flag})
    args_list = args.args[1:] if args.args[:1] == ["--"] else args.args
    options["args"] = list(args_list)
    return "stdio", args.target, options


def _listing(transport: str, target: str, options: dict[str, Any]) -> dict[str, Any]:
    """Connect, list the tools, disconnect (always)."""
    from adk_actors.mcp import loop
    from adk_actors.mcp.core import Connection, check_options

    checked = check_options(transport, target, **options)
    connection = Connection(checked)
    try:
        init = loop.run(connection.open(), timeout=checked.connect_timeout_s + _GRACE_S)
        limit = checked.request_timeout_s
        tools = loop.run(connection.request("list_tools", {}, limit), timeout=limit + _GRACE_S)
    finally:
        loop.run(connection.close(), timeout=_CLOSE_S)
    info = init.get("serverInfo") or {}
    return {
        "ok": True,
        "transport": checked.transport,
        "protocol_version": str(init.get("protocolVersion", "")),
        "server": {k: info[k] for k in ("name", "title", "version") if isinstance(info.get(k), str)},
        "tools": [
            {
                "name": str(t.get("name", "")),
                "description": str(t.get("description") or ""),
                "input_schema": t.get("inputSchema") or {},
            }
            for t in tools
            if isinstance(t, dict)
        ],
    }


def _printable(text: str, limit: int = _MAX_LINE) -> str:
    """``text`` safe for a terminal: control characters (escape sequences a server might send) become ``?``."""
    cleaned = "".join(c if c.isprintable() else "?" for c in text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def _print_plain(found: dict[str, Any]) -> None:
    server = found["server"]
    label = " ".join(server[k] for k in ("name", "version") if server.get(k)) or "(unnamed server)"
    print_text(f"server: {_printable(label)}")
    print_text(f"protocol: {_printable(found['protocol_version'])} ({found['transport']})")
    tools = found["tools"]
    print_text(f"tools: {len(tools)}")
    width = max((len(_printable(t["name"], 64)) for t in tools), default=0)
    for tool in tools:
        first = tool["description"].strip().splitlines()[0] if tool["description"].strip() else ""
        print_text(f"  {_printable(tool['name'], 64).ljust(width)}  {_printable(first)}".rstrip())


def list_tools(args: argparse.Namespace) -> int:
    """``adk mcp list-tools``; returns the exit status."""
    json_mode = bool(args.json)
    if args.target.startswith(_URL_PREFIXES):
        try:
            args = _url_options(args)
        except ConfigError as err:
            print_error(err, json_mode=json_mode)
            return EXIT_USAGE
        json_mode = bool(args.json)
    try:
        found = _listing(*_connect_options(args))
    except AdkError as err:
        print_error(err, json_mode=json_mode)
        return 1
    if json_mode:
        print_json(found)
    else:
        _print_plain(found)
    return 0
