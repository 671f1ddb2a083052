"""What the ``adk`` commands print: JSON lines and error reports, with every known secret value scrubbed.

Errors are reported by reason, message and structural details (``AdkError.to_dict``), never by value; on top of
that every line written here goes through :func:`safe`, which removes the environment's API keys and every value
registered as a ``Secret`` in this process, so a key cannot reach the terminal even through an unexpected path.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from adk_actors.content.model import Content
from adk_actors.errors import AdkError
from adk_actors.logs import SECRET_ENV_VARS
from adk_actors.secrets import scrub_text

__all__ = ["error_dict", "output_value", "print_error", "print_json", "print_text", "safe"]


def safe(text: str) -> str:
    """``text`` without any known secret value (environment keys, registered ``Secret`` values)."""
    return scrub_text(text, [v for v in (os.environ.get(n, "") for n in SECRET_ENV_VARS) if v])


def error_dict(err: AdkError) -> dict[str, Any]:
    """``{"type", "reason", "message", "details"}``.

    Details are structural by contract (names, paths, limits); they are not key-pruned, because ``details["key"]``
    names the offending config key. Known secret values are scrubbed when the line is printed.
    """
    return err.to_dict()


def output_value(value: Any) -> Any:
    """An agent output as JSON data: text stays a ``str``, content becomes its dict."""
    if isinstance(value, Content):
        return value.to_dict()
    return value


def print_json(value: Any, stream: TextIO | None = None) -> None:
    """One compact JSON line (sorted keys), flushed."""
    out = stream or sys.stdout
    out.write(safe(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)) + "\n")
    out.flush()


def print_text(text: str, stream: TextIO | None = None, *, end: str = "\n") -> None:
    """Plain text, flushed."""
    out = stream or sys.stdout
    out.write(safe(text) + end)
    out.flush()


def print_error(err: AdkError, *, json_mode: bool = False, stream: TextIO | None = None) -> None:
    """Report an error: a ``{"ok": false, "error": ...}`` line in JSON mode, else ``error: MESSAGE [reason]``."""
    payload = error_dict(err)
    if json_mode:
        print_json({"ok": False, "error": payload}, stream or sys.stdout)
        return
    details = f" {json.dumps(payload['details'], sort_keys=True)}" if payload["details"] else ""
    print_text(f"error: {payload['message']} [{payload['reason']}]{details}", stream or sys.stderr)


def port_parent() -> Any:
    """The ``--port`` option shared by the node commands' subcommands (an ``argparse`` parent parser)."""
    import argparse

    port = argparse.ArgumentParser(add_help=False)
    port.add_argument("--port", type=int, default=None, help="admin port (default: settings / $ADK_SYSTEM_PORT)")
    return port
