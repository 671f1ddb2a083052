"""Developer operations over the facade: agents, stable runs, sessions, MCP connections, diagnostics and metrics.

:class:`DevOps` wraps one node (an ``ActorSystemHandle``) and its session service. Every method validates its
input with the project's checks and raises the project's errors (never an HTTP status: :mod:`adk_actors.web.dev`
maps them), so ``/dev/v1`` and the ``adk`` commands behave the same. Outputs are JSON-safe dicts with secrets pruned.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from collections.abc import Iterator, Mapping
from typing import Any

from adk_actors import runs
from adk_actors.agents.api import describe_agent
from adk_actors.content.validation import check_id, check_int, check_json, check_text
from adk_actors.errors import ActorCrashed, AdkError, NameNotFound, ValidationError, json_safe
from adk_actors.events import Event
from adk_actors.runs.logic import Cancelled, Completed, Failed, Paused, ReplayGap
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.secrets import is_secret_key, prune_secrets
from adk_actors.sessions.base import BaseSessionService
from adk_actors.sessions.model import SessionRef

__all__ = [
    "DEFAULT_APP",
    "DEFAULT_PAGE",
    "MAX_AGENTS",
    "MAX_DELTA_KEYS",
    "MAX_INPUT_BYTES",
    "MAX_MCP_CONNECTIONS",
    "MAX_PAGE",
    "MAX_SESSION_EVENTS",
    "DevOps",
    "event_json",
    "item_json",
    "outcome_json",
]

DEFAULT_APP = "dev"
"""The app name runs and sessions use when a request names none."""
MAX_AGENTS = 256
"""Most agents discovery lists."""
DEFAULT_PAGE = 20
MAX_PAGE = 100
"""Default and largest page of a list (sessions)."""
MAX_SESSION_EVENTS = 500
"""Most (newest) events one session view carries."""
MAX_DELTA_KEYS = 100
"""Most keys one state delta sets."""
MAX_INPUT_BYTES = 256 * 1024
"""Largest text input of a run started here."""
_DESCRIBE_S = 5.0
_LIST_S = 2.0
_LIST_THREADS = 16
_MAX_CANDIDATES = 4096
"""Most registered names :meth:`DevOps.list_agents` asks (a registry also holds other actors' names)."""
_SEEN_S = 5.0
"""How long an agent that answered counts as running for the runs started after it (an agent stopped meanwhile
makes the run fail instead of the start)."""
_NOT_AN_AGENT = frozenset({"unknown_request", "invalid_agent_name", "reserved_agent_name"})
_SCOPES = ("app:", "user:", "temp:")
MAX_MCP_CONNECTIONS = 256
"""Most MCP connections :meth:`DevOps.list_mcp_connections` lists."""
_MCP_STATUS_KEYS = (
    "connection_id",
    "name",
    "transport",
    "url",
    "server_pid",
    "protocol_version",
    "server_info",
    "state",
    "tools",
    "catalog_changed",
    "in_flight",
    "calls",
)
"""What a connection's status shows here: a connection actor's status by name, so a key it adds later (which might
carry an option's value) is not published before it is reviewed. Its options (command arguments, environment,
token) are never among them."""
_MAX_TOOL_NAME = 256


def _gone(err: AdkError) -> bool:
    """Whether ``err`` says the actor asked is no longer there (a connection that closed meanwhile)."""
    return isinstance(err, NameNotFound | ActorCrashed) or err.reason in ("noproc", "not_found")


def event_json(event: Any) -> dict[str, Any]:
    """An event as a JSON-safe dict. An :class:`~adk_actors.events.Event` is already JSON and secret-pruned (the
    turn prunes what it stores and streams), so it is only converted; anything else is made JSON-safe and pruned."""
    if isinstance(event, Event):
        return event.to_dict()
    return dict(prune_secrets(json_safe(event)))


def outcome_json(outcome: Any) -> dict[str, Any]:
    """A run outcome as ``{"state": "completed" | "paused" | "cancelled" | "failed", ...}``."""
    if isinstance(outcome, Completed):
        output = outcome.output
        return {"state": "completed", "output": output if isinstance(output, str) else json_safe(output)}
    if isinstance(outcome, Paused):
        return {"state": "paused", "event": event_json(outcome.event)}
    if isinstance(outcome, Cancelled):
        return {"state": "cancelled", "reason": outcome.reason}
    if isinstance(outcome, Failed):
        return {"state": "failed", "reason": outcome.reason, "details": prune_secrets(json_safe(outcome.details))}
    return {"state": "unknown"}


def item_json(item: runs.RunItem) -> tuple[str, dict[str, Any]]:
    """One subscription item as an SSE ``(event name, data)``: ``event``, ``gap`` or ``outcome``."""
    if item.terminal:
        return "outcome", outcome_json(item.item)
    if isinstance(item.item, ReplayGap):
        return "gap", {
            "reason": "run_event_replay_gap",
            "from_seq": item.item.from_seq,
            "resumes_at": item.item.resumes_at,
        }
    return "event", event_json(item.item)


def _walk_agents(node: Any, found: list[str]) -> None:
    if isinstance(node, Mapping):
        for inner in node.get("inner") or ():
            if isinstance(inner, Mapping) and inner.get("actor") == "AgentActor" and inner.get("register_as"):
                found.append(str(inner["register_as"]))
        for value in node.values():
            if isinstance(value, Mapping | list):
                _walk_agents(value, found)
    elif isinstance(node, list):
        for value in node:
            _walk_agents(value, found)


class DevOps:
    """The developer operations on one node.

    Args:
        system: the node (an attached or owned ``ActorSystemHandle``).
        sessions: its session service (default: the node's configured one, :func:`adk_actors.node.session_service`).
    """

    def __init__(self, system: ActorSystemHandle, sessions: BaseSessionService | None = None) -> None:
        if sessions is None:
            from adk_actors.node import session_service

            sessions = session_service(system=system)
        self.system = system
        self.sessions = sessions
        self._seen: dict[str, float] = {}
        """Agents that answered lately: name -> until when a run may start without asking again."""

    # ---- agents ------------------------------------------------------------------------------------------------

    def agent_names(self) -> list[str]:
        """The names of the agents the hosts report (sorted). A host's status lists at most 200 inner actors, so on
        a busy node this can miss some: :meth:`list_agents` asks the registry too."""
        found: list[str] = []
        _walk_agents(self.system.tree(), found)
        return sorted(set(found))

    def list_agents(self) -> dict[str, Any]:
        """The running agents, at most :data:`MAX_AGENTS` by name: ``{"agents": [{name, description, tools,
        sub_agents, available}], "truncated"}``.

        Candidates are the registry's live names and the agents the hosts report; each is asked to describe itself,
        all at once. A name that answers is an agent; one that refuses (another kind of actor) is left out; an agent
        the hosts report that does not answer within :data:`_LIST_S` (busy, or on a host going away) is listed with
        ``"available": False`` instead of holding up the list.
        """
        from adk_actors.runtime.messages import GetStatus

        known = set(self.agent_names())
        names = dict(self.system.ask(self.system.registry, GetStatus())).get("names", {})
        candidates = sorted(known | {n for n, e in names.items() if isinstance(e, Mapping) and not e.get("down")})
        candidates = candidates[:_MAX_CANDIDATES]

        def shape(name: str) -> dict[str, Any] | None:
            try:
                found = describe_agent(name, timeout=_LIST_S, system=self.system)
                return {**prune_secrets(json_safe(found)), "name": name, "available": True}
            except AdkError:
                return {"name": name, "available": False} if name in known else None

        with concurrent.futures.ThreadPoolExecutor(max(1, min(_LIST_THREADS, len(candidates)))) as pool:
            agents = [a for a in pool.map(shape, candidates) if a is not None]
        return {"agents": agents[:MAX_AGENTS], "truncated": len(agents) > MAX_AGENTS}

    def describe(self, name: Any) -> dict[str, Any]:
        """One agent's public shape.

        Raises:
            NameNotFound: ``agent_not_found``.
        """
        name = self._agent(name)
        return {**prune_secrets(json_safe(describe_agent(name, timeout=_DESCRIBE_S, system=self.system))), "name": name}

    def _agent(self, name: Any) -> str:
        """``name`` if a running agent answers to it: one ask of the agent (walking the supervision tree, as
        :meth:`agent_names` does, cost 50 ms per run started on a two-host node)."""
        name = check_id(name, "agent")
        if self._seen.get(name, 0.0) > time.monotonic():
            return name
        try:
            describe_agent(name, timeout=_DESCRIBE_S, system=self.system)
        except (NameNotFound, ActorCrashed):
            raise NameNotFound(
                "no running agent of that name", reason="agent_not_found", details={"key": "agent"}
            ) from None
        except AdkError as err:
            # A registered actor that is not an agent, or a name no agent can have: neither is a running agent.
            if err.reason not in _NOT_AN_AGENT:
                raise
            raise NameNotFound(
                "no running agent of that name", reason="agent_not_found", details={"key": "agent"}
            ) from None
        if len(self._seen) >= MAX_AGENTS:
            self._seen.clear()
        self._seen[name] = time.monotonic() + _SEEN_S
        return name

    # ---- runs --------------------------------------------------------------------------------------------------

    def start_run(
        self,
        *,
        agent: Any,
        input: Any,
        user_id: Any = "dev-user",
        session_id: Any = None,
        app_name: Any = None,
        trace: str | None = None,
    ) -> dict[str, Any]:
        """Start a stable run of one Runner invocation (the session is created when it does not exist).

        ``trace``: a ``traceparent`` the run's spans nest under (an inbound request's); default the caller's
        current OpenTelemetry span.

        Returns ``{"run_id", "app_name", "user_id", "session_id"}``.

        Raises:
            ValidationError: ``invalid_value`` / ``limit_exceeded`` for a malformed field (``details["key"]``).
            NameNotFound: ``agent_not_found``.
        """
        from adk_actors.runner import Runner

        app = check_id(app_name if app_name is not None else DEFAULT_APP, "app_name")
        user = check_id(user_id, "user_id")
        text = check_text(input, "input", max_bytes=MAX_INPUT_BYTES, allow_empty=False)
        agent_name = self._agent(agent)
        if session_id is None:
            session = self.sessions.create_session(app_name=app, user_id=user)
            sid = session.id
        else:
            sid = check_id(session_id, "session_id")
        runner = Runner(agent_name, app, self.sessions, system=self.system, streaming_mode="text")
        body = runner.run_body(user, sid, text)
        if trace:
            body = dataclasses.replace(body, trace=trace)
        run_id = runs.start(body, system=self.system)
        return {"run_id": run_id, "app_name": app, "user_id": user, "session_id": sid}

    def run_status(self, run_id: Any) -> dict[str, Any]:
        """The run's status (``state`` and counters).

        Raises:
            RunNotFound: ``not_found``.
        """
        status = dict(runs.status(check_id(run_id, "run_id"), system=self.system))
        outcome = status.get("outcome")
        if outcome is not None and not isinstance(outcome, Mapping | str):
            status["outcome"] = outcome_json(outcome)
        return dict(prune_secrets(json_safe(status)))

    def cancel_run(self, run_id: Any, reason: Any = "cancelled") -> dict[str, Any]:
        """Cancel a run; its terminal outcome (:func:`outcome_json`).

        Raises:
            RunNotFound: ``not_found``.
        """
        reason = check_id(reason, "reason", max_length=64)
        return outcome_json(runs.cancel(check_id(run_id, "run_id"), reason, system=self.system))

    def resume_run(self, run_id: Any, tool_response: Any) -> dict[str, Any]:
        """Resume a paused run with the answer to its pause (``{"confirmed": true}``, a long-running tool's
        terminal response ...) into a new run: ``{"run_id": <new>, "parent_run_id": run_id}``.

        Raises:
            RunError: ``not_paused``, ``already_resumed``, ``not_resumable``; ``invalid_resume_response``.
            RunNotFound: ``not_found``.
        """
        run_id = check_id(run_id, "run_id")
        response = check_json(tool_response, "tool_response", reason="invalid_resume_response")
        return {"run_id": runs.resume(run_id, response, system=self.system), "parent_run_id": run_id}

    def subscribe(self, run_id: Any, after_seq: Any = 0, idle_timeout: float | None = None) -> Iterator[runs.RunItem]:
        """The run's items after ``after_seq`` (replay, live events, the outcome), with credit flow control.

        Raises:
            ValidationError: a malformed argument.
            RunNotFound: no such run (raised by the first ``next()``).
        """
        run_id = check_id(run_id, "run_id")
        after = check_int(after_seq, "after_seq", minimum=0)
        # A position past the run's end still gets the outcome (the run starts it there: RunLog.start_point).
        return runs.subscribe(run_id, after_seq=after, credit=True, idle_timeout=idle_timeout, system=self.system)

    # ---- sessions ----------------------------------------------------------------------------------------------

    def _ref(self, app_name: Any, user_id: Any, session_id: Any) -> SessionRef:
        return SessionRef(
            app_name=check_id(app_name, "app_name"),
            user_id=check_id(user_id, "user_id"),
            session_id=check_id(session_id, "session_id"),
        )

    def list_sessions(
        self, app_name: Any = DEFAULT_APP, user_id: Any = None, limit: Any = DEFAULT_PAGE
    ) -> dict[str, Any]:
        """Sessions of an app (of one user), newest update first: ``{"sessions": [...], "truncated": bool}``.

        Raises:
            ValidationError: ``limit`` outside 1..:data:`MAX_PAGE`, a malformed id.
        """
        app = check_id(app_name, "app_name")
        user = None if user_id is None else check_id(user_id, "user_id")
        size = check_int(limit, "limit", minimum=1, maximum=MAX_PAGE)
        found = self.sessions.list_sessions(app_name=app, user_id=user)
        page = [
            {
                "app_name": s.app_name,
                "user_id": s.user_id,
                "session_id": s.id,
                "last_update_time": s.last_update_time,
                "state_keys": len(s.state),
            }
            for s in found[:size]
        ]
        return {"sessions": page, "truncated": len(found) > size}

    def create_session(
        self, app_name: Any = DEFAULT_APP, user_id: Any = "dev-user", session_id: Any = None, state: Any = None
    ) -> dict[str, Any]:
        """Create a session (``session_id`` optional); refuses secret-like state keys like :meth:`update_state`.

        Raises:
            SessionError: ``already_exists``.
        """
        app = check_id(app_name, "app_name")
        user = check_id(user_id, "user_id")
        sid = None if session_id is None else check_id(session_id, "session_id")
        delta = self._delta(state if state is not None else {})
        session = self.sessions.create_session(
            app_name=app, user_id=user, session_id=sid, state=delta, if_exists="error"
        )
        return self._session_json(session, MAX_SESSION_EVENTS)

    def show_session(self, app_name: Any, user_id: Any, session_id: Any, max_events: Any = 100) -> dict[str, Any]:
        """A session: its state and its newest ``max_events`` events (1..:data:`MAX_SESSION_EVENTS`).

        Raises:
            SessionNotFound: ``not_found``.
        """
        ref = self._ref(app_name, user_id, session_id)
        count = check_int(max_events, "max_events", minimum=1, maximum=MAX_SESSION_EVENTS)
        return self._session_json(self.sessions.get_session(ref), count)

    def delete_session(self, app_name: Any, user_id: Any, session_id: Any) -> dict[str, Any]:
        """Delete a session: ``{"deleted": bool}`` (``False``: there was none)."""
        return {"deleted": bool(self.sessions.delete_session(self._ref(app_name, user_id, session_id)))}

    def update_state(self, app_name: Any, user_id: Any, session_id: Any, delta: Any) -> dict[str, Any]:
        """Apply a state delta without an event; returns the session's state afterwards.

        Raises:
            ValidationError: ``invalid_value`` (not a JSON object of at most :data:`MAX_DELTA_KEYS` keys),
                ``secret_key_refused`` (a key names a credential; nothing is written).
            SessionNotFound: ``not_found``.
        """
        ref = self._ref(app_name, user_id, session_id)
        checked = self._delta(delta)
        self.sessions.update_state(ref, checked)
        return {"state": self._state(self.sessions.get_session(ref).state)}

    def _delta(self, delta: Any) -> dict[str, Any]:
        if not isinstance(delta, Mapping) or len(delta) > MAX_DELTA_KEYS:
            raise ValidationError(
                f"a state delta is a JSON object of at most {MAX_DELTA_KEYS} keys",
                reason="invalid_value",
                details={"key": "delta", "max_keys": MAX_DELTA_KEYS},
            )
        out: dict[str, Any] = {}
        for key, value in delta.items():
            key = check_text(key, "delta key", max_bytes=256, allow_empty=False)
            bare = next((key[len(p) :] for p in _SCOPES if key.startswith(p)), key)
            if is_secret_key(bare):
                raise ValidationError(
                    "state keys that name credentials are refused",
                    reason="secret_key_refused",
                    details={"key": "delta"},
                )
            out[key] = check_json(value, "delta value")
        return out

    @staticmethod
    def _state(state: Mapping[str, Any]) -> dict[str, Any]:
        return dict(prune_secrets(json_safe(dict(state))))

    def _session_json(self, session: Any, max_events: int) -> dict[str, Any]:
        events = session.events[-max_events:] if max_events else ()
        return {
            "app_name": session.app_name,
            "user_id": session.user_id,
            "session_id": session.id,
            "last_update_time": session.last_update_time,
            "state": self._state(session.state),
            "events": [event_json(e) for e in events],
            "events_total": len(session.events),
        }

    # ---- MCP connections ---------------------------------------------------------------------------------------

    def list_mcp_connections(self) -> dict[str, Any]:
        """The node's MCP client connections, at most :data:`MAX_MCP_CONNECTIONS` by id: ``{"connections":
        [{connection_id, host_id, name, transport, url, server_pid, protocol_version, server_info, state, tools,
        catalog_changed, in_flight, calls, available}], "truncated"}``.

        The hosts report their connection actors; each is asked for its status, all at once. One that does not
        answer within :data:`_LIST_S` (busy, or closing) is listed with ``"available": False`` instead of holding up
        the list; one that stopped meanwhile is left out.
        """
        from adk_actors.mcp import connection_ids

        found = sorted(connection_ids(self.system, timeout=_LIST_S), key=lambda hc: hc[1])
        shown = found[:MAX_MCP_CONNECTIONS]

        def shape(host_cid: tuple[int, str]) -> dict[str, Any] | None:
            try:
                return self._mcp_status(*host_cid)
            except AdkError as err:
                if _gone(err):
                    return None
                return {"connection_id": host_cid[1], "host_id": host_cid[0], "available": False}

        connections: list[dict[str, Any]] = []
        if shown:
            with concurrent.futures.ThreadPoolExecutor(min(_LIST_THREADS, len(shown))) as pool:
                connections = [c for c in pool.map(shape, shown) if c is not None]
        return {"connections": connections, "truncated": len(found) > MAX_MCP_CONNECTIONS}

    def mcp_connection(self, connection_id: Any) -> dict[str, Any]:
        """One MCP connection's status, its tools as ``[{"name"}]``.

        The tool names are those of the connection's last listing (what its agents' toolsets were shown). Their
        descriptions are not fetched: listing the server's tools from here would clear the connection's pending
        catalog change (``tool_catalog_changed``, which only a toolset ``refresh()`` may clear) and count as a call.

        Raises:
            ValidationError: a malformed id.
            NameNotFound: ``mcp_connection_not_found``.
        """
        from adk_actors.mcp.api import connection_ref

        cid = check_id(connection_id, "connection_id")
        status: dict[str, Any] | None = None
        if cid.startswith("mcp-"):
            try:
                status = self._mcp_status(connection_ref(cid, self.system).host_id, cid, _DESCRIBE_S)
            except AdkError as err:
                if not _gone(err) and err.reason != "unknown_request":  # another kind of inner actor: not found
                    raise
        if status is None:
            raise NameNotFound(
                "no open MCP connection of that id", reason="mcp_connection_not_found", details={"key": "connection_id"}
            )
        status["tools"] = [{"name": name} for name in status["tools"]]
        return status

    def _mcp_status(self, host_id: int, connection_id: str, timeout: float = _LIST_S) -> dict[str, Any]:
        from adk_actors.mcp.messages import McpStatus
        from adk_actors.runtime.refs import LocalRef

        raw = self.system.ask(LocalRef(host_id, connection_id), McpStatus(), timeout)
        if not isinstance(raw, Mapping) or raw.get("kind") != "mcp_connection":
            raise NameNotFound("not an MCP connection", reason="not_found")
        status = dict(prune_secrets(json_safe({k: raw[k] for k in _MCP_STATUS_KEYS if k in raw and k != "tools"})))
        # Not through json_safe, which keeps 63 entries of a list: a server may list up to 1,024 tools.
        tools = raw.get("tools") or ()
        status.update(
            connection_id=connection_id,
            host_id=host_id,
            available=True,
            tools=sorted({t[:_MAX_TOOL_NAME] for t in tools if isinstance(t, str)}) if isinstance(tools, list) else [],
        )
        return status

    # ---- diagnostics -------------------------------------------------------------------------------------------

    def diagnostics(self) -> dict[str, Any]:
        """Version, the node's status (its root's children) and its public settings (secrets as presence)."""
        from adk_actors import __version__

        try:
            status: Any = self.system.status()
        except AdkError as err:
            status = {"unavailable": err.reason}
        return {
            "version": __version__,
            "port": self.system.port,
            "status": prune_secrets(json_safe(status)),
            "settings": self.system.settings.public_dict(),
        }

    def metrics(self) -> dict[str, Any]:
        """The node's metrics snapshot (:func:`adk_actors.observability.snapshot`), whole: it is plain JSON already,
        bounded by the registry's caps (``json_safe`` would cut a long series list into a ``"<N more>"`` string)."""
        from adk_actors.observability import snapshot

        return dict(snapshot(self.system))
