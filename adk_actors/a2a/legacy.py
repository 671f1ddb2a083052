"""The client of the legacy simple HTTP endpoint ``POST /a2a/prompt`` (``adk_actors.web.legacy_a2a``).

::

    from adk_actors.a2a.legacy import prompt

    prompt("http://127.0.0.1:8080/a2a/prompt", "HttpAgent", "Hello from HTTP")   # -> "Hello! ..."

This is the reference's small JSON protocol, not A2A 1.0: no card, no tasks, no authentication. The endpoint only
ever listens on loopback, so the client only talks to loopback: a clear ``http://`` URL whose host is an IPv4
``127.0.0.0/8`` address, ``::1`` or ``localhost``. Like the A2A client it ignores proxies and ``.netrc`` from the
environment, never follows a redirect, bounds the whole call by one absolute deadline and the answer by a byte
count.

Errors are :class:`~adk_actors.errors.A2aError`: the server's own reason for an error answer (``agent_not_found``,
``body_too_large``, ``invalid_agent_name``, an agent's turn reason...; ``details["status"]`` is the HTTP status and
the server's message text stays out), else ``legacy_a2a_requires_loopback``, ``invalid_url``, ``invalid_value``,
``legacy_a2a_http_error`` (an error answer without a reason, or a redirect), ``a2a_invalid_response``,
``a2a_response_too_large``, ``a2a_timeout`` and ``a2a_connection_failed``.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from typing import Any, Final

from adk_actors.a2a.client import _check_bound, _check_timeout, _Exchange, _invalid, _json, _new_session
from adk_actors.errors import A2aError
from adk_actors.runtime.threadtimers import thread_timers
from adk_actors.settings import is_loopback_host

__all__ = ["LEGACY_MAX_RESPONSE_BYTES", "LEGACY_TIMEOUT_S", "prompt"]

LEGACY_TIMEOUT_S: Final = 120.0
LEGACY_MAX_RESPONSE_BYTES: Final = 1024 * 1024
_METHOD: Final = "legacy_prompt"
_REASON = re.compile(r"[a-z][a-z0-9_]{0,63}")
_MAX_ERROR_BYTES: Final = 64 * 1024


def _loopback_url(url: Any) -> str:
    """``url`` if it is a clear http URL on a loopback host, without credentials or fragment.

    Raises:
        A2aError: ``invalid_url`` (not a URL), ``legacy_a2a_requires_loopback`` (another scheme or host).
    """
    if not isinstance(url, str) or len(url) > 2048 or not url.isprintable():
        raise A2aError("the URL must be a short printable string", reason="invalid_url", details={"field": "url"})
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        raise A2aError("not a valid URL", reason="invalid_url", details={"field": "url"}) from None
    if not host or parts.username is not None or parts.password is not None or parts.fragment:
        raise A2aError(
            "the URL is an absolute http URL without credentials", reason="invalid_url", details={"field": "url"}
        )
    if parts.scheme.lower() != "http" or not is_loopback_host(host):
        raise A2aError(
            "the legacy endpoint is reached only over clear http on loopback (127.0.0.0/8, ::1, localhost)",
            reason="legacy_a2a_requires_loopback",
            details={"field": "url"},
        )
    return url


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise A2aError(f"{field} must be a string", reason="invalid_value", details={"field": field})
    return value


def _server_error(status: int, body: bytes) -> A2aError:
    """The :class:`A2aError` of an error answer: the server's reason when it sent one in the edge's shape."""
    reason = "legacy_a2a_http_error"
    try:
        member = json.loads(body.decode("utf-8")).get("error")
        found = member.get("reason") if isinstance(member, dict) else None
        if isinstance(found, str) and _REASON.fullmatch(found):
            reason = found
    except (ValueError, AttributeError, RecursionError):
        pass
    return A2aError(
        f"the legacy A2A server answered HTTP {status}", reason=reason, details={"status": status, "method": _METHOD}
    )


def prompt(
    url: str,
    agent: str,
    text: str,
    *,
    timeout_s: float = LEGACY_TIMEOUT_S,
    max_response_bytes: int = LEGACY_MAX_RESPONSE_BYTES,
) -> str:
    """Send one prompt to ``agent`` behind the legacy endpoint at ``url`` and return its answer text.

    Args:
        url: The endpoint's full URL (``http://127.0.0.1:8080/a2a/prompt``); loopback only.
        agent: The agent's name.
        text: The prompt.
        timeout_s: One deadline for the whole call (connect, send, wait, read), in seconds.
        max_response_bytes: Largest answer body read.

    Raises:
        A2aError: the server's reason (``details["status"]``), or the client's reasons listed in the module.
    """
    target = _loopback_url(url)
    # ASCII JSON: a lone surrogate travels as its escape and the server refuses it (invalid_utf8), rather than
    # this client failing to encode it.
    body = json.dumps({"agent": _text(agent, "agent"), "prompt": _text(text, "text")}).encode("ascii")
    deadline = time.monotonic() + _check_timeout(timeout_s)
    limit = _check_bound(max_response_bytes, "max_response_bytes")
    headers = {"Content-Type": "application/json", "Accept": "application/json", "Accept-Encoding": "identity"}
    session = _new_session()
    exchange = _Exchange(_METHOD, deadline, None)
    try:
        exchange.open(session, "POST", target, headers, body)
        assert exchange.response is not None
        status = exchange.response.status_code
        if 300 <= status < 400:
            raise A2aError(
                "the legacy A2A server answered with a redirect, which is not followed",
                reason="legacy_a2a_http_error",
                details={"status": status, "method": _METHOD},
            )
        if status != 200:
            try:
                error_body = exchange.read_all(min(limit, _MAX_ERROR_BYTES))
            except A2aError:
                error_body = b""  # too large or cut off: the status alone is reported
            raise _server_error(status, error_body)
        answer = _json(exchange.read_all(limit), _METHOD)
    finally:
        exchange.close()
        session.close()
        thread_timers.stop_if_idle()
    if not isinstance(answer, dict) or set(answer) != {"response"} or not isinstance(answer["response"], str):
        raise _invalid(_METHOD, 'the answer is not {"response": text}')
    return answer["response"]
