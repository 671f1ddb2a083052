"""Memory, artifact and context commands against a running developer server (``/dev/v1`` over HTTP).

::

    adk inspect memory APP USER                                   [--url URL]
    adk inspect artifacts APP USER SESSION [--limit N] [--cursor NAME]
    adk inspect artifact APP USER SESSION --name NAME [--limit N] [--cursor VERSION]
    adk inspect context APP USER SESSION
    adk inspect context-lifecycle APP USER SESSION --model MODEL
    adk memory search APP USER --query TEXT [--limit N]
    adk memory erase APP USER entry|session|user IDENTIFIER --confirm-json JSON
    adk artifact delete APP USER SESSION NAME latest|all|VERSION --confirm-json JSON
    adk context-cache invalidate APP USER SESSION --model MODEL --confirm-json JSON

The services live in the process that serves ``/dev/v1`` (its application handed them to ``dev_app``), so these
commands talk HTTP to that server rather than attaching to the node: ``--url`` (default
``http://127.0.0.1:<dev_port>``), the token from ``ADK_DEV_TOKEN`` (never an argument). Plain ``http://`` is accepted
only for a loopback host; anything else must be ``https://``. Destructive commands send ``--confirm-json`` as the
confirmation object, which the server compares with the expected one exactly. Each prints one JSON line; a failure
prints ``error: MESSAGE [reason] {details}`` on stderr and exits 1 (``developer_api_unavailable`` with
``connection_refused`` when nothing listens at the URL).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any
from urllib.parse import quote, urlsplit

from adk_actors.cli.output import print_error, print_json
from adk_actors.errors import (
    AdkError,
    AuthError,
    ConfigError,
    NameNotFound,
    PolicyDenied,
    StorageError,
    ValidationError,
)
from adk_actors.settings import is_loopback_host, load_settings

__all__ = ["INSPECT_WHATS", "add_inspect_parsers", "add_parser", "inspect", "request"]

INSPECT_WHATS = ("memory", "artifacts", "artifact", "context", "context-lifecycle")
"""The ``adk inspect`` subjects this module serves."""
TOKEN_ENV = "ADK_DEV_TOKEN"
_STATUS_ERRORS: dict[int, type[AdkError]] = {
    400: ValidationError,
    401: AuthError,
    403: PolicyDenied,
    404: NameNotFound,
    413: ValidationError,
    415: ValidationError,
    503: StorageError,
}
_MAX_ANSWER_BYTES = 4 * 1024 * 1024


def _common() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--url", default=None, help="the developer server (default: http://127.0.0.1:<dev_port>)")
    parent.add_argument("--timeout", type=float, default=30.0, metavar="S", help="deadline of the call (seconds)")
    return parent


def _scope(parser: argparse.ArgumentParser, session: bool = True) -> argparse.ArgumentParser:
    parser.add_argument("app")
    parser.add_argument("user")
    if session:
        parser.add_argument("session_id")
    return parser


def add_inspect_parsers(what: Any) -> None:
    """Add the resource subjects to ``adk inspect``'s subparsers (dispatched by :func:`inspect`)."""
    common = [_common()]
    _scope(what.add_parser("memory", help="a user's memory adapter: capabilities and count", parents=common), False)
    names = _scope(what.add_parser("artifacts", help="a page of a session's artifact names", parents=common))
    names.add_argument("--limit", type=int, default=20)
    names.add_argument("--cursor", default=None, help="the last name of the previous page")
    versions = _scope(what.add_parser("artifact", help="a page of one artifact's versions", parents=common))
    versions.add_argument("--name", required=True)
    versions.add_argument("--limit", type=int, default=20)
    versions.add_argument("--cursor", type=int, default=None, help="the last version of the previous page")
    _scope(what.add_parser("context", help="a session's context counts and fingerprint", parents=common))
    lifecycle = _scope(
        what.add_parser("context-lifecycle", help="compaction checkpoint and cache counts", parents=common)
    )
    lifecycle.add_argument("--model", required=True)


