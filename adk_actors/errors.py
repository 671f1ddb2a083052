"""The one error tree of adk_actors.

Every failure a caller can see is an :class:`AdkError`. ``err.reason`` is the reference's reason tag as a
lowercase string (``"missing_api_key"``, ``"tool_catalog_changed"``) and ``err.details`` a JSON-safe dict of
structural context (names, ids, limits — never secrets, raw payloads or stack traces), both bounded on
construction (:func:`bounded_reason`, :func:`json_safe`) so a failure stays a small value wherever it travels.
Every class pickles and unpickles, including those with keyword-only constructors, because errors cross actor
processes as data.

::

    AdkError                               reason: any tag; base of everything below
    ├── ConfigError                        invalid settings / agent / runner config (unknown_key, invalid_value)
    ├── ValidationError                    a value at the boundary is malformed
    │   ├── ContentError                   content parts, MIME types, URIs, limits
    │   ├── EventError                     event decoding
    │   └── SchemaError                    JSON Schema compilation and argument validation
    ├── RuntimeFailure                     the actor runtime
    │   ├── SystemNotRunning               no actor system at that port / not started
    │   ├── AskTimeout                     an ask passed its deadline
    │   ├── ActorCrashed                   the target crashed while handling the request
    │   ├── NameNotFound                   a registry lookup found nothing
    │   └── WorkerError                    worker pool: worker_lost, unpicklable_callable, job_timeout
    ├── ProviderError                      a model provider failed
    │   ├── ProviderHttpError              non-2xx answer (status, Gemini error body parsed into details)
    │   │   └── RateLimited                429 (details.retry_delay_s when the server said so)
    │   └── StreamError                    malformed / truncated / empty SSE stream
    ├── ToolError                          a tool failed or could not be resolved
    ├── AgentError                         agent spec / tree / turn failures
    ├── SessionError                       session services
    │   ├── SessionNotFound                reason not_found
    │   └── ConcurrencyConflict            optimistic concurrency lost (reason stale_session / state_mismatch)
    ├── StorageError                       a store could not be opened / migrated / written
    ├── BudgetExceeded                     a configured budget ran out (max_llm_calls, bytes, steps)
    ├── PolicyDenied                       runtime policy or admission refused the work
    ├── PluginError                        a Runner plugin halted the run or failed closed (details: plugin, hook)
    ├── AuthError                          a token refused or not obtained (invalid_token, token_request_failed)
    ├── McpError                           an MCP connection, request or server (mcp_timeout, mcp_connection_closed)
    ├── A2aError                           an A2A request, task or peer (details.code: the JSON-RPC error code)
    ├── RunError                           stable runs
    │   └── RunNotFound                    reason not_found
    ├── TriggerError                       ambient triggers (trigger_queue_full, unknown_trigger, invalid_delivery)
    ├── LiveError                          Live sessions and voice bridges (principal_mismatch, live_session_limit)
    ├── RetryExhausted                     retry.execute ran out of attempts or time (last error in details)
    └── WorkflowError                      workflow compilation / execution
"""

from __future__ import annotations

import itertools
import math
from typing import Any, ClassVar

__all__ = [
    "MAX_DETAIL_BUDGET",
    "MAX_DETAIL_DEPTH",
    "MAX_DETAIL_ITEMS",
    "MAX_DETAIL_KEY",
    "MAX_DETAIL_STR",
    "MAX_REASON_CHARS",
    "A2aError",
    "ActorCrashed",
    "AdkError",
    "AgentError",
    "AskTimeout",
    "AuthError",
    "BudgetExceeded",
    "ConcurrencyConflict",
    "ConfigError",
    "ContentError",
    "EventError",
    "LiveError",
    "McpError",
    "NameNotFound",
    "PluginError",
    "PolicyDenied",
    "ProviderError",
    "ProviderHttpError",
    "RateLimited",
    "RetryExhausted",
    "RunError",
    "RunNotFound",
    "RuntimeFailure",
    "SchemaError",
    "SessionError",
    "SessionNotFound",
    "StorageError",
    "StreamError",
    "SystemNotRunning",
    "ToolError",
    "TriggerError",
    "ValidationError",
    "WorkerError",
    "WorkflowError",
    "bounded_reason",
    "error_from_dict",
    "json_safe",
]

