"""The in-memory session store (the reference's ETS store).

A plain thread-safe class: in the running system one tier-1 actor owns the instance and calls these methods,
so sessions survive a host crash but not a system stop. Every method takes the one lock, so each call is atomic
and the store behaves exactly like the SQL backend under concurrent callers.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adk_actors.events import Event
from adk_actors.sessions.base import IfExists, as_ref
from adk_actors.sessions.logic import (
    already_exists,
    check_compaction,
    check_expected,
    conversation_not_found,
    conversation_payload,
    new_session_id,
    not_found,
    plan_create,
)
from adk_actors.sessions.model import (
    AppendResult,
    PreparedEvent,
    Session,
    SessionRef,
    decode_event,
    prepare_event,
    validate_name,
)
from adk_actors.sessions.state import apply_delta, merge_state, split_delta

__all__ = ["InMemorySessionService"]

_Key = tuple[str, str, str]


@dataclass(slots=True, kw_only=True)
class _Record:
    state: dict[str, Any] = field(default_factory=dict)
    # (seq, event): stored events are decoded once from their canonical form, so the store owns private copies.
    events: list[tuple[int, Event]] = field(default_factory=list)
    version: int = 0
    last_seq: int = 0
    create_time: float = 0.0
    update_time: float = 0.0


class InMemorySessionService:
    """Sessions held in this process's memory (see :class:`BaseSessionService` for the contract).

    Args:
        clock: Wall-clock source in seconds (injected for tests).
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._sessions: dict[_Key, _Record] = {}
        self._user_state: dict[tuple[str, str], dict[str, Any]] = {}
        self._app_state: dict[str, dict[str, Any]] = {}
        self._temp: dict[_Key, dict[str, Any]] = {}
        self._conversations: dict[tuple[str, str, str], list[Any]] = {}

    # The store is owned by one actor; pickling copies its contents (used when an actor hands a snapshot on).
    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            state = {k: v for k, v in self.__dict__.items() if k != "_lock"}
            return dict(state)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"InMemorySessionService(sessions={len(self._sessions)})"

    # -- helpers ---------------------------------------------------------------------------------------------

    @staticmethod
    def _key(ref: SessionRef) -> _Key:
        return (ref.app_name, ref.user_id, ref.session_id)

    def _record(self, ref: SessionRef) -> _Record:
        rec = self._sessions.get(self._key(ref))
        if rec is None:
            raise not_found(ref)
        return rec

    def _merged(self, ref: SessionRef, rec: _Record) -> dict[str, Any]:
        return copy.deepcopy(
            merge_state(
                session=rec.state,
                user=self._user_state.get((ref.app_name, ref.user_id), {}),
                app=self._app_state.get(ref.app_name, {}),
                temp=self._temp.get(self._key(ref)),
            )
        )

    def _snapshot(self, ref: SessionRef, rec: _Record, *, with_events: bool) -> Session:
        events = rec.events if with_events else []
        return Session(
            app_name=ref.app_name,
            user_id=ref.user_id,
            id=ref.session_id,
            state=self._merged(ref, rec),
            events=tuple(e for _, e in events),
            event_seqs=tuple(s for s, _ in events),
            last_update_time=rec.update_time,
            version=rec.version,
            last_seq=rec.last_seq,
        )

    def _apply_shared(self, ref: SessionRef, user: Mapping[str, Any], app: Mapping[str, Any]) -> None:
        if user:
            key = (ref.app_name, ref.user_id)
            self._user_state[key] = apply_delta(self._user_state.get(key, {}), user)
        if app:
            self._app_state[ref.app_name] = apply_delta(self._app_state.get(ref.app_name, {}), app)

    def _append(self, ref: SessionRef, rec: _Record, ev: PreparedEvent) -> AppendResult:
        now = self._clock()
        rec.last_seq += 1
        rec.version += 1
        rec.update_time = now
        rec.events.append((rec.last_seq, decode_event(ev.data)))
        rec.state = apply_delta(rec.state, ev.delta.session)
        self._apply_shared(ref, ev.delta.user, ev.delta.app)
        if ev.delta.temp:
            self._temp[self._key(ref)] = apply_delta(self._temp.get(self._key(ref), {}), ev.delta.temp)
        return AppendResult(seq=rec.last_seq, version=rec.version, last_update_time=now, state=self._merged(ref, rec))

    # -- the protocol ----------------------------------------------------------------------------------------

    def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        events: Sequence[Any] = (),
        if_exists: IfExists = "return",
    ) -> Session:
        """See :meth:`BaseSessionService.create_session`.

        Raises:
            ValidationError: invalid names, state or events.
            SessionError: reason ``already_exists`` when ``if_exists="error"`` and the session exists.
        """
        ref = SessionRef(app_name=app_name, user_id=user_id, session_id=session_id or new_session_id())
        plan = plan_create(state, events)
        with self._lock:
            rec = self._sessions.get(self._key(ref))
            if rec is not None:
                if if_exists == "error":
                    raise already_exists(ref)
                return self._snapshot(ref, rec, with_events=True)
            now = self._clock()
            n = len(plan.events)
            stored = [(i + 1, decode_event(e.data)) for i, e in enumerate(plan.events)]
            rec = _Record(
                state=plan.session_state, events=stored, version=n, last_seq=n, create_time=now, update_time=now
            )
            self._sessions[self._key(ref)] = rec
            self._apply_shared(ref, plan.user_delta, plan.app_delta)
            if plan.temp:
                self._temp[self._key(ref)] = dict(plan.temp)
            return self._snapshot(ref, rec, with_events=True)

    def get_session(self, ref: SessionRef | Session) -> Session:
        """See :meth:`BaseSessionService.get_session`.

        Raises:
            SessionNotFound: the session does not exist.
        """
        ref = as_ref(ref)
        with self._lock:
            return self._snapshot(ref, self._record(ref), with_events=True)

    def list_sessions(self, *, app_name: str, user_id: str | None = None) -> list[Session]:
        """See :meth:`BaseSessionService.list_sessions`.

        Raises:
            ValidationError: invalid names.
        """
        validate_name(app_name, "app_name")
        if user_id is not None:
            validate_name(user_id, "user_id")
        with self._lock:
            found = [
                (SessionRef(app_name=a, user_id=u, session_id=s), rec)
                for (a, u, s), rec in self._sessions.items()
                if a == app_name and (user_id is None or u == user_id)
            ]
            found.sort(key=lambda item: (-item[1].update_time, item[0].user_id, item[0].session_id))
            return [self._snapshot(ref, rec, with_events=False) for ref, rec in found]

    def delete_session(self, ref: SessionRef | Session) -> bool:
        """See :meth:`BaseSessionService.delete_session`."""
        ref = as_ref(ref)
        with self._lock:
            self._temp.pop(self._key(ref), None)
            return self._sessions.pop(self._key(ref), None) is not None

    def update_state(self, ref: SessionRef | Session, delta: Mapping[str, Any]) -> None:
        """See :meth:`BaseSessionService.update_state`.

        Raises:
            SessionNotFound: the session does not exist.
            ValidationError: a malformed delta.
        """
        ref = as_ref(ref)
        scoped = split_delta(delta)
        with self._lock:
            rec = self._record(ref)
            rec.state = apply_delta(rec.state, scoped.session)
            self._apply_shared(ref, scoped.user, scoped.app)
            if scoped.temp:
                self._temp[self._key(ref)] = apply_delta(self._temp.get(self._key(ref), {}), scoped.temp)
            rec.version += 1
            rec.update_time = self._clock()

    def add_event(self, ref: SessionRef | Session, event: Any) -> AppendResult:
        """See :meth:`BaseSessionService.add_event`.

        Raises:
            SessionNotFound: the session does not exist.
            ValidationError: a malformed event.
        """
        ref = as_ref(ref)
        ev = prepare_event(event)
        with self._lock:
            return self._append(ref, self._record(ref), ev)

    def add_event_if_state(self, ref: SessionRef | Session, event: Any, expected: Mapping[str, Any]) -> AppendResult:
        """See :meth:`BaseSessionService.add_event_if_state`.

        Raises:
            SessionNotFound: the session does not exist.
            ConcurrencyConflict: reason ``state_mismatch``; nothing was written.
            ValidationError: a malformed event.
        """
        ref = as_ref(ref)
        ev = prepare_event(event)
        with self._lock:
            rec = self._record(ref)
            check_expected(
                ref,
                session=rec.state,
                user=self._user_state.get((ref.app_name, ref.user_id), {}),
                app=self._app_state.get(ref.app_name, {}),
                temp=self._temp.get(self._key(ref), {}),
                expected=expected,
            )
            return self._append(ref, rec, ev)

    def clear_temp_state(self, ref: SessionRef | Session) -> None:
        """See :meth:`BaseSessionService.clear_temp_state`.

        Raises:
            SessionNotFound: the session does not exist.
        """
        ref = as_ref(ref)
        with self._lock:
            self._record(ref)
            self._temp.pop(self._key(ref), None)

    def compact_events(
        self, ref: SessionRef | Session, *, through_seq: int, compaction_event: Any, expected_version: int | None = None
    ) -> AppendResult:
        """See :meth:`BaseSessionService.compact_events`.

        The compaction event takes ``seq = through_seq``; its state delta is not applied (the state already
        reflects the events it summarizes).

        Raises:
            SessionNotFound: the session does not exist.
            ConcurrencyConflict: reason ``stale_session`` when ``expected_version`` is not current.
            ValidationError: a malformed event or ``through_seq``.
        """
        ref = as_ref(ref)
        ev = prepare_event(compaction_event)
        with self._lock:
            rec = self._record(ref)
            check_compaction(
                ref,
                through_seq=through_seq,
                last_seq=rec.last_seq,
                version=rec.version,
                expected_version=expected_version,
            )
            kept = [(s, d) for s, d in rec.events if s > through_seq]
            rec.events = [(through_seq, decode_event(ev.data)), *kept]
            rec.version += 1
            rec.update_time = self._clock()
            return AppendResult(
                seq=through_seq, version=rec.version, last_update_time=rec.update_time, state=self._merged(ref, rec)
            )

    def save_conversation(self, app_name: str, agent_name: str, key: str, history: Sequence[Any]) -> None:
        """See :meth:`BaseSessionService.save_conversation`.

        Raises:
            ValidationError: invalid names or a history that is not a JSON-safe list.
        """
        payload = conversation_payload(app_name, agent_name, key, history)
        with self._lock:
            self._conversations[(app_name, agent_name, key)] = payload

    def load_conversation(self, app_name: str, agent_name: str, key: str) -> list[Any]:
        """See :meth:`BaseSessionService.load_conversation`.

        Raises:
            SessionNotFound: nothing was saved under that key.
        """
        with self._lock:
            found = self._conversations.get((app_name, agent_name, key))
            if found is None:
                raise conversation_not_found(app_name, agent_name, key)
            return copy.deepcopy(found)

    def close(self) -> None:
        """Nothing to release (kept for the protocol)."""

    # -- introspection (not part of the protocol) ------------------------------------------------------------

    def session_counts(self) -> dict[str, dict[str, int]]:
        """How many sessions each user of each app holds: ``{app_name: {user_id: count}}`` (names sorted)."""
        counts: dict[str, dict[str, int]] = {}
        with self._lock:
            for app_name, user_id, _ in self._sessions:
                users = counts.setdefault(app_name, {})
                users[user_id] = users.get(user_id, 0) + 1
        return {app: dict(sorted(users.items())) for app, users in sorted(counts.items())}
