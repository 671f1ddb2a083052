"""Hostile arguments at every public boundary (issue 16, items 8b and 8c).

Two things are checked against a real node: a malformed message that gets past the facade (a raw ask whose
payload the store cannot decode) leaves the ``sessions`` name resolvable, from the same handle and from a new one;
and every public call of sessions, agents, runs, workflows and the Runner answers a hostile value (enums, sets,
bytes, NaN, lambdas, locks, 10k-deep lists, lone surrogates) with an ``AdkError`` at once, in the caller's
process, after which the node answers normally.
"""

from __future__ import annotations

import enum
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_actors import agents, runs
from adk_actors.errors import AdkError, ValidationError
from adk_actors.events import Event
from adk_actors.runner import Runner
from adk_actors.runtime.messages import Lookup
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions import SessionRef
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.sessions.messages import SessionOp
from adk_actors.workflows import api as workflows

# A module only this process has: pickle finds the class here when sending, the store cannot import it when
# receiving, so the frame is undecodable on the other side (what a class defined in a caller's __main__ does).
_ONLY_HERE = types.ModuleType("adk_hostile_only_in_the_caller")
sys.modules[_ONLY_HERE.__name__] = _ONLY_HERE


class Colour(enum.Enum):
    RED = 1


Colour.__module__ = _ONLY_HERE.__name__
_ONLY_HERE.Colour = Colour  # type: ignore[attr-defined]


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _cycle() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


_ATOMS: list[Any] = [
    Colour.RED,
    {1, 2},
    frozenset(),
    b"bytes",
    bytearray(b"x"),
    float("nan"),
    float("inf"),
    lambda: 1,
    threading.Lock(),
    _deep(10_000),
    _cycle(),
    "\ud800",
    "a\x00b",
    object(),
    types.SimpleNamespace(a=1),
    3 + 4j,
    Ellipsis,
    range(3),
    iter([1]),
]

hostile = st.one_of(
    st.sampled_from(_ATOMS),
    st.sampled_from(_ATOMS).map(lambda v: {"k": v}),
    st.sampled_from(_ATOMS).map(lambda v: [1, {"nested": [v]}]),
    st.sampled_from(_ATOMS).map(lambda v: {"ok": 1, "user:x": {"deeper": v}}),
)
"""Values no public call may accept, alone or buried in otherwise valid JSON."""

_EVENT = Event.new(invocation_id="i", author="user")
"""A valid event, so that a rejection is about the hostile argument next to it."""

FAST_S = 2.0
"""A rejection must come at once: well under any ask deadline."""


@pytest.fixture(scope="module")
def node(system: ActorSystemHandle) -> ActorSystemHandle:
    return system


def _rejects(call: Callable[[], Any]) -> None:
    started = time.monotonic()
    with pytest.raises(AdkError) as info:
        call()
    assert info.value.reason, "every rejection carries a reason tag"
    assert time.monotonic() - started < FAST_S, f"{info.value.reason} took the ask deadline"


def _store_entry(node: ActorSystemHandle) -> Any:
    return node.resolve_entry("sessions", time.monotonic() + 5.0)


def _answers_normally(node: ActorSystemHandle) -> None:
    svc = ActorSessionService(system=node)
    made = svc.create_session(app_name="hostile", user_id="u")
    assert svc.get_session(made).id == made.id
    assert node.status(timeout=5.0)["ready"] is True


def test_an_undecodable_message_past_the_facade_leaves_the_store_resolvable(node: ActorSystemHandle) -> None:
    svc = ActorSessionService(system=node)
    made = svc.create_session(app_name="poison", user_id="u", state={"kept": 1})
    before = _store_entry(node)
    # A raw ask skips every facade check: the store's lane cannot unpickle the payload and drops the frame,
    # which this caller sees as a failure of the target.
    with pytest.raises(AdkError):
        node.ask("sessions", SessionOp(method="update_state", args=(made.ref, {"c": Colour.RED})), 5.0)
    started = time.monotonic()
    assert svc.get_session(made).state["kept"] == 1  # the same handle: its next lookup excludes the address
    after = _store_entry(node)
    assert (after.pid, after.generation) == (before.pid, before.generation), "the store was not restarted"
    # What any other handle (a new caller, `adk shell`) does first: a plain lookup at the registry.
    fresh = node.ask_address(node.registry, Lookup(name="sessions"), time.monotonic() + 5.0)
    assert fresh.pid == before.pid
    assert time.monotonic() - started < FAST_S


def test_malformed_session_ops_are_bad_arguments_not_crashes(node: ActorSystemHandle) -> None:
    svc = ActorSessionService(system=node)
    made = svc.create_session(app_name="malformed", user_id="u", state={"kept": 1})
    before = _store_entry(node)
    for op in (
        SessionOp(method="get_session", args=(1, 2, 3, 4)),
        SessionOp(method="update_state", args=(made.ref, {"c": {1, 2}})),
        SessionOp(method="update_state", args=(made.ref, {"c": _cycle()})),
        SessionOp(method="add_event", args=(made.ref, object())),
        SessionOp(method="save_conversation", args=("a", "b", "c", [_deep(100)])),
        SessionOp(method="create_session", kwargs={"app_name": "x", "user_id": "u", "state": {1: 2}}),
    ):
        _rejects(lambda op=op: node.ask("sessions", op, 5.0))
    assert svc.get_session(made).state["kept"] == 1
    assert _store_entry(node).pid == before.pid