MAX_REASON_CHARS = 256
"""Bound on an error's ``reason`` tag (longer ones are cut)."""
MAX_DETAIL_DEPTH = 8
"""Bound on the nesting of ``details`` (deeper values become ``"<depth>"``)."""
MAX_DETAIL_STR = 4096
"""Bound on one string in ``details`` (cut, with ``"…"`` appended)."""
MAX_DETAIL_KEY = 256
"""Bound on one key in ``details`` (cut, with ``"…"`` appended)."""
MAX_DETAIL_ITEMS = 64
"""Bound on the entries of one dict or list in ``details``: the first 63 are kept, then a marker (a key ``"…"``
with the number left out, or a list item ``"<N more>"``)."""
MAX_DETAIL_BUDGET = 65536
"""Bound on a whole ``details`` value: every value costs 1 and every string and key its length; once it is spent,
whatever is left becomes ``"…"``. So a ``details`` value stays well under 2 MiB of JSON."""

_INT_LIMIT = 1 << 63
_MORE_KEY = "…"


class _Budget:
    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_DETAIL_BUDGET


def json_safe(value: Any) -> Any:
    """Project ``value`` onto bounded JSON-safe data: dict[str, ...], list, str, int, finite float, bool, None.

    Unknown objects become their type name (never their ``repr``, which could carry a secret or a payload), and so
    do keys that are not strings or scalars. Integers outside 64 bits become ``"<int>"``; NUL characters and lone
    surrogates in strings and keys become U+FFFD, so any store can write the result. The result is bounded in
    depth, string and key length, entries per dict or list and overall size (the ``MAX_DETAIL_*`` constants), and
    projecting it again changes nothing.
    """
    return _safe(value, 0, _Budget())


def bounded_reason(reason: Any) -> str:
    """A reason tag cut to :data:`MAX_REASON_CHARS` (a non-string becomes its type name), storable as
    canonical JSON text like ``json_safe`` strings."""
    text = reason if isinstance(reason, str) else f"<{type(reason).__name__}>"
    return _storable(text[:MAX_REASON_CHARS])