def add_parser(sub: Any) -> None:
    """Register ``memory``, ``artifact`` and ``context-cache`` on the ``adk`` subparsers."""
    common = [_common()]
    memory = sub.add_parser("memory", help="search or erase a user's memory through the developer server")
    actions = memory.add_subparsers(dest="resource_action", metavar="ACTION", required=True)
    search = _scope(actions.add_parser("search", help="bounded lexical search", parents=common), False)
    search.add_argument("--query", required=True)
    search.add_argument("--limit", type=int, default=10)
    erase = _scope(
        actions.add_parser("erase", help="erase an entry, a session's entries or the user's", parents=common), False
    )
    erase.add_argument("target", choices=["entry", "session", "user"])
    erase.add_argument("identifier")
    erase.add_argument("--confirm-json", required=True, help="the exact confirmation object")
    memory.set_defaults(handler=run, resource_group="memory")

    artifact = sub.add_parser("artifact", help="delete artifact versions through the developer server")
    actions = artifact.add_subparsers(dest="resource_action", metavar="ACTION", required=True)
    delete = _scope(actions.add_parser("delete", help="delete latest, all or one version", parents=common))
    delete.add_argument("name")
    delete.add_argument("selector", help="latest, all or a version number")
    delete.add_argument("--confirm-json", required=True, help="the exact confirmation object")
    artifact.set_defaults(handler=run, resource_group="artifact")

    cache = sub.add_parser("context-cache", help="invalidate a context-cache scope through the developer server")
    actions = cache.add_subparsers(dest="resource_action", metavar="ACTION", required=True)
    invalidate = _scope(
        actions.add_parser("invalidate", help="invalidate the cache scope across sessions", parents=common)
    )
    invalidate.add_argument("--model", required=True)
    invalidate.add_argument("--confirm-json", required=True, help="the exact confirmation object")
    cache.set_defaults(handler=run, resource_group="context-cache")


# ---- HTTP ----------------------------------------------------------------------------------------------------------


def _base(url: str | None) -> str:
    if url is None:
        return f"http://127.0.0.1:{load_settings().dev_port}"
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host or parts.query or parts.fragment or parts.username:
        raise ConfigError("--url is http(s)://host[:port]", reason="invalid_value", details={"key": "url"})
    if parts.scheme == "http" and not is_loopback_host(host):
        raise ConfigError(
            "plain http is accepted only for a loopback host; use https", reason="insecure_url", details={"key": "url"}
        )
    return url.rstrip("/")


def _token() -> str:
    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        raise ConfigError("the developer token is not set", reason="missing_token", details={"env": TOKEN_ENV})
    return token


def _error(status: int, payload: Any) -> AdkError:
    body = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("reason"), str):
        return StorageError(
            "the developer server answered out of shape", reason="developer_api_error", details={"status": status}
        )
    details = {k: v for k, v in body.items() if k not in ("reason", "message")}
    cls = _STATUS_ERRORS.get(status, AdkError)
    message = body.get("message") if isinstance(body.get("message"), str) else body["reason"]
    return cls(str(message), reason=body["reason"], details={**details, "status": status})


