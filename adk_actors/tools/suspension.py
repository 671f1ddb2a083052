"""Tool suspensions: a tool returns :func:`long_running` or :func:`request_credential` to pause the invocation
without a blocked worker.

Under a Runner the invocation pauses with ``actions.pause.reason == "long_running"``; the application reports
progress with ``Runner.update_long_running`` and finishes the call with ``Runner.resume`` (one terminal response
whose ``operation_id`` matches and whose ``status`` is ``completed``, ``failed`` or ``cancelled``). On every
other path (``prompt``, ``invoke``, delegation) there is no durable resume channel, so the call fails closed with
``long_running_requires_runner``.

A tool that needs a user's OAuth credential returns :func:`request_credential` with the
:class:`~adk_actors.auth.flow.CredentialRequest` of a flow it began: the invocation pauses with
``actions.pause.reason == "credential"`` and details that carry the flow reference, provider, scopes, expiry and a
digest of the state (never the state or the authorization URI). The application sends the user to the URI
(``AuthorizationFlows.authorization_uri``), completes the flow at its callback and resumes with the answer
``{"flow_ref", "correlation_id"}`` (or ``{"cancelled": true}``); the call then runs again and finds the stored
credential. Without a Runner the call fails closed with ``credential_requires_runner``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from adk_actors.errors import ToolError

__all__ = [
    "SUSPENSION_KEY",
    "TERMINAL_STATUSES",
    "long_running",
    "request_credential",
    "requires_runner",
    "suspension_of",
]

SUSPENSION_KEY = "adk_suspension"
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
_MAX_ID_CHARS = 128
_MAX_MESSAGE_CHARS = 1024


def long_running(operation_id: str, message: str = "") -> dict[str, Any]:
    """The result a tool returns to suspend: ``operation_id`` names the external work, ``message`` is shown.

    Raises:
        ToolError: reason ``invalid_suspension`` for an empty or oversized id or message.
    """
    if not isinstance(operation_id, str) or not operation_id or len(operation_id) > _MAX_ID_CHARS:
        raise ToolError(
            "a long-running operation id is a non-empty short string",
            reason="invalid_suspension",
            details={"field": "operation_id"},
        )
    if not isinstance(message, str) or len(message) > _MAX_MESSAGE_CHARS:
        raise ToolError(
            "a long-running message is a short string", reason="invalid_suspension", details={"field": "message"}
        )
    return {SUSPENSION_KEY: "long_running", "operation_id": operation_id, "message": message}


def state_digest(state: str) -> str:
    """The digest a credential pause carries in place of the flow's state (the resume proves it knows the state)."""
    return "sha256:" + hashlib.sha256(state.encode("utf-8", "surrogatepass")).hexdigest()


_CREDENTIAL_FIELDS = ("flow_ref", "provider", "scopes", "expires_at", "pkce_method", "state_digest")


def request_credential(request: Any) -> dict[str, Any]:
    """The result a tool returns to pause for a user's credential (``request``: a begun flow's
    :class:`~adk_actors.auth.flow.CredentialRequest`; only its public part is kept).

    Raises:
        ToolError: reason ``invalid_suspension`` when ``request`` is not a credential request.
    """
    public = getattr(request, "public", None)
    if not callable(public):
        raise ToolError(
            "request_credential needs the CredentialRequest of a begun flow",
            reason="invalid_suspension",
            details={"field": "request"},
        )
    details = public()
    return {SUSPENSION_KEY: "credential", **{k: details[k] for k in _CREDENTIAL_FIELDS}}


def _credential(response: dict[str, Any]) -> dict[str, Any] | None:
    ref, provider, scopes = response.get("flow_ref"), response.get("provider"), response.get("scopes")
    digest, expires = response.get("state_digest"), response.get("expires_at")
    if not (isinstance(ref, str) and ref.startswith("flow_") and len(ref) <= _MAX_ID_CHARS):
        return None
    if not (isinstance(provider, str) and provider and len(provider) <= 64 and isinstance(digest, str)):
        return None
    if not isinstance(scopes, list) or not all(isinstance(x, str) for x in scopes) or len(scopes) > 64:
        return None
    if isinstance(expires, bool) or not isinstance(expires, int | float) or len(digest) > 80:
        return None
    return {
        "kind": "credential",
        "flow_ref": ref,
        "provider": provider,
        "scopes": [x[:128] for x in scopes],
        "expires_at": float(expires),
        "pkce_method": "S256",
        "state_digest": digest,
    }


def suspension_of(response: Any) -> dict[str, Any] | None:
    """The suspension a function-response object asks for, or ``None``: ``{"kind": "long_running",
    "operation_id", "message"}`` or ``{"kind": "credential", "flow_ref", "provider", "scopes",
    "expires_at", "pkce_method", "state_digest"}``."""
    if not isinstance(response, dict):
        return None
    kind = response.get(SUSPENSION_KEY)
    if kind == "credential":
        return _credential(response)
    if kind != "long_running":
        return None
    operation_id, message = response.get("operation_id"), response.get("message", "")
    if not isinstance(operation_id, str) or not operation_id or not isinstance(message, str):
        return None
    return {
        "kind": "long_running",
        "operation_id": operation_id[:_MAX_ID_CHARS],
        "message": message[:_MAX_MESSAGE_CHARS],
    }


def requires_runner(suspension: dict[str, Any], tool: str) -> ToolError:
    """The error a suspension gets where no Runner can resume it (``long_running_requires_runner`` or
    ``credential_requires_runner``)."""
    if suspension.get("kind") == "credential":
        return ToolError(
            "the tool asks for a user credential, which needs a runner",
            reason="credential_requires_runner",
            details={"tool": tool[:64]},
        )
    return ToolError(
        "the tool suspends as long-running work, which needs a runner",
        reason="long_running_requires_runner",
        details={"tool": tool[:64]},
    )
