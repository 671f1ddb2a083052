"""Probe actors for tests: echo, crash on request, block, log, count, and record their lifecycle to a file.

Accepts (calls): :class:`Echo`, :class:`Crash`, :class:`Block`, :class:`Log`, :class:`Incr`, :class:`GetPid`,
:class:`RaiseError`, :class:`StopMe`, :class:`ReplyLater`, :class:`Relay`, :class:`Fetch`, :class:`CancelIo`,
:class:`Job`, :class:`SendUnpicklable`, :class:`Burst`, :class:`GetNotes`, :class:`IoLog`, plus ``Ping`` /
``GetStatus``; casts: :class:`Note`. The same class runs at tier 1 and at tier 2.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adk_actors.errors import AdkError
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = [
    "Block",
    "Burst",
    "CancelIo",
    "Crash",
    "Echo",
    "Fetch",
    "GetNotes",
    "GetPid",
    "Incr",
    "IoLog",
    "Job",
    "Log",
    "Note",
    "NotesFirst",
    "Probe",
    "ProbeArgs",
    "RaiseError",
    "Relay",
    "ReplyLater",
    "SendUnpicklable",
    "StopMe",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeArgs:
    journal: str = ""
    """File that receives one line per lifecycle event (``init <id>``, ``terminate <id> <reason>``)."""
    crash_on_init: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Echo:
    value: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Crash:
    """Raise an unexpected exception inside the handler (a crash)."""

    text: str = "probe crash"
    """The exception's message (a crash report logs it, scrubbed; the asker never sees it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RaiseError:
    """Raise an AdkError (an ordinary failed reply, not a crash)."""

    reason: str = "probe_error"


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """Block the handler for ``seconds`` (simulates a misbehaving actor), then answer."""

    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyLater:
    """Answer after ``seconds`` using a timer (a deferred reply)."""

    seconds: float
    value: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Log:
    text: str
    level: str = "warning"
    print_too: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Incr:
    by: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class GetPid:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class IoLog:
    """Write ``count`` log records at ``level`` from an I/O thread (not the actor's thread); answer ``count``."""

    count: int
    text: str = "io-log"
    level: str = "warning"
    burst: int = 0
    """Pause ``pause_s`` after every ``burst`` records (0: no pauses), as a library logging per statement does."""
    pause_s: float = 0.0
    timeout: float = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StopMe:
    reason: str = "normal"


@dataclass(frozen=True, slots=True, kw_only=True)
class Relay:
    """Call ``target`` (any ref) with ``request`` and answer with its reply (an asynchronous call)."""

    target: Any
    request: Any
    timeout: float = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetch:
    """GET ``url`` on the I/O threads (cancellable) and answer with the status code and body length."""

    url: str
    timeout: float = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelIo:
    """Cancel every blocking call this actor has in flight."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Burst:
    """Send ``count`` numbered ``Note``s to ``target`` from one handler (a per-pair ordering probe)."""

    target: Any
    count: int


@dataclass(frozen=True, slots=True)
class Note:
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NotesFirst:
    """Send ``count`` numbered ``Note``s to the asker, then reply ``count`` (messages that precede their reply)."""

    count: int


@dataclass(frozen=True, slots=True)
class GetNotes:
    """The ``Note`` numbers received so far, in arrival order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """Run ``fn(*args)`` in the worker pool (or inline) and answer with its result."""

    fn: Any
    args: tuple[Any, ...] = ()
    timeout: float = 5.0
    inline: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SendUnpicklable:
    """Call ``target`` with a message holding a lock (fails only where messages are pickled)."""

    target: Any


_sessions = threading.local()


def _http_get(token: Any, url: str) -> dict[str, Any]:
    from adk_actors.runtime.httpcancel import cancellable_session

    session = getattr(_sessions, "session", None)
    if session is None:
        session = _sessions.session = cancellable_session()
    response = session.get(url, timeout=60)
    return {"status": response.status_code, "length": len(response.content)}


def _log_many(token: Any, count: int, text: str, level: str, burst: int, pause_s: float) -> int:
    log = logging.getLogger("adk_actors.testing.iolog")
    for i in range(count):
        getattr(log, level)("%s %d", text, i)
        if burst and i % burst == burst - 1:
            time.sleep(pause_s)
    return count


