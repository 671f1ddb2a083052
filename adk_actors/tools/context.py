"""What a tool sees of its invocation: ids, a read-only scoped-state view and an action recorder.

A ``ToolContext`` deliberately carries no service handles (sessions, artifacts, memory, credentials): a tool
records state changes in :attr:`ToolContext.actions`, and the runner commits them in the tool's response event.
Contexts pickle, because tools may run in worker processes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from adk_actors.content.canonical import check_json_safe
from adk_actors.content.json_values import copy_json
from adk_actors.errors import ToolError, ValidationError
from adk_actors.events import EventActions
from adk_actors.secrets import prune_secrets

__all__ = ["ReadOnlyState", "ToolActions", "ToolContext"]

MAX_STATE_KEY_CHARS = 256


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
            raise ToolError("tool state must be a mapping", reason="invalid_state",
                            details={"field": "state", "type": type(data).__name__})
        try:
            copied, _ = copy_json(dict(data or {}), field="state")
        except ValidationError as exc:
            raise ToolError("tool state is not JSON-safe", reason="invalid_state",
                            details={"field": "state", "rule": exc.reason}) from None
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
    """The side effects a tool asks for; the runner turns them into the response event's ``EventActions``."""

    state_delta: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Scoped state keys to JSON values."""
    escalate: bool = False
    """Whether to escalate to the parent agent."""
    transfer_to_agent: str | None = None
    """An agent to transfer control to."""

    def set_state(self, key: str, value: Any) -> None:
        """Record ``state[key] = value`` (a private JSON copy).

        Raises:
            ToolError: reason ``invalid_state`` when the key is not a bounded non-empty str or the value is not
                JSON-safe.
        """
        if not isinstance(key, str) or not key or len(key) > MAX_STATE_KEY_CHARS or not _is_json_text(key):
            raise ToolError("state keys are non-empty bounded str without NUL or lone surrogates",
                            reason="invalid_state", details={"field": "key", "max_chars": MAX_STATE_KEY_CHARS})
        try:
            self.state_delta[key] = copy_json(value, field="value")[0]
        except ValidationError as exc:
            raise ToolError("state value is not JSON-safe", reason="invalid_state",
                            details={"field": "value", "rule": exc.reason}) from None

    def to_event_actions(self) -> EventActions:
        """The recorded actions as an :class:`EventActions`.

        Raises:
            EventError: a recorded value is malformed.
        """
        return EventActions(state_delta=self.state_delta, escalate=self.escalate,
                            transfer_to_agent=self.transfer_to_agent)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """The invocation a tool call belongs to, as the reference's tool context (no service handles)."""

    invocation_id: str
    """The invocation (turn) id."""
    agent_name: str
    """The agent whose model called the tool."""
    function_call_id: str | None = None
    """The provider's function-call id, when it gave one."""
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

    def __post_init__(self) -> None:
        for name in ("invocation_id", "agent_name", "app_name", "user_id", "session_id"):
            if not isinstance(getattr(self, name), str):
                raise ToolError("tool context field must be a str", reason="invalid_context",
                                details={"field": name})
        if self.function_call_id is not None and not isinstance(self.function_call_id, str):
            raise ToolError("tool context field must be a str", reason="invalid_context",
                            details={"field": "function_call_id"})
        if not isinstance(self.state, ReadOnlyState):
            object.__setattr__(self, "state", ReadOnlyState(self.state))
        if not isinstance(self.actions, ToolActions):
            raise ToolError("tool context actions must be ToolActions", reason="invalid_context",
                            details={"field": "actions"})

    def get_state(self, key: str, default: Any = None) -> Any:
        """Read ``key``, seeing this call's own pending writes first."""
        if key in self.actions.state_delta:
            return copy_json(self.actions.state_delta[key])[0]
        return self.state.get(key, default)

    def redacted(self) -> ToolContext:
        """A copy for a remote toolset: secret-named state keys pruned and a fresh action recorder."""
        return dataclasses.replace(self, state=ReadOnlyState(prune_secrets(dict(self.state.items()))),
                                   actions=ToolActions())
