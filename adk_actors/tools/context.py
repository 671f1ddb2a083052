"""What a tool sees of its invocation: ids, a read-only scoped-state view, the agent ancestry and an action
recorder.

A ``ToolContext`` deliberately carries no service handles (sessions, artifacts, memory, credentials): a tool
records state changes and control actions in :attr:`ToolContext.actions`, and the agent carries them into the
round's tool event (see :class:`ToolActions`). Contexts pickle, because tools may run in worker processes.

While a tool runs, its context's agent ancestry is the *current ancestry* (:func:`current_ancestry`): an agent the
tool invokes through the facade (``adk_actors.invoke``, ``AgentTool.execute``) joins that ancestry instead of
starting a fresh one, so a tool cannot reset cycle and depth protection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from adk_actors.content.canonical import check_json_safe
from adk_actors.content.json_values import copy_json
from adk_actors.errors import ToolError, ValidationError
from adk_actors.events import EventActions
from adk_actors.secrets import prune_secrets

__all__ = ["ReadOnlyState", "ToolActions", "ToolContext", "current_ancestry", "running"]

MAX_STATE_KEY_CHARS = 256
MAX_ANCESTRY = 65
"""Agents in one delegation chain: the root plus at most ``MAX_TREE_DEPTH`` (64) delegations."""
MAX_CONTEXT_EFFECTS = 64
"""Most context effects one tool call records (later ones are dropped)."""
MAX_AGENT_NAME_CHARS = 64
MAX_REQUEST_PARTS = 32
"""Most content parts one tool call hands to the next model request (later ones are dropped)."""

_ANCESTRY: ContextVar[tuple[str, ...]] = ContextVar("adk_tool_ancestry", default=())


def current_ancestry() -> tuple[str, ...]:
    """The agent ancestry of the tool running in this context (root first, the calling agent last), ``()``
    outside a tool."""
    return _ANCESTRY.get()


@contextmanager
def running(context: ToolContext) -> Iterator[None]:
    """Make ``context``'s ancestry the current one while a tool runs (see :func:`current_ancestry`)."""
    token = _ANCESTRY.set(context.ancestry)
    try:
        yield
    finally:
        _ANCESTRY.reset(token)


def _is_json_text(text: str) -> bool:
    try:
        check_json_safe(text)
    except ValidationError:
        return False
    return True


