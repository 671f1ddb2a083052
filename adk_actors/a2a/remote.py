"""A remote A2A 1.0 agent as a model provider: a local agent whose "model" is the remote agent.

::

    remote = A2aModel("https://agent.example.com", auth=tokens.headers, auth_scheme="company-oidc")
    spawn_agent("Poet", {"provider": remote, "description": "Writes poems (remote, over A2A)"}, [])
    # "Poet" is now an agent like any other: prompt it, run it under a Runner, or hand it to another agent as a
    # sub-agent or an AgentTool.

Each model turn sends the text of the last user entry of the history as one ``SendMessage`` (blocking) and answers
with the task's artifact text (the text parts of each artifact, artifacts separated by a newline), else the text of
the task's status message, else the text of a direct ``message`` answer. ``stream()`` uses
``SendStreamingMessage`` when the card declares streaming and passes each artifact chunk on as a delta.

Conversation state: every turn is sent **without** a ``contextId`` or ``taskId`` — a new remote task each time. The
local agent keeps the conversation (its session); the remote agent sees one self-contained request per turn. So an
``INPUT_REQUIRED`` answer is returned as the model's text (the local agent "asks"), and the user's reply reaches the
remote agent as a new request, not as the continuation of that task. Tools and system instructions of the local
agent are not sent (the remote agent has its own).

Failures are :class:`~adk_actors.errors.ProviderError`: ``a2a_task_failed`` when the remote task ends ``FAILED``,
``CANCELED`` or ``REJECTED`` (``details["state"]``, and the same value as ``details["cause"]``, a tag that agents
keep in their structural errors), ``a2a_no_user_text`` when the history has no user text, ``cancelled`` when the
cancel token fired (the HTTP request is aborted at once), and every client reason of
:mod:`adk_actors.a2a.client` (``a2a_timeout``, ``a2a_http_error``, ``task_not_found``...) under the same tag.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from adk_actors.a2a.client import (
    MAX_RESPONSE_BYTES,
    A2aClient,
    AgentCard,
    AuthHeaders,
    _check_timeout,
    _origin,
    discover,
)
from adk_actors.a2a.wire import INTERRUPTED, TERMINAL
from adk_actors.errors import A2aError, ConfigError, ProviderError
from adk_actors.runtime.cancel import CancelToken

__all__ = ["A2aModel", "answer_text"]

_FAILED = frozenset({"TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"})


def _text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _status_text(status: Any) -> str:
    message = status.get("message") if isinstance(status, dict) else None
    return _text(message.get("parts")) if isinstance(message, dict) else ""


def _failed(state: str) -> ProviderError:
    return ProviderError(
        "the remote A2A agent did not complete the task",
        reason="a2a_task_failed",
        details={"state": state, "cause": state},
    )


def answer_text(result: Mapping[str, Any]) -> str:
    """The answer of a ``SendMessage`` result: artifact text, else the status message's text, else a direct
    message's text.

    Raises:
        ProviderError: ``a2a_task_failed`` for a task that ended ``FAILED``, ``CANCELED`` or ``REJECTED``.
    """
    if "message" in result:
        return _text(result["message"].get("parts"))
    task = result["task"]
    state = task["status"]["state"]
    if state in _FAILED:
        raise _failed(state)
    artifacts = [_text(a.get("parts")) for a in task.get("artifacts") or () if isinstance(a, dict)]
    if any(artifacts) and state not in INTERRUPTED:
        return "\n".join(a for a in artifacts if a)
    return _status_text(task["status"]) or "\n".join(a for a in artifacts if a)


def _user_text(history: Sequence[Any]) -> str:
    for entry in reversed(history):
        if not isinstance(entry, Mapping) or entry.get("role") != "user":
            continue
        content = entry.get("content")
        if isinstance(content, str):
            text = content
        else:
            to_dict = getattr(content, "to_dict", None)
            raw = to_dict() if callable(to_dict) else content
            parts = raw.get("parts") if isinstance(raw, Mapping) else None
            text = "".join(
                p.get("text", "")
                for p in parts or ()
                if isinstance(p, Mapping) and p.get("type") == "text" and not p.get("thought")
            )
        if text:
            return text
        break
    raise ProviderError("the last user entry of the history has no text to send", reason="a2a_no_user_text", details={})


class A2aModel:
    """A model provider that answers by asking a remote A2A 1.0 agent (see the module docstring).

    Picklable (agent configs cross processes): the card, once discovered, travels with it; the HTTP client does not
    and is made again where the object is used. ``auth`` must then be picklable too (a module-level function or a
    token manager object).
    """

    def __init__(
        self,
        url_or_card: str | AgentCard,
        *,
        allow_http_loopback: bool = False,
        auth: AuthHeaders | None = None,
        auth_scheme: str | None = None,
        timeout_s: float = 60.0,
        discovery_auth: AuthHeaders | None = None,
        allowed_interface_origins: tuple[str, ...] = (),
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        """
        Raises:
            ConfigError: ``invalid_value`` for a malformed URL or option (nothing is fetched here).
        """
        try:
            if isinstance(url_or_card, str):
                _origin(url_or_card, allow_http_loopback, "url")
            elif not isinstance(url_or_card, AgentCard):
                raise A2aError("A2aModel takes a URL or an AgentCard", reason="invalid_value", details={})
            _check_timeout(timeout_s)
        except A2aError as err:
            raise ConfigError(err.message, reason="invalid_value", details={"cause": err.reason}) from None
        self.url = url_or_card if isinstance(url_or_card, str) else url_or_card.origin
        self.card: AgentCard | None = url_or_card if isinstance(url_or_card, AgentCard) else None
        self.allow_http_loopback = allow_http_loopback
        self.auth = auth
        self.auth_scheme = auth_scheme
        self.timeout_s = float(timeout_s)
        self.discovery_auth = discovery_auth
        self.allowed_interface_origins = tuple(allowed_interface_origins)
        self.max_response_bytes = max_response_bytes
        self._lock = threading.Lock()
        self._client: A2aClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_lock"] = None
        state["_client"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"A2aModel({self.url!r})"

    def capabilities(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        """Close the pooled HTTP connections (the next call opens new ones)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def _client_for(self, deadline: float, cancel: CancelToken | None) -> A2aClient:
        with self._lock:
            if self._client is not None:
                return self._client
            card = self.card
        if card is None:
            card = discover(
                self.url,
                allow_http_loopback=self.allow_http_loopback,
                timeout_s=max(0.001, deadline - time.monotonic()),
                auth=self.discovery_auth,
                allowed_interface_origins=self.allowed_interface_origins,
                cancel=cancel,
            )
        client = A2aClient(
            card,
            auth=self.auth,
            auth_scheme=self.auth_scheme,
            timeout_s=self.timeout_s,
            max_response_bytes=self.max_response_bytes,
            allow_http_loopback=self.allow_http_loopback,
        )
        with self._lock:
            if self._client is None:
                self.card, self._client = card, client
                return client
        client.close()  # another thread won the race
        return self._client

    def _run(self, cancel: CancelToken | None, call: Callable[[A2aClient, float], str]) -> str:
        if cancel is not None:
            cancel.raise_if_cancelled()
        deadline = time.monotonic() + self.timeout_s
        try:
            client = self._client_for(deadline, cancel)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise A2aError("the A2A request timed out", reason="a2a_timeout", details={})
            return call(client, remaining)
        except A2aError as err:
            if cancel is not None:
                cancel.raise_if_cancelled()
            raise ProviderError(err.message, reason=err.reason, details=err.details) from None

    def generate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Any],
        tools: Sequence[Any] = (),
        *,
        cancel: CancelToken | None = None,
    ) -> str:
        """Ask the remote agent (blocking ``SendMessage``) and return its answer text.

        Raises:
            ProviderError: see the module docstring.
        """
        text = _user_text(history)
        return self._run(
            cancel, lambda client, remaining: answer_text(client.send(text, timeout_s=remaining, cancel=cancel))
        )

    def stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Any],
        tools: Sequence[Any],
        on_delta: Callable[[str], None],
        *,
        cancel: CancelToken | None = None,
    ) -> str:
        """As :meth:`generate`, passing each artifact chunk's text to ``on_delta`` as it arrives (one delta with the
        whole answer when the card does not declare streaming).

        Raises:
            ProviderError: see the module docstring.
        """
        text = _user_text(history)

        def call(client: A2aClient, remaining: float) -> str:
            if not client.card.streaming:
                answer = answer_text(client.send(text, timeout_s=remaining, cancel=cancel))
                if answer:
                    on_delta(answer)
                return answer
            return _stream_answer(client, text, remaining, cancel, on_delta)

        return self._run(cancel, call)