class Probe(GenServer):
    """A test actor; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.args = ProbeArgs()
        self.count = 0
        self.io_ids: set[int] = set()
        self.notes: list[int] = []

    def _journal(self, line: str) -> None:
        if self.args.journal:
            with Path(self.args.journal).open("a") as fh:
                fh.write(line + "\n")

    def init(self, args: Any) -> Any:
        if isinstance(args, ProbeArgs):
            self.args = args
        self._journal(f"init {self._child_id} {os.getpid()}")
        if self.args.crash_on_init:
            raise RuntimeError("crash on init")
        return None

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, Echo):
            return request.value
        if isinstance(request, Crash):
            raise RuntimeError(request.text)
        if isinstance(request, RaiseError):
            raise AdkError("probe error", reason=request.reason)
        if isinstance(request, Block):
            time.sleep(request.seconds)
            return "unblocked"
        if isinstance(request, ReplyLater):
            self.start_timer(request.seconds, (ctx, request.value))
            return DEFERRED
        if isinstance(request, Log):
            getattr(self.log, request.level)(request.text)
            if request.print_too:
                print(request.text, flush=True)
            return "logged"
        if isinstance(request, Incr):
            self.count += request.by
            return self.count
        if isinstance(request, GetPid):
            return os.getpid()
        if isinstance(request, StopMe):
            self.stop(request.reason)
            return "stopping"
        if isinstance(request, Relay):
            self.call(
                request.target,
                request.request,
                time.monotonic() + request.timeout,
                lambda value, error: self.fail(ctx, error) if error else self.reply(ctx, value),
            )
            return DEFERRED
        if isinstance(request, Fetch):
            io_id = self.io_call(
                _http_get,
                (request.url,),
                time.monotonic() + request.timeout,
                lambda value, error: self._io_done(ctx, io_id, value, error),
            )
            self.io_ids.add(io_id)
            return DEFERRED
        if isinstance(request, SendUnpicklable):
            self.call(
                request.target,
                Echo(value=threading.Lock()),
                time.monotonic() + 5.0,
                lambda value, error: self.fail(ctx, error) if error else self.reply(ctx, "delivered"),
            )
            return DEFERRED
        if isinstance(request, IoLog):
            io_id = self.io_call(
                _log_many,
                (request.count, request.text, request.level, request.burst, request.pause_s),
                time.monotonic() + request.timeout,
                lambda value, error: self._io_done(ctx, io_id, value, error),
            )
            self.io_ids.add(io_id)
            return DEFERRED
        if isinstance(request, CancelIo):
            for io_id in list(self.io_ids):
                self.cancel_io(io_id)
            return len(self.io_ids)
        if isinstance(request, Burst):
            for seq in range(request.count):
                self.send_to(request.target, Note(seq))
            return request.count
        if isinstance(request, NotesFirst):
            for seq in range(request.count):
                self.send_to(ctx.reply_to, Note(seq))
            return request.count
        if isinstance(request, GetNotes):
            return list(self.notes)
        if isinstance(request, Job):
            self.run_job(
                request.fn,
                request.args,
                time.monotonic() + request.timeout,
                lambda value, error: self.fail(ctx, error) if error else self.reply(ctx, value),
                inline=request.inline,
            )
            return DEFERRED
        return super().handle_call(request, ctx)

    def _io_done(self, ctx: CallCtx, io_id: int, value: Any, error: AdkError | None) -> None:
        self.io_ids.discard(io_id)
        if error is not None:
            self.fail(ctx, error)
        else:
            self.reply(ctx, value)

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, tuple) and len(message) == 2 and isinstance(message[0], CallCtx):
            self.reply(message[0], message[1])
            return
        super().handle_timer(message)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, Note):
            self.notes.append(message.seq)
            return
        super().handle_info(message, sender)

    def terminate(self, reason: str) -> None:
        self._journal(f"terminate {self._child_id} {reason}")

    def status(self) -> dict[str, Any]:
        return {"kind": "probe", "count": self.count}
