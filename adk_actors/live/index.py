"""The Live index (tier 2, ``live:index``, ``permanent``): the node-wide ``live_session_limit``.

A start reserves a slot here before the session actor is spawned (so concurrent starts are serialized by this
actor's mailbox and the count is constant-time); a session releases its slot when it stops. A slot whose session
died with its host is not released by anyone: when the count reaches the limit, the index recounts the sessions
that really run (``FindInner`` on every host) before it refuses, so such a slot is reclaimed at the first start
that needs it. A restarted index starts from that recount too.

Accepts: calls ``ReserveSlot``, ``GetStatus``; casts ``ReleaseSlot``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from adk_actors.errors import AdkError, LiveError
from adk_actors.live.messages import LIVE_ACTOR, ReleaseSlot, ReserveSlot
from adk_actors.runtime.host import FindInner
from adk_actors.runtime.refs import host_name
from adk_actors.runtime.server import DEFERRED, CallCtx, GenServer

__all__ = ["IndexArgs", "LiveIndex"]

_RECOUNT_S = 5.0
_FRESH_S = 30.0
"""A reservation this recent counts even when its session is not found yet (its spawn may be under way)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexArgs:
    limit: int
    hosts: int


class LiveIndex(GenServer):
    """See the module docstring."""

    def init(self, args: Any) -> Any:
        if not isinstance(args, IndexArgs):
            raise LiveError("the Live index needs IndexArgs", reason="invalid_live_args")
        self.limit, self.hosts = args.limit, args.hosts
        self.sessions: dict[str, float] = {}
        self.recounting: list[tuple[ReserveSlot, CallCtx]] | None = None
        self.recounts = 0
        self.refused = 0
        return None

    def handle_call(self, request: Any, ctx: CallCtx) -> Any:
        if isinstance(request, ReserveSlot):
            if self.recounting is not None:
                self.recounting.append((request, ctx))
                return DEFERRED
            if request.session_id in self.sessions or len(self.sessions) < self.limit:
                return self._reserve(request)
            self.recounting = [(request, ctx)]
            self._recount()
            return DEFERRED
        return super().handle_call(request, ctx)

    def _reserve(self, request: ReserveSlot) -> dict[str, Any]:
        if request.session_id not in self.sessions and len(self.sessions) >= self.limit:
            self.refused += 1
            raise LiveError(
                "the node runs its maximum of Live sessions",
                reason="live_session_limit",
                details={"live_session_limit": self.limit},
            )
        self.sessions[request.session_id] = time.monotonic()
        return {"sessions": len(self.sessions)}

    def _recount(self) -> None:
        self.recounts += 1
        found: set[str] = set()
        left = [self.hosts]

        def one(value: Any, error: AdkError | None) -> None:
            if error is None:
                found.update(i.split(":", 1)[1] for i in value if i.startswith("live:"))
            left[0] -= 1
            if left[0] == 0:
                self._recounted(found)

        deadline = time.monotonic() + _RECOUNT_S
        for host_id in range(self.hosts):
            self.call(host_name(host_id), FindInner(actor=LIVE_ACTOR, limit=self.limit + 1), deadline, one)

    def _recounted(self, running: set[str]) -> None:
        now = time.monotonic()
        self.sessions = {sid: at for sid, at in self.sessions.items() if sid in running or now - at < _FRESH_S} | {
            sid: self.sessions.get(sid, now) for sid in running
        }
        waiting, self.recounting = self.recounting or [], None
        for request, ctx in waiting:
            try:
                self.reply(ctx, self._reserve(request))
            except LiveError as err:
                self.fail(ctx, err)

    def handle_info(self, message: Any, sender: Any) -> None:
        if isinstance(message, ReleaseSlot):
            self.sessions.pop(message.session_id, None)
            return
        super().handle_info(message, sender)

    def status(self) -> dict[str, Any]:
        return {
            "kind": "live_index",
            "sessions": len(self.sessions),
            "limit": self.limit,
            "recounts": self.recounts,
            "refused": self.refused,
        }
