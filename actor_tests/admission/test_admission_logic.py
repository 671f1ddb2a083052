"""Admission decisions without actors: limits, reject vs queue, FIFO fairness, deadlines, owner exit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.admission.logic import AdmissionConfig, AdmissionState, Grant, Reject, Waiting
from adk_actors.errors import ConfigError


def state(**kw: object) -> AdmissionState:
    return AdmissionState(AdmissionConfig(**kw))  # type: ignore[arg-type]


def test_global_and_per_agent_limits_with_reject() -> None:
    s = state(global_limit=3, default_agent_limit=2, agent_limits={"batch": 1})
    assert isinstance(s.acquire("a1", "a", 1, 0.0), Grant)
    assert isinstance(s.acquire("a2", "a", 1, 0.0), Grant)
    assert s.acquire("a3", "a", 1, 0.0) == Reject("a3", "busy")  # per-agent limit 2
    assert isinstance(s.acquire("b1", "batch", 1, 0.0), Grant)
    assert s.acquire("b2", "batch", 1, 0.0) == Reject("b2", "busy")  # agent_limits
    assert s.acquire("c1", "c", 1, 0.0) == Reject("c1", "busy")  # global limit 3
    assert s.snapshot()["in_use"] == 3 and s.rejected_total == 3


def test_queue_grants_in_fifo_order_on_release_and_expires_at_the_deadline() -> None:
    s = state(global_limit=1, overflow="queue", default_queue_timeout=1000)
    first = s.acquire("r1", "a", 1, 0.0)
    assert isinstance(first, Grant)
    assert s.acquire("r2", "a", 1, 0.0) == Waiting("r2", 1)
    assert s.acquire("r3", "b", 1, 0.5) == Waiting("r3", 2)
    assert [g.request_id for g in s.release(first.permit.permit_id)] == ["r2"]
    assert s.release(first.permit.permit_id) == []  # idempotent
    assert s.expire(1.2) == []  # r3 waits until 1.5
    assert s.expire(1.5) == [Reject("r3", "admission_timeout")]
    assert s.queue == type(s.queue)()


def test_a_saturated_agent_does_not_block_other_agents_behind_it() -> None:
    s = state(global_limit=10, default_agent_limit=1, overflow="queue")
    g = s.acquire("a1", "a", 1, 0.0)
    assert isinstance(g, Grant)
    assert isinstance(s.acquire("a2", "a", 1, 0.0), Waiting)
    assert isinstance(s.acquire("b1", "b", 1, 0.0), Grant)
    assert [x.request_id for x in s.release(g.permit.permit_id)] == ["a2"]


def test_queue_is_bounded_and_per_request_overrides_win() -> None:
    s = state(global_limit=1, overflow="queue", max_queue=1)
    assert isinstance(s.acquire("r1", "a", 1, 0.0), Grant)
    assert isinstance(s.acquire("r2", "a", 1, 0.0), Waiting)
    assert s.acquire("r3", "a", 1, 0.0) == Reject("r3", "busy")
    s2 = state(global_limit=1, overflow="reject")
    assert isinstance(s2.acquire("r1", "a", 1, 0.0), Grant)
    assert isinstance(s2.acquire("r2", "a", 1, 0.0, overflow="queue", queue_timeout_ms=5), Waiting)
    assert s2.expire(0.005) == [Reject("r2", "admission_timeout")]


def test_owner_exit_releases_its_permits_drops_its_waiters_and_grants_others() -> None:
    s = state(global_limit=2, overflow="queue")
    assert isinstance(s.acquire("x1", "a", 100, 0.0), Grant)
    assert isinstance(s.acquire("x2", "a", 100, 0.0), Grant)
    assert isinstance(s.acquire("x3", "a", 100, 0.0), Waiting)
    assert isinstance(s.acquire("y1", "a", 200, 0.0), Waiting)
    released, dropped, grants = s.owner_exited(100)
    assert {p.permit_id for p in released} == {"x1", "x2"} and dropped == ["x3"]
    assert [g.request_id for g in grants] == ["y1"]
    assert s.released_by_owner_exit == 2 and s.owners() == {200}


@pytest.mark.parametrize(
    "bad",
    [
        {"global_limit": 0},
        {"overflow": "drop"},
        {"agent_limits": {"a": 0}},
        {"default_queue_timeout": True},
        {"max_queue": -1},
    ],
)
def test_invalid_config_is_a_config_error(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        AdmissionConfig(**bad)  # type: ignore[arg-type]


ops = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "release", "expire", "exit"]),
        st.sampled_from(["a", "b", "c"]),
        st.integers(1, 3),
        st.integers(0, 20),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(1, 4), st.integers(1, 3), st.sampled_from(["reject", "queue"]))
def test_limits_are_never_exceeded_and_every_request_is_answered_once(
    seq: list[tuple[str, str, int, int]], global_limit: int, agent_limit: int, overflow: str
) -> None:
    s = state(
        global_limit=global_limit,
        default_agent_limit=agent_limit,
        overflow=overflow,
        max_queue=5,
        default_queue_timeout=5,
    )
    answered: dict[str, int] = {}
    pending: set[str] = set()
    now = 0.0
    for i, (op, agent, owner, step) in enumerate(seq):
        now += step / 1000.0
        rid = f"r{i}"
        if op == "acquire":
            d = s.acquire(rid, agent, owner, now)
            if isinstance(d, Waiting):
                pending.add(rid)
            else:
                answered[rid] = answered.get(rid, 0) + 1
        elif op == "release" and s.in_use:
            grants = s.release(next(iter(s.in_use)))
            for g in grants:
                pending.discard(g.request_id)
                answered[g.request_id] = answered.get(g.request_id, 0) + 1
        elif op == "expire":
            for r in s.expire(now):
                pending.discard(r.request_id)
                answered[r.request_id] = answered.get(r.request_id, 0) + 1
        elif op == "exit":
            _, dropped, grants = s.owner_exited(owner)
            pending.difference_update(dropped)
            for g in grants:
                pending.discard(g.request_id)
                answered[g.request_id] = answered.get(g.request_id, 0) + 1
        assert len(s.in_use) <= global_limit
        assert all(n <= agent_limit for n in s.per_agent.values())
        assert sum(s.per_agent.values()) == len(s.in_use)
        assert {r.request_id for r in s.queue} == pending
    assert all(n == 1 for n in answered.values())
