"""The agent facade: spawn and stop agents, prompt / delegate / invoke them, and the multi-agent patterns.

::

    import adk_actors as adk

    weather = adk.spawn_agent("WeatherAgent", {"provider": "gemini", "instructions": "Be concise."}, [tool])
    adk.prompt(weather, "What is the weather in Tokyo?", timeout=30)      # -> "The weather in Tokyo is ..."
    future = adk.delegate(weather, "And in Paris?")                       # concurrent.futures.Future
    adk.invoke(weather, "Fresh question", scope={"app_name": "a", "user_id": "u", "session_id": "s"})
    adk.sequential([translator, summarizer], "text")
    adk.parallel([translator, summarizer], "text", timeout=60)            # [(agent, output | AdkError), ...]
    adk.loop(writer, reviewer, "Write a poem.", 3)
    adk.stop_agent(weather)

Each function takes an optional ``system=`` (an ``ActorSystemHandle``; default: ``current_system()``). ``timeout``
is in seconds; configuration timeouts (``agent_turn_timeout_ms``) are milliseconds.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adk_actors.agents.agent import Agent
from adk_actors.agents.messages import Describe, GetHistory, Invoke, Prompt, PromptOutcome
from adk_actors.agents.spec import AgentSpec, build_spec, check_agent_name, check_tree
from adk_actors.content.validation import check_id, check_json_object, check_text, check_timeout
from adk_actors.errors import (
    ActorCrashed,
    AdkError,
    AgentError,
    AskTimeout,
    ConfigError,
    NameNotFound,
    ValidationError,
)
from adk_actors.runtime.refs import LocalRef, place
from adk_actors.runtime.system import ActorSystemHandle, current_system
from adk_actors.tools.context import current_ancestry

__all__ = [
    "AgentRef",
    "agent_history",
    "delegate",
    "describe_agent",
    "ensure_agent",
    "invoke",
    "is_approved",
    "loop",
    "parallel",
    "prompt",
    "sequential",
    "spawn_agent",
    "stop_agent",
]

AGENT_ACTOR = "adk_actors.agents.agent_actor.AgentActor"
TREE_CHECK_TIMEOUT_S = 2.0
"""One deadline for asking every agent of a new tree for its sub-agents (the reference's two seconds)."""
QUEUE_SLACK_S = 30.0
"""Default extra wait of a facade call beyond one turn timeout (turns of one agent queue FIFO)."""
APPROVED = "APPROVED"

_executor_lock = threading.Lock()
_executor: concurrent.futures.ThreadPoolExecutor | None = None


@dataclass(frozen=True, slots=True)
class AgentRef:
    """A handle on a spawned agent: its registered name and its inner-actor ref (stable across restarts)."""

    name: str
    """The registered agent name."""
    ref: LocalRef
    """Where the agent lives (host and local id)."""

    def __str__(self) -> str:
        return self.name


AgentLike = AgentRef | str | Agent
"""An agent as the facade takes it: its ref, its registered name, or the ``Agent`` value it was spawned from."""


def local_id(name: str) -> str:
    """The inner-actor id of the agent called ``name`` (so one name is one agent per system)."""
    return f"agent.{name}"


def agent_ref(name: str, hosts: int) -> LocalRef:
    """Where the agent called ``name`` lives among ``hosts`` hosts (its inner-actor ref, stable across restarts)."""
    lid = local_id(name)
    return LocalRef(place(lid, hosts), lid)


def _system(system: ActorSystemHandle | None) -> ActorSystemHandle:
    return system if system is not None else current_system()


def _ref(agent: AgentLike, system: ActorSystemHandle) -> AgentRef:
    if isinstance(agent, AgentRef):
        return agent
    name = check_agent_name(agent.name if isinstance(agent, Agent) else agent, field_name="agent")
    return AgentRef(name, agent_ref(name, system.settings.hosts))


def _ms_or_none(value: Any) -> float | None:
    return None if value == "infinity" or value is None else float(value) / 1000.0


def _default_timeout(system: ActorSystemHandle) -> float:
    turn = _ms_or_none(system.settings.agent_turn_timeout_ms)
    return max(system.settings.ask_timeout_s, (turn if turn is not None else 3600.0) + QUEUE_SLACK_S)


def _input(value: Any) -> Any:
    """The input as plain data (text, or a JSON copy of content), checked before anything is sent.

    Raises:
        AgentError: reason ``invalid_input`` (``details["rule"]`` says why: ``invalid_utf8``, ``invalid_json``,
            ``limit_exceeded``...).
    """
    try:
        if not isinstance(value, str | dict) and callable(getattr(value, "to_dict", None)):
            value = value.to_dict()
        if isinstance(value, str):
            return check_text(value, "input")
        if isinstance(value, dict):
            return check_json_object(value, "input")
    except AdkError as err:
        raise AgentError(
            "agent input is a str or content",
            reason="invalid_input",
            details={"type": type(value).__name__, "rule": err.reason},
        ) from None
    except Exception as exc:  # a hostile to_dict: the caller's bug, reported as bad input
        raise AgentError(
            "agent input is a str or content",
            reason="invalid_input",
            details={"type": type(value).__name__, "rule": type(exc).__name__},
        ) from None
    raise AgentError("agent input is a str or content", reason="invalid_input", details={"type": type(value).__name__})


def spawn_agent(
    name: str | Agent,
    config: Mapping[str, Any] | None = None,
    tools: Sequence[Any] = (),
    *,
    system: ActorSystemHandle | None = None,
    timeout: float | None = None,
) -> AgentRef:
    """Validate and start an agent (a permanent tier-2 actor registered under ``name``).

    ``spawn_agent(agent)`` takes an :class:`~adk_actors.agents.agent.Agent` value instead of a name, config and
    tools: its ``Agent``-valued sub-agents are spawned first (depth first, each as ``spawn_agent`` would), then the
    agent; if any spawn fails, the agents this call started are stopped again.

    Args:
        name: The agent name (``[A-Za-z_][A-Za-z0-9_]*``, not ``user``); unique per actor system. Or an ``Agent``
            value (then no ``config`` or ``tools``).
        config: The strict agent config (provider keys plus agent keys; see ``docs/AGENTS.md``).
        tools: Tools (``FunctionTool``, ``AgentTool``, any ``Tool``).
        system: The actor system (default: the current one).
        timeout: Seconds to wait for the spawn.

    Raises:
        AgentError: ``invalid_agent_name``, ``reserved_agent_name``, ``alias_mismatch``, ``self_reference``,
            ``agent_cycle``, ``duplicate_ownership``, ``too_many_agents``, ``tree_too_deep``,
            ``tree_unresponsive``, ``already_started``.
        ConfigError: ``unknown_key``, ``invalid_value`` and the provider's config reasons.
        ToolError: ``duplicate_tool_name`` and the other catalog reasons.
        SchemaError: an invalid tool, input or output schema.
    """
    check_timeout(timeout)
    handle = _system(system)
    if isinstance(name, Agent):
        if config is not None or tools:
            raise ConfigError(
                "an Agent value carries its own config and tools",
                reason="invalid_value",
                details={"key": "config" if config is not None else "tools"},
            )
        started: list[AgentRef] = []
        try:
            return _spawn_value(name, handle, timeout, started)
        except BaseException:
            for done in reversed(started):
                try:
                    stop_agent(done, system=handle)
                except AdkError:
                    pass  # already gone
            raise
    if config is None:
        raise _config_error_missing()
    settings = handle.settings
    store = None
    if isinstance(config, Mapping) and config.get("session_id") is not None:
        store = _node_store(handle)
    spec = build_spec(
        name,
        config,
        tools,
        call_timeout_ms=settings.agent_call_timeout_ms,
        turn_timeout_ms=settings.agent_turn_timeout_ms,
        max_concurrent_invocations=settings.max_concurrent_invocations,
        session_service=store,
    )
    _check_tree(handle, spec)
    lid = local_id(name)
    try:
        ref = handle.spawn(AGENT_ACTOR, args=spec, id=lid, name=name, restart="permanent", timeout=timeout)
    except AdkError as err:
        if err.reason == "already_started":
            raise AgentError(
                "an agent with that name is running", reason="already_started", details={"name": name}
            ) from None
        raise
    return AgentRef(name, ref)


def _config_error_missing() -> ConfigError:
    return ConfigError("an agent config is a dict with str keys", reason="invalid_value", details={"key": "config"})


def _spawn_value(agent: Agent, handle: ActorSystemHandle, timeout: float | None, started: list[AgentRef]) -> AgentRef:
    """Spawn ``agent``'s sub-agent values (depth first), then ``agent`` itself, through the dict-config path."""
    for sub in agent.sub_agents:
        if isinstance(sub, Agent):
            _spawn_value(sub, handle, timeout, started)
    ref = spawn_agent(agent.name, agent.config(), agent.tools, system=handle, timeout=timeout)
    started.append(ref)
    return ref


def ensure_agent(agent: Agent, *, system: ActorSystemHandle | None = None) -> AgentRef:
    """The running agent called ``agent.name``, spawned from ``agent`` (as :func:`spawn_agent`) when none runs.

    A running agent of that name is used as it is: the value is not compared with the spec it was spawned from.

    Raises:
        AdkError: as :func:`spawn_agent`.
    """
    handle = _system(system)
    ref = _ref(agent, handle)
    if _running(handle, ref):
        return ref
    try:
        return spawn_agent(agent, system=handle)
    except AgentError as err:  # another caller spawned it meanwhile
        if err.reason == "already_started" and _running(handle, ref):
            return ref
        raise


def _running(handle: ActorSystemHandle, ref: AgentRef) -> bool:
    try:
        handle.ask(ref.ref, Describe(), TREE_CHECK_TIMEOUT_S)
    except NameNotFound:
        return False
    except ActorCrashed as err:
        if err.reason == "noproc":
            return False
        raise
    return True


def _node_store(handle: ActorSystemHandle) -> Any:
    """The node's shared session store as a picklable client: a SQL descriptor, or the store actor's client."""
    settings = handle.settings
    if settings.session_backend == "sql":
        from adk_actors.sessions import SqlSessionService, default_sqlite_url

        return SqlSessionService(settings.session_url or default_sqlite_url(settings.data_dir))
    from adk_actors.sessions.client import ActorSessionService

    return ActorSessionService()


def _check_tree(handle: ActorSystemHandle, spec: AgentSpec) -> None:
    if not spec.sub_agents:
        return
    deadline = time.monotonic() + TREE_CHECK_TIMEOUT_S

    def children_of(child: str) -> list[str]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AgentError(
                "the agent tree did not answer in time", reason="tree_unresponsive", details={"name": child}
            )
        try:
            info = handle.ask(_ref(child, handle).ref, Describe(), remaining)
        except (AskTimeout, NameNotFound) as err:
            raise AgentError(
                "the agent tree did not answer in time",
                reason="tree_unresponsive",
                details={"name": child, "error": err.reason},
            ) from None
        except AdkError as err:
            raise AgentError(
                "a sub-agent could not be described",
                reason="tree_unresponsive",
                details={"name": child, "error": err.reason},
            ) from None
        if info.get("name") != child:
            raise AgentError(
                "a sub-agent alias must equal the agent's registered name",
                reason="alias_mismatch",
                details={"alias": child, "name": str(info.get("name"))[:64]},
            )
        return list(info.get("sub_agents", []))

    check_tree(spec.name, spec.sub_agent_names(), children_of)


def stop_agent(agent: AgentLike, *, system: ActorSystemHandle | None = None, timeout: float | None = None) -> None:
    """Stop an agent (it is not restarted; its name is unregistered).

    Raises:
        AgentError: reason ``not_found`` when no such agent runs.
    """
    check_timeout(timeout)
    handle = _system(system)
    ref = _ref(agent, handle)
    try:
        handle.stop_inner(ref.ref, timeout)
    except AdkError as err:
        if err.reason == "not_found":
            raise AgentError("no such agent", reason="not_found", details={"name": ref.name}) from None
        raise


def prompt(
    agent: AgentLike, input: Any, *, timeout: float | None = None, system: ActorSystemHandle | None = None
) -> Any:
    """One turn of the agent's compatibility conversation (the agent keeps the history; turns run FIFO).

    Returns:
        The output text (a content dict when the answer holds non-text parts).

    Raises:
        AskTimeout: ``agent_turn_timeout``, ``agent_call_timeout``, or no answer within ``timeout``.
        ProviderError: the model call failed (``missing_api_key``, HTTP errors...).
        AgentError / SchemaError: ``max_tool_rounds``, ``invalid_input``, ``invalid_output``...
    """
    check_timeout(timeout)
    handle = _system(system)
    ref = _ref(agent, handle)
    return handle.ask(
        ref.ref, Prompt(input=_input(input)), timeout if timeout is not None else _default_timeout(handle)
    )


def invoke(
    agent: AgentLike,
    input: Any,
    *,
    scope: Mapping[str, str] | None = None,
    state: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    system: ActorSystemHandle | None = None,
) -> Any:
    """One invocation with fresh history (no compatibility memory).

    ``state`` is the invocation's read-only scoped state snapshot (``key``, ``user:key``, ``app:key``,
    ``temp:key``): instruction templates read it, and delegated sub-agents receive the same snapshot.

    Invocations of one ``(app_name, user_id, session_id)`` scope run FIFO; different scopes (and unscoped
    invocations) overlap up to ``max_concurrent_invocations``.

    Raises:
        ConfigError: reason ``unknown_key`` for a scope key other than ``app_name``/``user_id``/``session_id``;
            ``invalid_value`` for a state that is not a JSON object.
        AgentError: ``missing_state_key`` when an instruction template reads a key ``state`` lacks.
        AdkError: as :func:`prompt`; ``agent_cycle`` / ``tree_too_deep`` for a delegation loop.
    """
    check_timeout(timeout)
    handle = _system(system)
    ref = _ref(agent, handle)
    if scope is not None and not isinstance(scope, Mapping):
        raise ConfigError("scope is a mapping", reason="invalid_value", details={"key": "scope"})
    scope = dict(scope or {})
    unknown = sorted(set(scope) - {"app_name", "user_id", "session_id"})
    if unknown:
        raise ConfigError(
            f"unknown scope key {unknown[0]!r}", reason="unknown_key", details={"key": f"scope.{unknown[0]}"}
        )
    for key, value in scope.items():
        check_id(value, f"scope.{key}", error=ConfigError)
    try:
        snapshot = check_json_object(state or {}, "state")
    except ValidationError:
        raise ConfigError("state is a JSON object", reason="invalid_value", details={"key": "state"}) from None
    request = Invoke(
        input=_input(input),
        state=snapshot,
        app_name=scope.get("app_name", ""),
        user_id=scope.get("user_id", ""),
        session_id=scope.get("session_id", ""),
        ancestry=current_ancestry(),
    )  # called from a tool: join its agents' ancestry, never reset it
    return handle.ask(ref.ref, request, timeout if timeout is not None else _default_timeout(handle))


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="adk-agents")
        return _executor