def _stream_answer(
    client: A2aClient, text: str, remaining: float, cancel: CancelToken | None, on_delta: Callable[[str], None]
) -> str:
    artifacts: dict[str, str] = {}
    status_text = ""
    state = ""
    with client.stream(text, timeout_s=remaining, cancel=cancel) as events:
        for event in events:
            if "message" in event:
                answer = _text(event["message"].get("parts"))
                if answer:
                    on_delta(answer)
                return answer
            if "task" in event or "statusUpdate" in event:
                status = (event.get("task") or event["statusUpdate"])["status"]
                state = status["state"]
                status_text = _status_text(status) or status_text
                if "task" in event:
                    for artifact in event["task"].get("artifacts") or ():
                        artifacts[str(artifact.get("artifactId"))] = _text(artifact.get("parts"))
                continue
            update = event["artifactUpdate"]
            artifact = update["artifact"]
            key = str(artifact.get("artifactId"))
            chunk = _text(artifact.get("parts"))
            if key not in artifacts and any(artifacts.values()) and chunk:
                on_delta("\n")
            artifacts[key] = artifacts.get(key, "") + chunk if update.get("append") else chunk
            if chunk:
                on_delta(chunk)
    if state in _FAILED:
        raise _failed(state)
    if state not in TERMINAL and state not in INTERRUPTED:
        raise ProviderError(
            "the remote A2A stream ended before the task did",
            reason="a2a_stream_incomplete",
            details={"state": state or "none", "cause": state or "none"},
        )
    joined = "\n".join(a for a in artifacts.values() if a)
    if joined and state not in INTERRUPTED:
        return joined
    answer = status_text or joined
    if answer and not joined:
        on_delta(answer)
    return answer