def request(
    url: str | None, method: str, path: str, *, params: Any = None, body: Any = None, timeout: float = 30.0
) -> Any:
    """One call of the developer API: the answer's JSON.

    Raises:
        ConfigError: a bad ``--url``, ``missing_token``.
        StorageError: ``developer_api_unavailable`` (nothing listens, timeout, a broken connection).
        AdkError: the server's error, by its reason and details.
    """
    import httpx

    base, token = _base(url), _token()
    try:
        with httpx.Client(base_url=base, timeout=timeout, trust_env=False, follow_redirects=False) as client:
            answer = client.request(
                method, path, params=params, json=body, headers={"Authorization": f"Bearer {token}"}
            )
    except httpx.ConnectError:
        raise StorageError(
            "no developer server answers at that URL", reason="developer_api_unavailable",
            details={"problem": "connection_refused"},
        ) from None  # fmt: skip
    except httpx.TimeoutException:
        raise StorageError(
            "the developer server did not answer in time", reason="developer_api_unavailable",
            details={"problem": "timeout"},
        ) from None  # fmt: skip
    except httpx.HTTPError:
        raise StorageError(
            "the developer server connection failed", reason="developer_api_unavailable",
            details={"problem": "connection_failed"},
        ) from None  # fmt: skip
    if len(answer.content) > _MAX_ANSWER_BYTES:
        raise StorageError(
            "the answer is too large", reason="developer_api_error", details={"status": answer.status_code}
        )
    try:
        payload = answer.json()
    except ValueError:
        payload = None
    if answer.status_code >= 400:
        raise _error(answer.status_code, payload)
    if not isinstance(payload, dict):
        raise StorageError(
            "the developer server answered out of shape",
            reason="developer_api_error",
            details={"status": answer.status_code},
        )
    return payload


def _path(*parts: str) -> str:
    return "/".join(quote(p, safe="") for p in parts)


def _confirmation(raw: str) -> Any:
    try:
        value = json.loads(raw)
    except ValueError:
        raise ValidationError(
            "--confirm-json must be JSON", reason="invalid_value", details={"key": "confirm_json"}
        ) from None
    if not isinstance(value, dict):
        raise ValidationError(
            "--confirm-json must be a JSON object", reason="invalid_value", details={"key": "confirm_json"}
        )
    return value


# ---- commands ------------------------------------------------------------------------------------------------------


def _inspect_call(args: argparse.Namespace) -> Any:
    def get(path: str, params: Any = None) -> Any:
        return request(args.url, "GET", "/dev/v1/" + path, params=params, timeout=args.timeout)

    if args.what == "memory":
        return get("memory/" + _path(args.app, args.user))
    scope = _path(args.app, args.user, args.session_id)
    if args.what == "artifacts":
        params = {"limit": args.limit, **({"cursor": args.cursor} if args.cursor is not None else {})}
        return get("artifacts/" + scope, params)
    if args.what == "artifact":
        params = {
            "name": args.name,
            "limit": args.limit,
            **({"cursor": args.cursor} if args.cursor is not None else {}),
        }
        return get(f"artifacts/{scope}/versions", params)
    if args.what == "context":
        return get("context/" + scope)
    return get(f"context/{scope}/lifecycle", {"model": args.model})


def inspect(args: argparse.Namespace) -> int:
    """``adk inspect memory|artifacts|artifact|context|context-lifecycle``; returns the exit status."""
    try:
        print_json(_inspect_call(args))
    except AdkError as err:
        print_error(err)
        return 1
    return 0


def _run_call(args: argparse.Namespace) -> Any:
    def post(path: str, body: Any) -> Any:
        return request(args.url, "POST", "/dev/v1/" + path, body=body, timeout=args.timeout)

    if args.resource_group == "memory":
        user = _path(args.app, args.user)
        if args.resource_action == "search":
            return post(f"memory/{user}/search", {"query": args.query, "limit": args.limit})
        body = {"target": args.target, "identifier": args.identifier, "confirmation": _confirmation(args.confirm_json)}
        return post(f"memory/{user}/erase", body)
    scope = _path(args.app, args.user, args.session_id)
    confirmation = _confirmation(args.confirm_json)
    if args.resource_group == "artifact":
        return post(
            f"artifacts/{scope}/delete", {"name": args.name, "selector": args.selector, "confirmation": confirmation}
        )
    return post(f"context/{scope}/cache/invalidate", {"model": args.model, "confirmation": confirmation})


def run(args: argparse.Namespace) -> int:
    """``adk memory|artifact|context-cache ...``; returns the exit status."""
    try:
        print_json(_run_call(args))
    except AdkError as err:
        print_error(err)
        return 1
    return 0
