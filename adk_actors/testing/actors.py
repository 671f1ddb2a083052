"""Probe actors for tests: echo, crash on request, block, log, count, and record their lifecycle to a file.

Accepts (calls): :class:`Echo`, :class:`Crash`, :class:`Block`, :class:`Log`, :class:`Incr`, :class:`GetPid`,
:class:`RaiseError`, :class:`StopMe`, :class:`ReplyLater`, plus ``Ping`` / ``GetStatus``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adk_actors.errors import AdkError
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = ["Block", "Crash", "Echo", "GetPid", "Incr", "Log", "Probe", "ProbeArgs", "RaiseError", "ReplyLater",
           "StopMe"]


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
class StopMe:
    reason: str = "normal"


class Probe(GenServer):
    """A test actor; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.args = ProbeArgs()
        self.count = 0

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
            raise RuntimeError("probe crash")
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
        return super().handle_call(request, ctx)

    def handle_timer(self, message: Any) -> None:
        if isinstance(message, tuple) and len(message) == 2 and isinstance(message[0], CallCtx):
            self.reply(message[0], message[1])
            return
        super().handle_timer(message)

    def terminate(self, reason: str) -> None:
        self._journal(f"terminate {self._child_id} {reason}")

    def status(self) -> dict[str, Any]:
        return {"kind": "probe", "count": self.count}
