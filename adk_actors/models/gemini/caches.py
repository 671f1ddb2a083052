"""Gemini ``cachedContents``: the stable prefix of a request, and creating and deleting a cache that holds it.

The prefix is what a ``generateContent`` request must omit when it names a cache: ``systemInstruction`` (the
config's instructions and ``system`` history entries), ``tools`` and ``toolConfig``. :func:`cache_prefix` builds it
(pure); :func:`create_cached_content` and :func:`delete_cached_content` are blocking calls for an I/O thread that
take the cancel token first, like the provider's calls.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from adk_actors.errors import ProviderError, ProviderHttpError
from adk_actors.models.cancel import CancelToken
from adk_actors.models.gemini.config import parse_config, resolve_api_key, resolve_base_url
from adk_actors.models.gemini.http_errors import error_from_body
from adk_actors.models.gemini.provider import _TRANSPORT_ERRORS, _encode, _read_capped, _transport_error
from adk_actors.models.gemini.transport import DEFAULT_HEADERS, CallGuard, release, send
from adk_actors.models.gemini.wire import prefix_members, system_parts_of

__all__ = ["CreatedCache", "cache_prefix", "create_cached_content", "delete_cached_content", "is_cache_not_found"]

_MAX_BODY = 1024 * 1024
"""A CachedContent answer is a few hundred bytes; anything past a MiB is refused."""
_NAME_RE = re.compile(r"^cachedContents/[A-Za-z0-9_-]{1,128}$")
_TIME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def cache_prefix(config: Mapping[str, Any], history: Sequence[Any], tools: Sequence[Any]) -> dict[str, Any]:
    """The ``CachedContent`` create body for this request's stable prefix (without ``ttl``), or ``{}`` when the
    request has no prefix (no instructions, tools or tool config).

    Raises:
        ConfigError: invalid config or tool declarations.
        ContentError: a malformed ``system`` history entry.
    """
    cfg = parse_config(config)
    members = prefix_members(cfg, system_parts_of(cfg, history), tools)
    if not members:
        return {}
    return {"model": f"models/{cfg.model}", **members}


class CreatedCache:
    """What a create answered: the resource name and how long the service keeps it."""

    __slots__ = ("expires_in_s", "name", "tokens")

    def __init__(self, name: str, expires_in_s: float, tokens: int) -> None:
        self.name = name
        self.expires_in_s = expires_in_s
        self.tokens = tokens

    def __reduce__(self) -> tuple[Any, ...]:
        return (CreatedCache, (self.name, self.expires_in_s, self.tokens))


def _headers(config: Mapping[str, Any]) -> tuple[str, dict[str, str], tuple[str, ...], float | None]:
    cfg = parse_config(config)
    key = resolve_api_key(cfg)
    headers = {**DEFAULT_HEADERS, "Content-Type": "application/json", "x-goog-api-key": key.reveal()}
    return resolve_base_url(cfg), headers, (key.reveal(),), cfg.request_timeout_s


def _expires_in(text: Any, now: _dt.datetime) -> float | None:
    if not isinstance(text, str):
        return None
    match = _TIME_RE.match(text)
    if match is None:
        return None
    fraction = (match.group(2) or ".0")[:7].ljust(7, "0")  # microseconds at most
    zone = "+00:00" if match.group(3) == "Z" else match.group(3)
    try:
        when = _dt.datetime.fromisoformat(f"{match.group(1)}{fraction}{zone}")
    except ValueError:
        return None
    return (when - now).total_seconds()


def _send(
    token: CancelToken | None,
    method: str,
    base: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None,
    timeout: float | None,
) -> tuple[int, bytes]:
    guard = CallGuard(token, timeout)
    with guard.active():
        try:
            resp = send(method, base, path, body=body, headers=headers, timeout_s=timeout)
        except _TRANSPORT_ERRORS as exc:
            raise _transport_error(guard, exc, streaming=False, started=False) from None
        try:
            return resp.status, _read_capped(resp, guard, _MAX_BODY, truncate=resp.status != 200)
        finally:
            release(resp)


def create_cached_content(
    token: CancelToken | None, config: Mapping[str, Any], prefix: Mapping[str, Any], ttl_s: float
) -> CreatedCache:
    """``POST /v1beta/cachedContents`` with ``prefix`` and ``ttl``; no retry (the caller decides).

    Raises:
        ProviderHttpError: a non-2xx answer (a prefix below the model's minimum is a 400).
        ProviderError: ``malformed_response``, ``timeout``, ``cancelled``, ``connection_error``, ``missing_api_key``.
    """
    base, headers, secrets, timeout = _headers(config)
    body = _encode({**prefix, "ttl": f"{ttl_s:.3f}s"})
    now = _dt.datetime.now(_dt.UTC)
    status, content = _send(token, "POST", base, "/v1beta/cachedContents", headers, body, timeout)
    if status != 200:
        raise error_from_body(status, content, secrets)
    try:
        payload = json.loads(content)
    except ValueError:
        payload = None
    name = payload.get("name") if isinstance(payload, dict) else None
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ProviderError("the cachedContents answer names no cache", reason="malformed_response")
    expires = _expires_in(payload.get("expireTime"), now)
    usage = payload.get("usageMetadata")
    tokens = usage.get("totalTokenCount") if isinstance(usage, dict) else None
    return CreatedCache(
        name,
        ttl_s if expires is None else min(expires, ttl_s),
        tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0,
    )


def delete_cached_content(token: CancelToken | None, config: Mapping[str, Any], name: str) -> bool:
    """``DELETE /v1beta/cachedContents/{id}``: True when deleted, False when the service no longer knows it.

    Raises:
        ProviderHttpError: another non-2xx answer.
        ProviderError: as :func:`create_cached_content`.
    """
    if not _NAME_RE.match(name):
        raise ProviderError("not a cachedContents resource name", reason="invalid_cache_name")
    base, headers, secrets, timeout = _headers(config)
    status, content = _send(token, "DELETE", base, f"/v1beta/{name}", headers, None, timeout)
    if status == 200:
        return True
    err = error_from_body(status, content, secrets)
    if is_cache_not_found(err):
        return False
    raise err


def is_cache_not_found(err: BaseException) -> bool:
    """Whether ``err`` is the service's answer for an unknown, expired or deleted cache (403, or 404)."""
    return isinstance(err, ProviderHttpError) and err.status in (403, 404)