def delegate(
    agent: AgentLike, input: Any, *, timeout: float | None = None, system: ActorSystemHandle | None = None
) -> concurrent.futures.Future[Any]:
    """Send a compatibility turn without waiting: a ``Future`` resolving to the output or raising the error.

    Several delegations may be in flight; each future gets exactly its own answer (every ask has its own
    correlation id and endpoint). Turns to one agent keep their FIFO order.

    Raises:
        AgentError: reason ``invalid_input`` / ``invalid_agent_name`` (before anything is sent).
    """
    check_timeout(timeout)
    handle = _system(system)
    ref = _ref(agent, handle)
    value = _input(input)
    wait = timeout if timeout is not None else _default_timeout(handle)
    return _pool().submit(handle.ask, ref.ref, Prompt(input=value), wait)


def describe_agent(
    agent: AgentLike, *, timeout: float | None = None, system: ActorSystemHandle | None = None
) -> dict[str, Any]:
    """An agent's public shape: ``{"name", "description", "sub_agents", "tools"}``.

    Raises:
        AskTimeout: the agent did not answer.
    """
    check_timeout(timeout)
    handle = _system(system)
    return dict(handle.ask(_ref(agent, handle).ref, Describe(), timeout))


def agent_history(
    agent: AgentLike, *, timeout: float | None = None, system: ActorSystemHandle | None = None
) -> list[dict[str, Any]]:
    """A copy of an agent's compatibility conversation (``{"role", "content"}`` entries).

    Raises:
        AskTimeout: the agent did not answer.
    """
    check_timeout(timeout)
    handle = _system(system)
    return list(handle.ask(_ref(agent, handle).ref, GetHistory(), timeout))


