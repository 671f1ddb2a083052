"""Context selection: projection, filters, tool-exchange pairing, budgets, the request envelope, policy config.

Pure functions: no actor system is started here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_actors import content as c
from adk_actors.agents.context import (
    FRAMING_BYTES,
    ContextFilters,
    ContextPolicy,
    check_request_envelope,
    estimate_tokens,
    history_from_events,
)
from adk_actors.content.canonical import canonical_dumps
from adk_actors.errors import BudgetExceeded, ConfigError, ValidationError
from adk_actors.events import ErrorInfo, Event

T0 = 1_700_000_000.0
DEFAULT = ContextPolicy()


def ev(invocation_id: str, author: str, content: Any, *, t: float = T0, **kw: Any) -> Event:
    return Event.new(invocation_id=invocation_id, author=author, content=content, timestamp=t, **kw)


def calls(*parts: Any) -> c.Content:
    return c.new(list(parts))


def build(
    events: Sequence[Event],
    current: str = "cur",
    policy: ContextPolicy = DEFAULT,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return history_from_events(events, current_invocation_id=current, policy=policy)


def summary(history: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """Each entry as ``(role, [text, or type:id / name / MIME type])`` — what the tests compare."""

    def label(part: dict[str, Any]) -> str:
        if part["type"] == "text":
            return str(part["text"])
        return f"{part['type']}:{part.get('id') or part.get('name') or part.get('mime_type')}"

    return [(entry["role"], [label(p) for p in entry["content"]["parts"]]) for entry in history]


def size(entry: dict[str, Any]) -> int:
    return len(canonical_dumps(entry).encode("utf-8"))


def tool_session() -> list[Event]:
    """Two finished invocations (the second with a tool call) and the current user turn."""
    return [
        ev("i1", "user", "hello", t=T0),
        ev("i1", "A", "hi there", t=T0 + 1, is_final=True),
        ev("i2", "user", "weather?", t=T0 + 2),
        ev(
            "i2",
            "A",
            calls(c.text("let me check"), c.function_call("get_weather", {"city": "Oslo"}, id="w1")),
            t=T0 + 3,
        ),
        ev("i2", "A", calls(c.function_response("get_weather", {"temp": 3}, id="w1")), t=T0 + 4),
        ev("i2", "A", "3 degrees", t=T0 + 5, is_final=True),
        ev("cur", "user", "thanks", t=T0 + 6),
    ]


# -- projection -------------------------------------------------------------------------------------------------


def test_partial_system_error_and_empty_events_never_enter_history() -> None:
    events = [
        ev("i1", "user", "q"),
        ev("i1", "A", "stream fragment", partial=True),
        ev("i1", "system", "system note"),
        ev("i1", "A", "failed answer", error=ErrorInfo(reason="rate_limited", type="RateLimited")),
        ev("i1", "A", None),
        ev("i1", "A", c.new([])),
        ev("i1", "A", "answer", is_final=True),
        ev("cur", "user", "next"),
    ]
    history, stats = build(events)
    assert summary(history) == [("user", ["q"]), ("model", ["answer"]), ("user", ["next"])]
    assert stats["events"] == 8 and stats["skipped"] == 5 and stats["filtered"] == 0 and stats["selected"] == 3


def test_roles_are_user_for_the_user_author_or_bare_function_responses() -> None:
    history, _ = build(tool_session())
    assert summary(history) == [
        ("user", ["hello"]),
        ("model", ["hi there"]),
        ("user", ["weather?"]),
        ("model", ["let me check", "function_call:w1"]),
        ("user", ["function_response:w1"]),
        ("model", ["3 degrees"]),
        ("user", ["thanks"]),
    ]


def test_responses_stored_in_several_events_are_merged_into_one_tool_turn() -> None:
    events = [
        ev("cur", "user", "compare"),
        ev("cur", "A", calls(c.function_call("f", {"n": 1}, id="a"), c.function_call("f", {"n": 2}, id="b"))),
        ev("cur", "A", calls(c.function_response("f", {"r": 1}, id="a"))),
        ev("cur", "A", calls(c.function_response("f", {"r": 2}, id="b"))),
    ]
    history, stats = build(events)
    assert summary(history) == [
        ("user", ["compare"]),
        ("model", ["function_call:a", "function_call:b"]),
        ("user", ["function_response:a", "function_response:b"]),
    ]
    assert stats["selected"] == 3 and stats["filtered"] == 0


def test_history_is_a_fresh_copy_and_thought_parts_keep_their_signatures() -> None:
    thought = c.text("thinking", thought=True, thought_signature="c2ln")
    events = [
        ev("cur", "user", "q"),
        ev("cur", "A", calls(thought, c.function_call("f", {"deep": {"x": [1]}}, id="c1"))),
        ev("cur", "A", calls(c.function_response("f", {"ok": True}, id="c1"))),
    ]
    history, _ = build(events)
    assert history[1]["content"]["parts"][0] == {
        "type": "text",
        "text": "thinking",
        "thought": True,
        "thought_signature": "c2ln",
    }
    history[1]["content"]["parts"][1]["args"]["deep"]["x"].append(2)
    history[0]["content"]["parts"][0]["text"] = "changed"
    assert events[1].content is not None and events[1].content.function_calls()[0].args == {"deep": {"x": [1]}}
    assert build(events)[0][0]["content"]["parts"][0]["text"] == "q"


def test_secret_named_arguments_and_results_are_pruned_from_history() -> None:
    events = [
        ev("cur", "user", "log in"),
        ev("cur", "A", calls(c.function_call("login", {"api_key": "sk-live-123456", "user": "ada"}, id="l1"))),
        ev("cur", "A", calls(c.function_response("login", {"token": "tok-987654", "ok": True}, id="l1"))),
    ]
    history, stats = build(events)
    text = json.dumps(history)
    assert "sk-live-123456" not in text and "tok-987654" not in text
    assert history[1]["content"]["parts"][0]["args"] == {"api_key": "[REDACTED]", "user": "ada"}
    assert "sk-live" not in json.dumps(stats)


def test_stats_are_structural_and_the_fingerprint_covers_the_history() -> None:
    history, stats = build(tool_session())
    assert set(stats) == {
        "events",
        "skipped",
        "filtered",
        "selected",
        "dropped",
        "bytes",
        "tokens_estimate",
        "fingerprint",
    }
    assert stats["bytes"] == sum(size(e) for e in history)
    assert stats["tokens_estimate"] == estimate_tokens(stats["bytes"]) == -(-stats["bytes"] // 4)
    assert len(stats["fingerprint"]) == 32 and int(stats["fingerprint"], 16) >= 0
    assert build(tool_session())[1]["fingerprint"] == stats["fingerprint"]
    assert build(tool_session()[:-1] + [ev("cur", "user", "thx")])[1]["fingerprint"] != stats["fingerprint"]
    assert not any(word in json.dumps(stats) for word in ("hello", "Oslo", "thanks"))


# -- filters ----------------------------------------------------------------------------------------------------


def policy(**filters: Any) -> ContextPolicy:
    return ContextPolicy.from_config({"filters": filters})


def test_authors_keeps_only_those_authors_and_the_current_user_event() -> None:
    events = [
        ev("i1", "user", "q1"),
        ev("i1", "Helper", "from helper"),
        ev("i1", "A", "from A", is_final=True),
        ev("cur", "user", "q2"),
    ]
    history, stats = build(events, policy=policy(authors=["A"]))
    # "q1" is gone, so "from A" leads without a question and is dropped too.
    assert summary(history) == [("user", ["q2"])]
    assert stats["filtered"] == 2 and stats["dropped"] == 1
    history, _ = build(events, policy=policy(authors=["user", "A"]))
    assert summary(history) == [("user", ["q1"]), ("model", ["from A"]), ("user", ["q2"])]


def test_exclude_authors_drops_those_authors_but_never_the_current_user_event() -> None:
    events = [
        ev("i1", "user", "q1"),
        ev("i1", "Helper", "from helper"),
        ev("i1", "A", "from A"),
        ev("cur", "user", "q2"),
    ]
    history, stats = build(events, policy=policy(exclude_authors=["Helper"]))
    assert summary(history) == [("user", ["q1"]), ("model", ["from A"]), ("user", ["q2"])]
    assert stats["filtered"] == 1
    history, _ = build(events, policy=policy(exclude_authors=["user", "Helper"]))
    assert summary(history) == [("user", ["q2"])]


def test_invocation_ids_keeps_the_listed_invocations_plus_the_current_one() -> None:
    events = [
        ev("i1", "user", "q1"),
        ev("i1", "A", "a1"),
        ev("i2", "user", "q2"),
        ev("i2", "A", "a2"),
        ev("cur", "user", "q3"),
        ev("cur", "A", "a3 so far"),
    ]
    history, stats = build(events, policy=policy(invocation_ids=["i2"]))
    assert summary(history) == [("user", ["q2"]), ("model", ["a2"]), ("user", ["q3"]), ("model", ["a3 so far"])]
    assert stats["filtered"] == 2


def test_content_types_drops_other_parts_and_keeps_tool_exchanges_consistent() -> None:
    png = c.inline_data("image/png", b"\x89PNG")
    events = [
        ev("i1", "user", calls(c.text("see"), png)),
        ev("i1", "A", calls(c.text("checking"), c.function_call("f", {}, id="x1"))),
        ev("i1", "A", calls(c.function_response("f", {"ok": 1}, id="x1"))),
        ev("i1", "A", calls(png)),
        ev("cur", "user", calls(c.text("and this"), png)),
    ]
    history, stats = build(events, policy=policy(content_types=["text", "function_call", "function_response"]))
    assert summary(history) == [
        ("user", ["see"]),
        ("model", ["checking", "function_call:x1"]),
        ("user", ["function_response:x1"]),
        ("user", ["and this", "inline_data:image/png"]),
    ]  # the current input is whole
    assert stats["filtered"] == 1
    # Without function_call parts, their responses have nothing to answer and go too...
    history, _ = build(events, policy=policy(content_types=["text", "function_response"]))
    assert summary(history)[:3] == [
        ("user", ["see"]),
        ("model", ["checking"]),
        ("user", ["and this", "inline_data:image/png"]),
    ]
    # ...and without responses, the calls they answered go too.
    history, _ = build(events, policy=policy(content_types=["text", "function_call"]))
    assert summary(history)[:2] == [("user", ["see"]), ("model", ["checking"])]
    assert all("function" not in p["type"] for e in history for p in e["content"]["parts"])


def test_since_and_until_are_inclusive_wall_clock_bounds() -> None:
    events = [
        ev("i1", "user", "q1", t=T0),
        ev("i1", "A", "a1", t=T0 + 1),
        ev("i2", "user", "q2", t=T0 + 2),
        ev("i2", "A", "a2", t=T0 + 3),
        ev("cur", "user", "q3", t=T0 + 4),
    ]
    history, _ = build(events, policy=policy(since=T0 + 2))
    assert summary(history) == [("user", ["q2"]), ("model", ["a2"]), ("user", ["q3"])]
    history, _ = build(events, policy=policy(since=T0, until=T0 + 1))
    assert summary(history) == [("user", ["q1"]), ("model", ["a1"]), ("user", ["q3"])]
    history, _ = build(events, policy=policy(since=T0 + 1))  # a1 leads without its question
    assert summary(history) == [("user", ["q2"]), ("model", ["a2"]), ("user", ["q3"])]


def test_final_only_keeps_final_answers_user_turns_and_the_current_tool_exchange() -> None:
    events = [
        *tool_session(),
        ev("cur", "A", calls(c.text("looking"), c.function_call("f", {}, id="k1"))),
        ev("cur", "A", calls(c.function_response("f", {"v": 1}, id="k1"))),
    ]
    history, stats = build(events, policy=policy(final_only=True))
    assert summary(history) == [
        ("user", ["hello"]),
        ("model", ["hi there"]),
        ("user", ["weather?"]),
        ("model", ["3 degrees"]),
        ("user", ["thanks"]),
        ("model", ["looking", "function_call:k1"]),
        ("user", ["function_response:k1"]),
    ]
    assert stats["filtered"] == 2


@pytest.mark.parametrize(
    "filters",
    [
        {"authors": ["A"]},
        {"exclude_authors": ["user"]},
        {"invocation_ids": []},
        {"content_types": ["function_call"]},
        {"since": T0 + 100},
        {"until": T0 - 100},
    ],
)
def test_the_current_user_event_survives_every_filter(filters: dict[str, Any]) -> None:
    history, _ = build(tool_session(), policy=policy(**filters))
    assert ("user", ["thanks"]) in summary(history)


def test_the_whole_current_invocation_is_exempt_from_filters() -> None:
    events = [
        ev("old", "user", "before"),
        ev("cur", "user", "first"),
        ev("cur", "user", "second"),
        ev("cur", "A", "answer"),
    ]
    history, stats = build(events, policy=policy(exclude_authors=["user", "A"]))
    assert summary(history) == [("user", ["first"]), ("user", ["second"]), ("model", ["answer"])]
    assert stats["filtered"] == 1


def test_unanswered_calls_and_orphan_responses_are_dropped() -> None:
    events = [
        ev("i1", "user", "q1"),
        ev("i1", "A", calls(c.text("trying"), c.function_call("f", {}, id="lost"), c.function_call("g", {}, id="g1"))),
        ev("i1", "A", calls(c.function_response("g", {}, id="g1"), c.function_response("h", {}, id="zz"))),
        ev("i2", "user", "q2"),
        ev("i2", "A", calls(c.function_call("f", {}, id="crashed"))),  # the invocation crashed here
        ev("cur", "user", "q3"),
    ]
    history, stats = build(events)
    assert summary(history) == [
        ("user", ["q1"]),
        ("model", ["trying", "function_call:g1"]),
        ("user", ["function_response:g1"]),
        ("user", ["q2"]),
        ("user", ["q3"]),
    ]
    assert stats["filtered"] == 1


def test_responses_without_ids_answer_the_first_call_of_the_same_name() -> None:
    events = [
        ev("cur", "user", "q"),
        ev("cur", "A", calls(c.function_call("f", {"n": 1}), c.function_call("g", {}))),
        ev("cur", "A", calls(c.function_response("g", {}), c.function_response("f", {}), c.function_response("f", {}))),
    ]
    history, _ = build(events)
    assert summary(history) == [
        ("user", ["q"]),
        ("model", ["function_call:f", "function_call:g"]),
        ("user", ["function_response:g", "function_response:f"]),
    ]


def test_a_current_user_function_response_is_kept_with_the_call_it_answers() -> None:
    events = [
        ev("i1", "user", "book it"),
        ev("i1", "A", calls(c.function_call("book", {}, id="b1"))),
        ev("cur", "user", calls(c.function_response("book", {"approved": True}, id="b1"))),
    ]
    assert summary(build(events)[0]) == [
        ("user", ["book it"]),
        ("model", ["function_call:b1"]),
        ("user", ["function_response:b1"]),
    ]
    # Even when filters drop the call, the current user event stays.
    history, _ = build(events, policy=policy(invocation_ids=[]))
    assert summary(history) == [("user", ["function_response:b1"])]


# -- budgets ----------------------------------------------------------------------------------------------------


def long_session(n: int, pad: int = 100) -> list[Event]:
    events = []
    for i in range(n):
        events += [ev(f"i{i}", "user", f"q{i} " + "x" * pad), ev(f"i{i}", "A", f"a{i} " + "y" * pad)]
    return [*events, ev("cur", "user", "now")]


def test_truncate_drops_the_oldest_exchanges_first() -> None:
    events = long_session(5)
    full, _ = build(events)
    budget = sum(size(e) for e in full[-5:])  # the last two exchanges and the current turn
    history, stats = build(events, policy=ContextPolicy(max_bytes=budget))
    assert summary(history) == summary(full[-5:])
    assert stats["dropped"] == 6 and stats["selected"] == 5 and stats["bytes"] <= budget
    tokens = estimate_tokens(sum(size(e) for e in full[-3:]))
    history, _ = build(events, policy=ContextPolicy(max_tokens=tokens))
    assert summary(history) == summary(full[-3:])


def test_truncate_fails_when_the_current_exchange_alone_is_over_budget() -> None:
    events = [*long_session(2), ev("cur", "A", "z" * 500)]
    with pytest.raises(BudgetExceeded) as info:
        build(events, policy=ContextPolicy(max_bytes=300))
    assert info.value.reason == "context_budget_exceeded"
    assert info.value.details["max_bytes"] == 300 and info.value.details["bytes"] > 500
    assert "zzz" not in str(info.value) and "zzz" not in json.dumps(info.value.to_dict())


def test_overflow_error_raises_with_structural_numbers_only() -> None:
    events = long_session(3)
    full, stats = build(events)
    with pytest.raises(BudgetExceeded) as info:
        build(events, policy=ContextPolicy(max_bytes=stats["bytes"] - 1, overflow="error"))
    assert info.value.reason == "context_budget_exceeded"
    assert info.value.details == {"bytes": stats["bytes"], "max_bytes": stats["bytes"] - 1}
    with pytest.raises(BudgetExceeded) as info:
        build(events, policy=ContextPolicy(max_tokens=10, overflow="error"))
    assert info.value.details == {"tokens": stats["tokens_estimate"], "max_tokens": 10}
    assert "xxx" not in json.dumps(info.value.to_dict())
    assert build(events, policy=ContextPolicy(max_bytes=stats["bytes"], overflow="error"))[0] == full


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[Event], int, int]:
    """Exchanges of a user turn, zero to two tool rounds (responses in one or several events) and an answer;
    the index of the current exchange; a budget share."""
    n = draw(st.integers(1, 6))
    events: list[Event] = []
    t = T0
    for i in range(n):
        inv = f"inv-{i}"
        t += 1
        events.append(ev(inv, "user", f"u{i}:" + "x" * draw(st.integers(0, 150)), t=t))
        for r in range(draw(st.integers(0, 2))):
            ids = [f"c{i}.{r}.{j}" for j in range(draw(st.integers(1, 3)))]
            pad = "y" * draw(st.integers(0, 80))
            events.append(ev(inv, "A", calls(*[c.function_call("tool", {"pad": pad}, id=k) for k in ids]), t=t))
            responses = [c.function_response("tool", {"ok": k}, id=k) for k in ids]
            if draw(st.booleans()):
                events.extend(ev(inv, "A", calls(p), t=t) for p in responses)
            else:
                events.append(ev(inv, "A", calls(*responses), t=t))
        if draw(st.booleans()):
            events.append(ev(inv, "A", f"answer {i}", t=t, is_final=True))
    current = draw(st.one_of(st.just(n - 1), st.integers(0, n - 1)))
    return events, current, draw(st.integers(0, 110) | st.integers(60, 100))  # budget: % of the whole history


def exchanges(history: list[dict[str, Any]]) -> list[tuple[int, list[dict[str, Any]]]]:
    """Split a history into ``(exchange number, entries)`` at each ``u<i>:`` user turn."""
    units: list[tuple[int, list[dict[str, Any]]]] = []
    for entry in history:
        first = entry["content"]["parts"][0]
        if entry["role"] == "user" and first["type"] == "text":
            units.append((int(first["text"][1:].split(":")[0]), [entry]))
        else:
            units[-1][1].append(entry)
    return units


def assert_paired(history: list[dict[str, Any]]) -> None:
    """Every call is answered by the next entry and every response answers a call of the previous one."""
    for i, entry in enumerate(history):
        parts = entry["content"]["parts"]
        call_ids = [p["id"] for p in parts if p["type"] == "function_call"]
        if call_ids:
            nxt = history[i + 1]["content"]["parts"] if i + 1 < len(history) else []
            assert sorted(p["id"] for p in nxt if p["type"] == "function_response") == sorted(call_ids)
        response_ids = [p["id"] for p in parts if p["type"] == "function_response"]
        if response_ids:
            prev = history[i - 1]["content"]["parts"] if i else []
            assert set(response_ids) <= {p["id"] for p in prev if p["type"] == "function_call"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.booleans())
def test_truncation_keeps_whole_newest_exchanges_and_the_current_turn(
    session: tuple[list[Event], int, int], by_tokens: bool
) -> None:
    events, current, share = session
    full, full_stats = build(events, f"inv-{current}")
    budget = max(1, full_stats["bytes"] * share // 100)
    limit = ContextPolicy(max_tokens=estimate_tokens(budget)) if by_tokens else ContextPolicy(max_bytes=budget)
    fits = (lambda n: estimate_tokens(n) <= estimate_tokens(budget)) if by_tokens else (lambda n: n <= budget)
    units = dict(exchanges(full))
    unit_bytes = {i: sum(size(e) for e in unit) for i, unit in units.items()}
    try:
        history, stats = build(events, f"inv-{current}", limit)
    except BudgetExceeded as exc:
        assert exc.reason == "context_budget_exceeded"
        assert not fits(unit_bytes[current])
        return
    assert_paired(history)
    assert history[0]["role"] == "user" and history[0]["content"]["parts"][0]["type"] == "text"
    kept = exchanges(history)
    numbers = [i for i, _ in kept]
    # Earlier invocations keep their order; the current one comes last (it may be a resumed, older invocation).
    assert current in numbers and numbers == sorted(n for n in numbers if n != current) + [current]
    assert all(unit == units[i] for i, unit in kept)  # exchanges are kept whole, never split
    others = [i for i in units if i != current]
    dropped = [i for i in others if i not in numbers]
    assert dropped == others[: len(dropped)]  # the oldest go first
    assert stats["bytes"] == sum(unit_bytes[i] for i in numbers) and fits(stats["bytes"])
    if dropped:  # nothing was dropped that would have fit
        assert not fits(stats["bytes"] + unit_bytes[dropped[-1]])
    assert stats["dropped"] == sum(len(units[i]) for i in dropped) and stats["selected"] == len(history)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sessions(),
    st.sets(st.sampled_from(["text", "function_call", "function_response"])),
    st.sets(st.sampled_from(["user", "A"])),
    st.integers(0, 8),
)
def test_filters_never_leave_half_a_tool_exchange_or_lose_the_current_turn(
    session: tuple[list[Event], int, int], types: set[str], excluded: set[str], since: int
) -> None:
    events, current, _ = session
    chosen = policy(content_types=sorted(types), exclude_authors=sorted(excluded), since=T0 + since)
    history, stats = build(events, f"inv-{current}", chosen)
    assert_paired(history)
    assert history[0]["role"] == "user" and history[0]["content"]["parts"][0]["type"] != "function_response"
    assert any(e["content"]["parts"][0].get("text", "").startswith(f"u{current}:") for e in history)
    assert stats["skipped"] == 0 and stats["selected"] == len(history) <= len(events)


# -- the request envelope ---------------------------------------------------------------------------------------


CONFIG = {
    "provider": "gemini",
    "model": "gemini-2.5-flash",
    "api_key": "sk-very-secret-1",
    "base_url": "https://x",
    "instructions": "Be brief.",
    "global_instruction": "Be kind.",
    "generation_config": {"temperature": 0.2},
    "tool_config": {"mode": "auto"},
}
DECLS = [
    {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def test_the_request_envelope_counts_instructions_history_declarations_and_framing() -> None:
    history, stats = build(tool_session())
    measured = check_request_envelope(CONFIG, history, DECLS, DEFAULT)
    sent = {
        "config": {k: CONFIG[k] for k in ("instructions", "global_instruction", "generation_config", "tool_config")},
        "history": history,
        "declarations": DECLS,
    }
    expected = len(canonical_dumps(sent).encode()) + FRAMING_BYTES * (len(history) + len(DECLS))
    assert measured["bytes"] == expected > stats["bytes"]
    assert measured["tokens_estimate"] == estimate_tokens(expected) and len(measured["fingerprint"]) == 32
    assert check_request_envelope({**CONFIG, "api_key": "another-key-2"}, history, DECLS, DEFAULT) == measured
    bigger = check_request_envelope({**CONFIG, "instructions": "Be brief. " * 20}, history, DECLS, DEFAULT)
    assert bigger["bytes"] > measured["bytes"] and bigger["fingerprint"] != measured["fingerprint"]


def test_secrets_inside_envelope_values_are_pruned_before_measuring() -> None:
    leaky = {**CONFIG, "tool_config": {"mode": "auto", "token": "tok-zzzzzz"}}
    clean = {**CONFIG, "tool_config": {"mode": "auto", "token": "[REDACTED]"}}
    assert check_request_envelope(leaky, [], [], DEFAULT) == check_request_envelope(clean, [], [], DEFAULT)


def test_an_oversized_request_envelope_fails_with_structural_details() -> None:
    history, _ = build(tool_session())
    measured = check_request_envelope(CONFIG, history, DECLS, DEFAULT)
    assert (
        check_request_envelope(CONFIG, history, DECLS, ContextPolicy(max_request_bytes=measured["bytes"])) == measured
    )
    with pytest.raises(BudgetExceeded) as info:
        check_request_envelope(CONFIG, history, DECLS, ContextPolicy(max_request_bytes=measured["bytes"] - 1))
    assert info.value.reason == "request_context_budget_exceeded"
    assert info.value.details == {"bytes": measured["bytes"], "max_request_bytes": measured["bytes"] - 1}
    with pytest.raises(BudgetExceeded) as info:
        check_request_envelope(CONFIG, history, DECLS, ContextPolicy(max_request_tokens=5))
    assert info.value.details == {"tokens": measured["tokens_estimate"], "max_request_tokens": 5}
    text = json.dumps(info.value.to_dict())
    assert not any(word in text for word in ("sk-very-secret", "Be brief", "Oslo", "get_weather"))


def test_an_unresolved_instruction_provider_is_not_json() -> None:
    with pytest.raises(ValidationError) as info:
        check_request_envelope({"instructions": object()}, [], [], DEFAULT)
    assert info.value.reason == "invalid_json"


# -- policy config ----------------------------------------------------------------------------------------------


def test_the_default_policy_selects_everything_without_budgets() -> None:
    assert ContextPolicy.from_config(None) == ContextPolicy.from_config({}) == ContextPolicy()
    assert ContextPolicy().overflow == "truncate" and ContextPolicy().filters == ContextFilters()
    full = ContextPolicy.from_config(
        {
            "max_bytes": 10_000,
            "max_tokens": 2_000,
            "max_request_bytes": 20_000,
            "max_request_tokens": None,
            "overflow": "error",
            "filters": {
                "authors": ["user", "A"],
                "exclude_authors": ["B"],
                "invocation_ids": ["i1"],
                "content_types": ["text"],
                "since": 1,
                "until": 2.5,
                "include_partial": False,
                "final_only": True,
            },
        }
    )
    assert full.max_bytes == 10_000 and full.max_request_tokens is None and full.overflow == "error"
    assert full.filters.authors == frozenset({"user", "A"}) and full.filters.since == 1.0
    assert full.filters.content_types == frozenset({"text"}) and full.filters.final_only is True


@pytest.mark.parametrize(
    ("config", "reason", "key"),
    [
        ({"max_bytez": 1}, "unknown_key", "max_bytez"),
        ({"filters": {"author": ["A"]}}, "unknown_key", "filters.author"),
        ({"max_bytes": 0}, "invalid_value", "max_bytes"),
        ({"max_tokens": True}, "invalid_value", "max_tokens"),
        ({"max_request_bytes": 1.5}, "invalid_value", "max_request_bytes"),
        ({"max_request_tokens": "9"}, "invalid_value", "max_request_tokens"),
        ({"overflow": "drop"}, "invalid_value", "overflow"),
        ({"overflow": None}, "invalid_value", "overflow"),
        ({"overflow": "compress"}, "invalid_value", "compressor"),
        ({"filters": ["authors"]}, "invalid_value", "filters"),
        ({"filters": {"authors": "user"}}, "invalid_value", "filters.authors"),
        ({"filters": {"authors": [""]}}, "invalid_value", "filters.authors"),
        ({"filters": {"exclude_authors": [1]}}, "invalid_value", "filters.exclude_authors"),
        ({"filters": {"invocation_ids": {"a": 1}}}, "invalid_value", "filters.invocation_ids"),
        ({"filters": {"content_types": ["audio"]}}, "invalid_value", "filters.content_types"),
        ({"filters": {"since": "yesterday"}}, "invalid_value", "filters.since"),
        ({"filters": {"until": float("inf")}}, "invalid_value", "filters.until"),
        ({"filters": {"since": False}}, "invalid_value", "filters.since"),
        ({"filters": {"since": 5, "until": 4}}, "invalid_value", "filters.until"),
        ({"filters": {"include_partial": True}}, "invalid_value", "filters.include_partial"),
        ({"filters": {"include_partial": 0}}, "invalid_value", "filters.include_partial"),
        ({"filters": {"final_only": 1}}, "invalid_value", "filters.final_only"),
        ("truncate", "invalid_value", "context_policy"),
    ],
)
def test_malformed_policies_are_config_errors_naming_the_key(config: Any, reason: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        ContextPolicy.from_config(config)
    assert info.value.reason == reason and info.value.details == {"key": key}


def test_config_errors_never_echo_the_configured_value() -> None:
    with pytest.raises(ConfigError) as info:
        ContextPolicy.from_config({"filters": {"authors": ["ok", 12345678]}})
    assert "12345678" not in json.dumps(info.value.to_dict())


def test_direct_construction_validates_like_from_config() -> None:
    with pytest.raises(ConfigError) as info:
        ContextPolicy(max_bytes=-1)
    assert info.value.details == {"key": "max_bytes"}
    with pytest.raises(ConfigError) as info:
        ContextFilters(content_types=frozenset({"video"}))
    assert info.value.details == {"key": "filters.content_types"}
    assert ContextFilters(authors=["A", "A"]).authors == frozenset({"A"})  # type: ignore[arg-type]


_KEYS = st.sampled_from(
    [
        "max_bytes",
        "max_tokens",
        "max_request_bytes",
        "max_request_tokens",
        "overflow",
        "filters",
        "authors",
        "exclude_authors",
        "invocation_ids",
        "content_types",
        "since",
        "until",
        "include_partial",
        "final_only",
        "bogus",
    ]
) | st.text(max_size=4)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-3, 10)
    | st.integers(min_value=10**300)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=4)
    | st.sampled_from(["truncate", "error", "compress", "text", "function_call", "user", "A", ""])
)
_JUNK = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        _JUNK,
        st.dictionaries(_KEYS, _JUNK, max_size=6),
        st.builds(
            lambda top, f: {**top, "filters": f},
            st.dictionaries(_KEYS, _JUNK, max_size=3),
            st.dictionaries(_KEYS, _JUNK, max_size=5),
        ),
    )
)
def test_any_junk_config_is_a_policy_or_a_config_error(config: Any) -> None:
    try:
        result = ContextPolicy.from_config(config)
    except ConfigError as exc:
        assert exc.reason in {"unknown_key", "invalid_value", "context_compress_unsupported"}
        assert set(exc.details) == {"key"}
    else:
        assert isinstance(result, ContextPolicy) and result.overflow in {"truncate", "error"}