def _storable(text: str) -> str:
    """``text`` with NUL characters and lone surrogates (which canonical JSON and UTF-8 refuse) replaced by
    U+FFFD, so every store accepts it; the length is unchanged."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def _cut(text: str, limit: int, budget: _Budget) -> str:
    room = max(0, min(limit, budget.left))
    return _storable(text if len(text) <= room else text[:room] + "…")


def _clip(text: str, limit: int, budget: _Budget) -> str:
    out = _cut(text, limit, budget)
    budget.left -= len(out)
    return out


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return str(key)
    return f"<{type(key).__name__}>"


def _safe(value: Any, depth: int, budget: _Budget) -> Any:
    if budget.left <= 0:
        return "…"
    budget.left -= 1
    if depth > MAX_DETAIL_DEPTH:
        return _clip("<depth>", MAX_DETAIL_STR, budget)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -_INT_LIMIT <= value < _INT_LIMIT else _clip("<int>", MAX_DETAIL_STR, budget)
    if isinstance(value, float):
        return value if math.isfinite(value) else _clip(str(value), MAX_DETAIL_STR, budget)
    if isinstance(value, str):
        return _clip(value, MAX_DETAIL_STR, budget)
    if isinstance(value, dict):
        entries = list(itertools.islice(value.items(), MAX_DETAIL_ITEMS))
        if len(value) > MAX_DETAIL_ITEMS:
            entries[-1] = (_MORE_KEY, len(value) - (MAX_DETAIL_ITEMS - 1))
        out: dict[str, Any] = {}
        for key, item in entries:
            if budget.left <= 0:
                out.setdefault(_MORE_KEY, "…")
                break
            text = _cut(_key(key), MAX_DETAIL_KEY, budget)
            if text in out:  # two keys cut to one: the first wins (so projecting again changes nothing)
                continue
            budget.left -= len(text)
            out[text] = _safe(item, depth + 1, budget)
        return out
    if isinstance(value, list | tuple | frozenset | set):
        if isinstance(value, set | frozenset):
            items = sorted(value, key=repr)[:MAX_DETAIL_ITEMS]
        else:
            items = list(itertools.islice(value, MAX_DETAIL_ITEMS))
        if len(value) > MAX_DETAIL_ITEMS:
            items[-1] = f"<{len(value) - (MAX_DETAIL_ITEMS - 1)} more>"
        return [_safe(item, depth + 1, budget) for item in items]
    return _clip(f"<{type(value).__name__}>", MAX_DETAIL_STR, budget)


class AdkError(Exception):
    """Base of every adk_actors error: a reason tag plus JSON-safe structural details."""

    default_reason: ClassVar[str] = "error"

    def __init__(
        self, message: str | None = None, *, reason: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        self.reason: str = bounded_reason(reason or self.default_reason)
        self.details: dict[str, Any] = json_safe(dict(details or {}))
        self.message: str = message or self.reason
        super().__init__(self.message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.reason, self.details))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reason={self.reason!r}, message={self.message!r})"

    def __str__(self) -> str:
        if self.message == self.reason:
            return self.reason
        return f"{self.reason}: {self.message}"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, AdkError)
            and (other.reason, other.message, other.details) == (self.reason, self.message, self.details)
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.reason, self.message))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe projection: ``{"type", "reason", "message", "details"}``."""
        return {"type": type(self).__name__, "reason": self.reason, "message": self.message, "details": self.details}


def _rebuild(cls: type[AdkError], message: str, reason: str, details: dict[str, Any]) -> AdkError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.message, err.reason, err.details = message, reason, details
    return err


class ConfigError(AdkError):
    """A configuration (settings, agent, runner, workflow) is invalid."""

    default_reason = "invalid_config"


class ValidationError(AdkError):
    """A value crossing a boundary is malformed."""

    default_reason = "invalid_value"


class ContentError(ValidationError):
    """Content parts, MIME types, URIs or content limits."""

    default_reason = "invalid_content"


class EventError(ValidationError):
    """An event could not be decoded or is malformed."""

    default_reason = "invalid_event"


class SchemaError(ValidationError):
    """A JSON Schema failed to compile, or arguments failed validation against one."""

    default_reason = "invalid_schema"


class RuntimeFailure(AdkError):
    """The actor runtime could not complete a request."""

    default_reason = "runtime_failure"


class SystemNotRunning(RuntimeFailure):
    """No actor system is running (or reachable) where one was expected."""

    default_reason = "system_not_running"


class AskTimeout(RuntimeFailure):
    """An ask did not get its reply before its deadline."""

    default_reason = "timeout"


class ActorCrashed(RuntimeFailure):
    """The target actor crashed while handling the request."""

    default_reason = "actor_crashed"


class NameNotFound(RuntimeFailure):
    """A registry lookup found no actor under that name."""

    default_reason = "name_not_found"


class WorkerError(RuntimeFailure):
    """The worker-process pool could not run a job (worker_lost, unpicklable_callable, job_timeout)."""

    default_reason = "worker_error"


class ProviderError(AdkError):
    """A model provider failed."""

    default_reason = "provider_error"


class ProviderHttpError(ProviderError):
    """The provider answered with a non-2xx status; ``details`` carries status and the parsed error body."""

    default_reason = "http_error"

    @property
    def status(self) -> int | None:
        value = self.details.get("status")
        return value if isinstance(value, int) else None


class RateLimited(ProviderHttpError):
    """The provider answered 429; ``details["retry_delay_s"]`` holds the server's retry delay when given."""

    default_reason = "rate_limited"


class StreamError(ProviderError):
    """A streamed response was malformed, truncated or empty."""

    default_reason = "stream_error"