def sequential(
    agents: Sequence[AgentLike], input: Any, *, timeout: float | None = None, system: ActorSystemHandle | None = None
) -> Any:
    """Prompt each agent in turn with the previous agent's output; return the last output.

    Raises:
        AgentError: reason ``invalid_value`` for an empty agent list.
        AdkError: the first failing agent's error.
    """
    check_timeout(timeout)
    if isinstance(agents, str | bytes) or not isinstance(agents, Sequence):
        raise AgentError("agents is a list of agents", reason="invalid_value", details={"field": "agents"})
    if not agents:
        raise AgentError("sequential needs at least one agent", reason="invalid_value")
    value = input
    for agent in agents:
        value = prompt(agent, value, timeout=timeout, system=system)
    return value


def parallel(
    agents: Sequence[AgentLike], input: Any, timeout: float | None = None, *, system: ActorSystemHandle | None = None
) -> list[tuple[AgentLike, Any]]:
    """Prompt every agent concurrently with one overall deadline.

    Returns:
        ``[(agent, output or AdkError), ...]`` in input order; an agent that did not answer in time gets
        ``AskTimeout``.

    Raises:
        AgentError: ``invalid_input`` / ``invalid_agent_name`` (invalid arguments only).
    """
    check_timeout(timeout)
    if isinstance(agents, str | bytes) or not isinstance(agents, Sequence):
        raise AgentError("agents is a list of agents", reason="invalid_value", details={"field": "agents"})
    handle = _system(system)
    total = timeout if timeout is not None else _default_timeout(handle)
    deadline = time.monotonic() + total
    value = _input(input)
    refs = [_ref(a, handle) for a in agents]
    futures = [_pool().submit(handle.ask, ref.ref, Prompt(input=value), total) for ref in refs]
    results: list[tuple[AgentLike, Any]] = []
    for agent, future in zip(agents, futures, strict=True):
        try:
            results.append((agent, future.result(timeout=max(0.0, deadline - time.monotonic()))))
        except AdkError as err:
            results.append((agent, err))
        except concurrent.futures.TimeoutError:
            results.append(
                (
                    agent,
                    AskTimeout("no answer before the overall deadline", details={"agent": _ref(agent, handle).name}),
                )
            )
    return results