class ReadOnlyState(Mapping[str, Any]):
    """An immutable, picklable view of scoped state (values are private JSON copies)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        if data is not None and not isinstance(data, Mapping):
            raise ToolError(
                "tool state must be a mapping",
                reason="invalid_state",
                details={"field": "state", "type": type(data).__name__},
            )
        try:
            copied, _ = copy_json(dict(data or {}), field="state")
        except ValidationError as exc:
            raise ToolError(
                "tool state is not JSON-safe", reason="invalid_state", details={"field": "state", "rule": exc.reason}
            ) from None
        self._data: dict[str, Any] = copied

    def __getitem__(self, key: str) -> Any:
        # Hand out copies so a tool cannot mutate nested values behind the read-only view.
        return copy_json(self._data[key])[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"ReadOnlyState(keys={sorted(self._data)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(other.items()) == self._data

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._data)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (ReadOnlyState, (self._data,))

    def to_dict(self) -> dict[str, Any]:
        """A private JSON-safe copy of the state."""
        return copy_json(self._data)[0]


@dataclass(slots=True, kw_only=True)
class ToolActions:
    """The side effects a tool asks for. The agent carries them, merged over the round's calls, into the round's
    tool event's ``EventActions`` under a Runner, and honours them on every path:

    * ``state_delta`` is committed with that event (below a Runner, through the caller's session; without a
      session it is dropped);
    * ``escalate`` ends a :func:`~adk_actors.loop` orchestration after the turn, as an approval does;
    * ``transfer_to_agent`` hands the turn to that sub-agent once the round is answered: it answers the turn's
      input and its output is the turn's (a name that is not one of the agent's sub-agents fails the call with
      ``invalid_transfer_target``).
    """

    state_delta: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Scoped state keys to JSON values."""
    escalate: bool = False
    """Whether to escalate to the orchestration that runs this agent (ends a loop)."""
    transfer_to_agent: str | None = None
    """A sub-agent to hand the turn to."""
    context_effects: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Metadata-only records of what the tool changed through its context (artifact versions saved or deleted),
    stored in the round's tool event (``actions.context_effects``)."""
    request_parts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Content parts (``text``, ``inline_data``) for the next model request of this invocation only, under a Runner:
    the ``load_artifacts`` tool puts the artifacts it loaded here. Never stored in an event or the session."""

    def set_state(self, key: str, value: Any) -> None:
        """Record ``state[key] = value`` (a private JSON copy).

        Raises:
            ToolError: reason ``invalid_state`` when the key is not a bounded non-empty str or the value is not
                JSON-safe.
        """
        if not isinstance(key, str) or not key or len(key) > MAX_STATE_KEY_CHARS or not _is_json_text(key):
            raise ToolError(
                "state keys are non-empty bounded str without NUL or lone surrogates",
                reason="invalid_state",
                details={"field": "key", "max_chars": MAX_STATE_KEY_CHARS},
            )
        try:
            self.state_delta[key] = copy_json(value, field="value")[0]
        except ValidationError as exc:
            raise ToolError(
                "state value is not JSON-safe", reason="invalid_state", details={"field": "value", "rule": exc.reason}
            ) from None

    def control(self) -> dict[str, Any]:
        """The recorded control actions as JSON (``{"escalate": True}``, ``{"transfer_to_agent": name}``,
        ``context_effects``, ``request_parts``; only those set).

        Raises:
            ToolError: reason ``invalid_action`` when ``escalate`` is not a bool or ``transfer_to_agent`` is not a
                bounded non-empty str.
        """
        out: dict[str, Any] = {}
        if not isinstance(self.escalate, bool):
            raise ToolError("escalate is a bool", reason="invalid_action", details={"field": "escalate"})
        target = self.transfer_to_agent
        if target is not None and (
            not isinstance(target, str) or not target or len(target) > MAX_AGENT_NAME_CHARS or not _is_json_text(target)
        ):
            raise ToolError(
                "transfer_to_agent is an agent name", reason="invalid_action", details={"field": "transfer_to_agent"}
            )
        if self.escalate:
            out["escalate"] = True
        if target is not None:
            out["transfer_to_agent"] = target
        if self.context_effects:
            out["context_effects"] = [dict(e) for e in self.context_effects[:MAX_CONTEXT_EFFECTS]]
        if self.request_parts:
            out["request_parts"] = [dict(p) for p in self.request_parts[:MAX_REQUEST_PARTS] if isinstance(p, dict)]
        return out

    def to_event_actions(self) -> EventActions:
        """The recorded actions as an :class:`EventActions`.

        Raises:
            EventError: a recorded value is malformed.
        """
        return EventActions(
            state_delta=self.state_delta, escalate=self.escalate, transfer_to_agent=self.transfer_to_agent
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """The invocation a tool call belongs to, as the reference's tool context (no service handles)."""

    invocation_id: str
    """The invocation (turn) id."""
    agent_name: str
    """The agent whose model called the tool."""
    function_call_id: str | None = None
    """The provider's function-call id, when it gave one (also :attr:`call_id`, the reference's name)."""
    app_name: str = ""
    """The Runner's app name (empty for direct agent calls)."""
    user_id: str = ""
    """The session's user id (empty for direct agent calls)."""
    session_id: str = ""
    """The session id (empty for direct agent calls)."""
    state: Mapping[str, Any] = dataclasses.field(default_factory=ReadOnlyState)
    """Read-only view of the invocation's scoped state (``x``, ``user:x``, ``app:x``, ``temp:x``)."""
    actions: ToolActions = dataclasses.field(default_factory=ToolActions)
    """Where the tool records state changes and control actions."""
    ancestry: tuple[str, ...] = ()
    """The agents of this invocation's delegation chain, root first, the calling agent last (private: a remote
    toolset's :meth:`redacted` context does not carry it)."""
    traceparent: str = ""
    """The W3C ``traceparent`` of the span this call belongs to (``""``: none): put it on the tool's outbound
    requests (``adk_actors.observability.inject_headers``) to continue the trace. Correlation, never authorization."""
    memory: Any = dataclasses.field(default=None, repr=False)
    """The Runner's memory service bound to this app and user (an ``adk_actors.memory.access.MemoryAccess``),
    used through :meth:`search_memory`; ``None`` without one."""
    artifacts: Any = dataclasses.field(default=None, repr=False)
    """The Runner's artifact service bound to this session (an ``adk_actors.artifacts.access.ArtifactAccess``),
    used through :meth:`save_artifact` and the other artifact methods; ``None`` without one."""

    @property
    def call_id(self) -> str | None:
        """The provider's function-call id (the reference's ``call_id``; same as :attr:`function_call_id`)."""
        return self.function_call_id

    def __post_init__(self) -> None:
        for name in ("invocation_id", "agent_name", "app_name", "user_id", "session_id", "traceparent"):
            if not isinstance(getattr(self, name), str):
                raise ToolError("tool context field must be a str", reason="invalid_context", details={"field": name})
        if self.function_call_id is not None and not isinstance(self.function_call_id, str):
            raise ToolError(
                "tool context field must be a str", reason="invalid_context", details={"field": "function_call_id"}
            )
        ancestry = tuple(self.ancestry) if isinstance(self.ancestry, list | tuple) else None
        if (
            ancestry is None
            or len(ancestry) > MAX_ANCESTRY
            or not all(isinstance(a, str) and 0 < len(a) <= MAX_AGENT_NAME_CHARS for a in ancestry)
        ):
            raise ToolError(
                "tool context ancestry is a bounded list of agent names",
                reason="invalid_context",
                details={"field": "ancestry", "max": MAX_ANCESTRY},
            )
        object.__setattr__(self, "ancestry", ancestry)
        if not isinstance(self.state, ReadOnlyState):
            object.__setattr__(self, "state", ReadOnlyState(self.state))
        if not isinstance(self.actions, ToolActions):
            raise ToolError(
                "tool context actions must be ToolActions", reason="invalid_context", details={"field": "actions"}
            )

    def get_state(self, key: str, default: Any = None) -> Any:
        """Read ``key``, seeing this call's own pending writes first."""
        if key in self.actions.state_delta:
            return copy_json(self.actions.state_delta[key])[0]
        return self.state.get(key, default)

    def redacted(self) -> ToolContext:
        """A copy for a remote toolset: secret-named state keys pruned, no ancestry, no artifact service and a fresh
        action recorder."""
        return dataclasses.replace(
            self,
            state=ReadOnlyState(prune_secrets(dict(self.state.items()))),
            actions=ToolActions(),
            ancestry=(),
            artifacts=None,
            memory=None,
        )

    # ---- memory (docs/MEMORY.md) ---------------------------------------------------------------------------------
    def search_memory(self, query: str, *, limit: int = 5, filter: Mapping[str, Any] | None = None) -> list[Any]:
        """The user's long-term memory entries best matching ``query`` (public views: ``id``, ``content``,
        ``score``, ``rank``, ``timestamp``).

        Raises:
            ToolError: ``no_memory_service``; ValidationError: the service's input reasons.
        """
        if self.memory is None:
            raise ToolError("no memory service here (a Runner's memory_svc)", reason="no_memory_service")
        hits: list[Any] = self.memory.search(query, limit=limit, filter=filter)
        return hits

    # ---- artifacts (docs/ARTIFACTS.md) ------------------------------------------------------------------------
    def _artifacts(self) -> Any:
        if self.artifacts is None:
            raise ToolError("no artifact service here (a Runner's artifact_svc)", reason="no_artifact_service")
        return self.artifacts

    def save_artifact(
        self,
        name: str,
        data: bytes,
        *,
        mime_type: str = "application/octet-stream",
        metadata: Mapping[str, Any] | None = None,
        scope: str = "session",
    ) -> dict[str, Any]:
        """Save a new version of artifact ``name`` (in the session's scope by default; ``"user"`` or ``"app"``);
        returns its metadata (``scope``, ``name``, ``version``, ``digest``, ``size``, ``mime_type``), which is also
        recorded as a context effect of the call.

        Raises:
            ToolError: ``no_artifact_service``; ValidationError/StorageError: the service's reasons.
        """
        record = self._artifacts().save(scope, name, data, mime_type, dict(metadata or {}))
        self.actions.context_effects.append({"type": "artifact_saved", **record})
        return dict(record)

    def load_artifact(self, name: str, version: int | None = None, *, scope: str = "session") -> Any:
        """The artifact (its latest version, or ``version``): an ``Artifact`` with ``data`` and metadata.

        Raises:
            ToolError: ``no_artifact_service``; StorageError: ``artifact_not_found`` ...
        """
        return self._artifacts().load(scope, name, version)

    def list_artifacts(self, *, scope: str = "session", limit: int = 100, cursor: str | None = None) -> Any:
        """``(names, next_cursor)`` of the scope's artifacts."""
        return self._artifacts().names(scope, limit, cursor)

    def list_artifact_versions(self, name: str, *, scope: str = "session") -> list[dict[str, Any]]:
        """The versions of artifact ``name`` (metadata only), oldest first."""
        versions: list[dict[str, Any]] = self._artifacts().versions(scope, name)
        return versions

    def delete_artifact(self, name: str, version: int | None = None, *, scope: str = "session") -> int:
        """Delete one version, or every version, of ``name`` (numbers are never reused); a context effect."""
        deleted = int(self._artifacts().delete(scope, name, version))
        self.actions.context_effects.append(
            {"type": "artifact_deleted", "scope": scope, "name": name, "version": version, "deleted": deleted}
        )
        return deleted