def _session_calls(svc: Any, ref: SessionRef) -> list[Callable[[Any], Any]]:
    return [
        lambda v: svc.create_session(app_name="h", user_id="u", state=v),
        lambda v: svc.create_session(app_name="h", user_id="u", events=[v]),
        lambda v: svc.create_session(app_name=v, user_id="u"),
        lambda v: svc.get_session(v),
        lambda v: svc.list_sessions(app_name=v),
        lambda v: svc.delete_session(v),
        lambda v: svc.update_state(ref, v),
        lambda v: svc.update_state(v, {"a": 1}),
        lambda v: svc.add_event(ref, v),
        lambda v: svc.add_event_if_state(ref, _EVENT, v),
        lambda v: svc.compact_events(ref, through_seq=v, compaction_event=_EVENT),
        lambda v: svc.save_conversation("h", "a", "k", [v]),
        lambda v: svc.load_conversation("h", v, "k"),
    ]


@settings(
    database=None,
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=hostile)
def test_session_calls_reject_hostile_values_at_once(node: ActorSystemHandle, value: Any) -> None:
    svc = ActorSessionService(system=node)
    ref = SessionRef(app_name="h", user_id="u", session_id="s")
    for call in _session_calls(svc, ref):
        _rejects(lambda call=call: call(value))


def _facade_calls(node: ActorSystemHandle) -> list[Callable[[Any], Any]]:
    runner = Runner("hostile_agent", "h", ActorSessionService(system=node), system=node)
    return [
        lambda v: agents.prompt("hostile_agent", v, system=node),
        lambda v: agents.prompt("hostile_agent", "hi", timeout=v, system=node),
        lambda v: agents.invoke("hostile_agent", "hi", state=v, system=node),
        lambda v: agents.invoke("hostile_agent", v, system=node),
        lambda v: agents.delegate("hostile_agent", v, system=node),
        lambda v: agents.parallel(["hostile_agent"], v, system=node),
        lambda v: runner.run("u", "s", v),
        lambda v: runner.run("u", "s", "hi", timeout=v),
        lambda v: runner.resume("u", "s", None, v),
        lambda v: runs.status(v, system=node),
        lambda v: runs.wait(v, system=node),
        lambda v: runs.cancel(v, system=node),
        lambda v: runs.cancel("r1", v, system=node),
        lambda v: runs.resume("r1", v, system=node),
        lambda v: runs.start(runner, "u", "s", v, system=node),
        lambda v: next(runs.subscribe(v, system=node)),
        lambda v: workflows.wait_workflow(workflows.WorkflowRef(v), system=node),
        lambda v: workflows.workflow_status(workflows.WorkflowRef("wf-1"), timeout=v, system=node),
        lambda v: workflows.cancel_workflow(workflows.WorkflowRef("wf-1"), v, system=node),
    ]


@settings(
    database=None,
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=hostile)
def test_agent_run_and_workflow_calls_reject_hostile_values_at_once(node: ActorSystemHandle, value: Any) -> None:
    for call in _facade_calls(node):
        _rejects(lambda call=call: call(value))


@settings(
    database=None,
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=st.sampled_from([v for v in _ATOMS if not isinstance(v, str)] + [-1, float("nan"), 10**30, "x"]))
def test_ids_counts_and_timeouts_reject_non_values(node: ActorSystemHandle, value: Any) -> None:
    svc = ActorSessionService(system=node)
    for call in (
        lambda: runs.status(value, system=node),
        lambda: runs.wait("r1", value, system=node),
        lambda: runs.subscribe("r1", after_seq=value, system=node).__next__(),
        lambda: agents.describe_agent("hostile_agent", timeout=value, system=node),
        lambda: svc.compact_events(
            SessionRef(app_name="h", user_id="u", session_id="s"), through_seq=value, compaction_event=_EVENT
        ),
    ):
        _rejects(call)


def test_subscribe_rejects_bad_arguments_at_the_call_not_at_the_first_next(node: ActorSystemHandle) -> None:
    for args, kwargs in (
        ((1,), {}),
        (("r1",), {"after_seq": -1}),
        (("r1",), {"after_seq": "0"}),
        (("r1",), {"credit": "yes"}),
        (("r1",), {"idle_timeout": float("nan")}),
        ((_deep(10_000),), {}),
    ):
        started = time.monotonic()
        with pytest.raises(ValidationError) as info:
            runs.subscribe(*args, system=node, **kwargs)  # no next(): the call itself answers
        assert info.value.reason == "invalid_value" and time.monotonic() - started < FAST_S
    # A well-formed call still sends nothing until it is iterated.
    runs.subscribe("no-such-run", system=node).close()


def test_the_node_answers_normally_after_the_hostile_inputs(node: ActorSystemHandle) -> None:
    _answers_normally(node)
    entry = _store_entry(node)
    children = {c["id"]: c for c in node.status(timeout=5.0)["children"]}
    assert children["sessions"]["restarts"] == 0 and children["sessions"]["pid"] == entry.pid