def is_approved(review: Any) -> bool:
    """Whether a reviewer's answer is an approval: exactly ``APPROVED`` after trimming, case-insensitively."""
    return isinstance(review, str) and review.strip().upper() == APPROVED


def loop(
    writer: AgentLike,
    reviewer: AgentLike,
    input: Any,
    max_iterations: int,
    *,
    timeout: float | None = None,
    system: ActorSystemHandle | None = None,
) -> Any:
    """A bounded writer/reviewer loop: write, review, revise... until approval or ``max_iterations`` drafts.

    A reviewer turn whose tool escalates (``tool_context.actions.escalate = True``) ends the loop as an approval
    does.

    Returns:
        The approved draft, or the latest draft at the bound (even if it was never approved).

    Raises:
        AgentError: reason ``invalid_value`` when ``max_iterations`` < 1.
        AdkError: a failing writer or reviewer turn.
    """
    check_timeout(timeout)
    if not isinstance(max_iterations, int) or isinstance(max_iterations, bool) or max_iterations < 1:
        raise AgentError(
            "max_iterations is a positive int", reason="invalid_value", details={"field": "max_iterations"}
        )
    draft = prompt(writer, input, timeout=timeout, system=system)
    for iteration in range(max_iterations):
        handle = _system(system)
        outcome = handle.ask(
            _ref(reviewer, handle).ref,
            Prompt(input=_input(draft), outcome=True),
            timeout if timeout is not None else _default_timeout(handle),
        )
        assert isinstance(outcome, PromptOutcome)
        review = outcome.output
        if outcome.escalate or is_approved(review) or iteration + 1 == max_iterations:
            return draft
        draft = prompt(writer, f"Revise the draft. Reviewer feedback: {review}", timeout=timeout, system=system)
    return draft