class ToolError(AdkError):
    """A tool failed, timed out, or could not be resolved."""

    default_reason = "tool_error"


class AgentError(AdkError):
    """An agent specification, tree or turn failed."""

    default_reason = "agent_error"


class SessionError(AdkError):
    """A session service failed."""

    default_reason = "session_error"


class SessionNotFound(SessionError):
    """The session does not exist."""

    default_reason = "not_found"


class ConcurrencyConflict(SessionError):
    """An optimistic-concurrency check failed; nothing was written."""

    default_reason = "conflict"


class StorageError(AdkError):
    """A store could not be opened, migrated or written."""

    default_reason = "storage_error"


class BudgetExceeded(AdkError):
    """A configured budget (calls, rounds, bytes, steps, tokens) was exhausted."""

    default_reason = "budget_exceeded"


class PolicyDenied(AdkError):
    """Runtime policy or admission control refused the work."""

    default_reason = "policy_denied"


class PluginError(AdkError):
    """A Runner plugin halted the run (``plugin_halted``) or failed under ``failure_policy="closed"``
    (``plugin_timeout``, ``memory_limit``, ``plugin_raised``, ...); ``details`` name the plugin and the hook only."""

    default_reason = "plugin_failed"


class AuthError(AdkError):
    """Authentication failed or could not be done: a token refused (``invalid_token``, ``expired_token``,
    ``insufficient_scope``, ...) or not obtained (``token_request_failed``, ``token_endpoint_refused``, ...);
    ``details`` are structural, never a token or a secret."""

    default_reason = "auth_error"


class McpError(AdkError):
    """An MCP connection, request or server refused or failed (``mcp_timeout``, ``mcp_connection_closed``,
    ``mcp_message_too_large``, ``mcp_protocol_error``, ...); ``details`` are structural only."""

    default_reason = "mcp_error"


class A2aError(AdkError):
    """An A2A 1.0 request was refused or a peer failed (``task_not_found``, ``version_not_supported``,
    ``a2a_peer_error`` ...); ``details["code"]`` is the JSON-RPC error code of the protocol when there is one."""

    default_reason = "a2a_error"


class RunError(AdkError):
    """A stable-run operation failed."""

    default_reason = "run_error"


class RunNotFound(RunError):
    """No run with that id exists (or it was retained past its lifetime)."""

    default_reason = "not_found"


class TriggerError(AdkError):
    """An ambient trigger refused or could not find something: ``trigger_exists``, ``unknown_trigger``,
    ``trigger_queue_full``, ``invalid_delivery`` (``details["key"]``), ``event_too_large``, ``trigger_stopping``,
    ``unknown_event``."""

    default_reason = "trigger_error"


class LiveError(AdkError):
    """A Live session or voice bridge refused or failed an operation (``principal_mismatch``,
    ``live_session_limit``, ``subscriber_limit``, ``ingress_full``, ``live_not_active``, ...)."""

    default_reason = "live_failed"


class RetryExhausted(AdkError):
    """Every attempt failed (``retry_exhausted``) or the total deadline passed (``retry_deadline``);
    ``details["last_error"]`` is the last attempt's error as a dict."""

    default_reason = "retry_exhausted"


class WorkflowError(AdkError):
    """A workflow failed to compile or to execute."""

    default_reason = "workflow_error"


def _all_classes() -> dict[str, type[AdkError]]:
    found: dict[str, type[AdkError]] = {}
    stack: list[type[AdkError]] = [AdkError]
    while stack:
        cls = stack.pop()
        found[cls.__name__] = cls
        stack.extend(cls.__subclasses__())
    return found


def error_from_dict(data: dict[str, Any]) -> AdkError:
    """Rebuild an error from :meth:`AdkError.to_dict` output (unknown types become ``AdkError``)."""
    cls = _all_classes().get(str(data.get("type")), AdkError)
    return _rebuild(
        cls,
        str(data.get("message") or data.get("reason") or "error"),
        bounded_reason(str(data.get("reason") or cls.default_reason)),
        json_safe(dict(data.get("details") or {})),
    )
