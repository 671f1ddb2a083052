"""The A2A server's task store: bounded, principal-scoped, with an ordered event log per task (pure; no I/O).

One store belongs to one :func:`~adk_actors.web.a2a_app`; it is used from the app's event loop only, so it needs
no lock. A task records what the protocol shows (state, status message, history, artifacts) and what the server
needs to drive it (the stable run that does the work, the open pause). Every change appends a ``StreamResponse``
(``statusUpdate`` or ``artifactUpdate``) to the task's event log under the next sequence number; SSE streams send
those numbers as event ids, so a subscriber that reconnects with ``Last-Event-ID`` resumes inside the retained
window. Subscribers are bounded queues: a subscriber whose queue is full is detached (its stream ends; it
reconnects from its cursor) so a slow reader never holds the store.

Scoping: a task keeps only the SHA-256 scope of its principal. Looking up, listing, cancelling or subscribing to
another principal's task answers exactly like an unknown task.

Bounds (:class:`A2aLimits`, the reference's): retained tasks, active tasks, events per task, subscribers per task,
a subscriber's queue, retention after a task ends, and byte caps on input, a message, an artifact, the history
and a whole task.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from adk_actors.a2a.wire import INTERRUPTED, TERMINAL, Code, a2a_error, new_id, now, status
from adk_actors.errors import ConfigError

__all__ = ["A2aLimits", "Subscriber", "Task", "TaskStore", "page_offset", "page_token"]


@dataclass(frozen=True, slots=True, kw_only=True)
class A2aLimits:
    """The A2A server's bounds (defaults are the reference's)."""

    task_timeout_s: float = 60.0
    """How long a task may work before it is cancelled and failed (``task_timeout``)."""
    retention_s: float = 300.0
    """How long an ended task stays readable."""
    max_tasks: int = 1000
    max_active: int = 100
    max_events: int = 256
    max_subscribers_per_task: int = 64
    max_subscriber_queue: int = 8
    max_input_bytes: int = 1024 * 1024
    """The JSON-RPC request body."""
    max_message_bytes: int = 512 * 1024
    max_task_bytes: int = 4 * 1024 * 1024
    max_artifact_bytes: int = 2 * 1024 * 1024
    max_history_bytes: int = 2 * 1024 * 1024
    max_history_messages: int = 128
    max_artifacts: int = 128
    max_concurrent_streams: int = 256

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(
                    f"{item.name} must be a positive number", reason="invalid_value", details={"key": item.name}
                )


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))


@dataclass(slots=True)
class Subscriber:
    """One open stream on a task: a bounded queue of ``(seq, StreamResponse)``; ``None`` ends it."""

    queue: asyncio.Queue[tuple[int, dict[str, Any]] | None]
    detached: bool = False


@dataclass(slots=True)
class Task:
    id: str
    context_id: str
    scope: str
    state: str = "TASK_STATE_SUBMITTED"
    timestamp: str = field(default_factory=now)
    status_message: dict[str, Any] | None = None
    history: deque[dict[str, Any]] = field(default_factory=deque)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    events: deque[tuple[int, dict[str, Any]]] = field(default_factory=deque)
    seq: int = 0
    run_id: str = ""
    pause: Any = None
    """The open pause (``actions.pause`` of the run's pause event) while the task is interrupted."""
    ended_at: float | None = None
    updated: float = field(default_factory=time.monotonic)
    subscribers: list[Subscriber] = field(default_factory=list)
    history_bytes: int = 0
    artifact_bytes: int = 0
    deadline: float = 0.0
    run_count: int = 0

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def interrupted(self) -> bool:
        return self.state in INTERRUPTED

    def snapshot(self, *, history_length: int | None = None, artifacts: bool = True) -> dict[str, Any]:
        """The protocol's ``Task`` object."""
        out: dict[str, Any] = {
            "id": self.id,
            "contextId": self.context_id,
            "status": status(self.state, self.status_message, self.timestamp),
        }
        history = list(self.history)
        if history_length is not None:
            history = history[-history_length:] if history_length > 0 else []
        if history:
            out["history"] = history
        if artifacts and self.artifacts:
            out["artifacts"] = list(self.artifacts)
        return out


class TaskStore:
    """The tasks of one A2A server (see the module docstring)."""

    def __init__(self, limits: A2aLimits, *, clock: Any = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self.tasks: dict[str, Task] = {}
        self.created = self.expired = self.detached = 0

    # ---- lookup ------------------------------------------------------------------------------------------------
    def get(self, task_id: Any, scope: str) -> Task:
        """The caller's task (another principal's task is not found, exactly like an unknown id).

        Raises:
            A2aError: ``TASK_NOT_FOUND`` (-32001).
        """
        self.purge()
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None or task.scope != scope:
            raise a2a_error(Code.TASK_NOT_FOUND, "Task not found", "task_not_found")
        return task

    def active(self) -> int:
        return sum(1 for t in self.tasks.values() if not t.terminal and not t.interrupted)

    def purge(self) -> None:
        """Drop ended tasks past their retention."""
        horizon = self.clock() - self.limits.retention_s
        for task_id in [k for k, t in self.tasks.items() if t.ended_at is not None and t.ended_at < horizon]:
            self._drop(task_id)
            self.expired += 1

    def _drop(self, task_id: str) -> None:
        task = self.tasks.pop(task_id)
        for sub in task.subscribers:
            self._close(sub)

    # ---- creation ----------------------------------------------------------------------------------------------
    def create(self, scope: str, context_id: str, message: dict[str, Any]) -> Task:
        """A new ``SUBMITTED`` task holding the user's first message.

        Raises:
            A2aError: ``too_many_active_tasks`` / ``too_many_tasks`` (-32603 with that reason).
        """
        self.purge()
        if self.active() >= self.limits.max_active:
            raise a2a_error(
                Code.INTERNAL,
                "too many active tasks; retry later",
                "too_many_active_tasks",
                limit=self.limits.max_active,
            )
        if len(self.tasks) >= self.limits.max_tasks:
            ended = sorted((t for t in self.tasks.values() if t.ended_at is not None), key=lambda t: t.ended_at or 0.0)
            if not ended:
                raise a2a_error(
                    Code.INTERNAL, "too many tasks; retry later", "too_many_tasks", limit=self.limits.max_tasks
                )
            self._drop(ended[0].id)
            self.expired += 1
        task = Task(id=new_id(), context_id=context_id, scope=scope)
        task.deadline = self.clock() + self.limits.task_timeout_s
        self.tasks[task.id] = task
        self.created += 1
        self.add_history(task, message)
        return task

    # ---- changes -----------------------------------------------------------------------------------------------
    def add_history(self, task: Task, message: dict[str, Any]) -> None:
        """Append a message to the task's history (ids filled in; oldest dropped past the bounds)."""
        message = {**message, "taskId": task.id, "contextId": task.context_id}
        size = _size(message)
        task.history.append(message)
        task.history_bytes += size
        while task.history and (
            len(task.history) > self.limits.max_history_messages or task.history_bytes > self.limits.max_history_bytes
        ):
            task.history_bytes -= _size(task.history.popleft())

    def set_state(self, task: Task, state: str, message: dict[str, Any] | None = None) -> None:
        """Move the task to ``state`` and publish a ``statusUpdate`` (a no-op once the task is terminal)."""
        if task.terminal:
            return
        task.state = state
        task.timestamp = now()
        task.status_message = message
        task.updated = self.clock()
        if message is not None:
            self.add_history(task, message)
        if state in TERMINAL:
            task.ended_at = self.clock()
            task.pause = None
        update = {"taskId": task.id, "contextId": task.context_id, "status": status(state, message, task.timestamp)}
        self._publish(task, {"statusUpdate": update})

    def add_artifact(self, task: Task, parts: list[dict[str, Any]], *, name: str = "answer") -> None:
        """Attach an artifact and publish its ``artifactUpdate`` (``lastChunk``: artifacts are whole).

        Raises:
            A2aError: ``INVALID_AGENT_RESPONSE`` (-32006) with ``artifact_too_large`` or ``too_many_artifacts``.
        """
        artifact = {"artifactId": new_id(), "name": name, "parts": parts}
        size = _size(artifact)
        if size > self.limits.max_artifact_bytes or task.artifact_bytes + size > self.limits.max_task_bytes:
            raise a2a_error(
                Code.INVALID_AGENT_RESPONSE,
                "the agent's answer is too large",
                "artifact_too_large",
                limit=self.limits.max_artifact_bytes,
            )
        if len(task.artifacts) >= self.limits.max_artifacts:
            raise a2a_error(
                Code.INVALID_AGENT_RESPONSE, "too many artifacts", "too_many_artifacts", limit=self.limits.max_artifacts
            )
        task.artifacts.append(artifact)
        task.artifact_bytes += size
        update = {"taskId": task.id, "contextId": task.context_id, "artifact": artifact, "lastChunk": True}
        self._publish(task, {"artifactUpdate": update})

    def _publish(self, task: Task, event: dict[str, Any]) -> None:
        task.seq += 1
        task.events.append((task.seq, event))
        while len(task.events) > self.limits.max_events:
            task.events.popleft()
        ended = task.terminal or task.interrupted
        for sub in list(task.subscribers):
            if sub.queue.full():
                sub.detached = True
                self.detached += 1
                self._close(sub)
                task.subscribers.remove(sub)
                continue
            sub.queue.put_nowait((task.seq, event))
            if ended:
                self._close(sub)
        if ended:
            task.subscribers.clear()

    @staticmethod
    def _close(sub: Subscriber) -> None:
        """End a subscriber's stream (room for the end marker is always kept)."""
        while True:
            try:
                sub.queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                sub.queue.get_nowait()

    # ---- subscribing -------------------------------------------------------------------------------------------
    def subscribe(
        self, task: Task, after_seq: int | None = None
    ) -> tuple[list[tuple[int, dict[str, Any]]], Subscriber]:
        """Events of ``task`` after ``after_seq`` still retained, and a live subscriber for what follows.

        Raises:
            A2aError: ``too_many_subscribers`` (-32603).
        """
        if len(task.subscribers) >= self.limits.max_subscribers_per_task:
            raise a2a_error(
                Code.INTERNAL,
                "too many subscribers on this task",
                "too_many_subscribers",
                limit=self.limits.max_subscribers_per_task,
            )
        backlog = [(seq, event) for seq, event in task.events if after_seq is not None and seq > after_seq]
        sub = Subscriber(asyncio.Queue(self.limits.max_subscriber_queue + 1))
        task.subscribers.append(sub)
        return backlog, sub

    def unsubscribe(self, task: Task, sub: Subscriber) -> None:
        if sub in task.subscribers:
            task.subscribers.remove(sub)

    # ---- listing -----------------------------------------------------------------------------------------------
    def listing(
        self,
        scope: str,
        *,
        context_id: str | None = None,
        state: str | None = None,
        after: str | None = None,
    ) -> list[Task]:
        """The caller's tasks, newest status first."""
        self.purge()
        found = [
            t
            for t in self.tasks.values()
            if t.scope == scope
            and (context_id is None or t.context_id == context_id)
            and (state is None or t.state == state)
            and (after is None or t.timestamp > after)
        ]
        return sorted(found, key=lambda t: (t.timestamp, t.id), reverse=True)

    def overdue(self) -> Iterator[Task]:
        """Working tasks past their deadline."""
        now_s = self.clock()
        for task in list(self.tasks.values()):
            if not task.terminal and not task.interrupted and task.deadline < now_s:
                yield task

    def stats(self) -> dict[str, int]:
        return {
            "tasks": len(self.tasks),
            "active": self.active(),
            "created": self.created,
            "expired": self.expired,
            "subscribers_detached": self.detached,
        }


def page_token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode().rstrip("=")


def page_offset(token: Any) -> int:
    """The offset a ``pageToken`` names.

    Raises:
        A2aError: ``INVALID_PARAMS`` ``invalid_page_token``.
    """
    if token in (None, ""):
        return 0
    try:
        text = base64.urlsafe_b64decode(str(token) + "=" * (-len(str(token)) % 4)).decode()
        kind, _, number = text.partition(":")
        offset = int(number)
        if kind != "o" or offset < 0 or str(offset) != number:
            raise ValueError
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise a2a_error(Code.INVALID_PARAMS, "invalid pageToken", "invalid_page_token", field="pageToken") from None
    return offset
