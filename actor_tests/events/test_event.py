"""Event: exact round-trip, strict decoding, redaction at the edge, pickling, fuzzing."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors import content as c
from adk_actors.errors import ContentError, EventError, ToolError
from adk_actors.events import ErrorInfo, Event, EventActions, Pause


def full_event() -> Event:
    return Event.new(
        invocation_id="inv-1",
        author="assistant",
        timestamp=1700000000.25,
        branch="root.child",
        content=c.new([c.text("Hi"), c.function_call("f", {"api_key": "abc123456", "x": 1}, id="c1")]),
        partial=False,
        is_final=True,
        actions=EventActions(
            state_delta={"user:name": "Ada", "temp:token": "t0ps3cret"},
            pause=Pause(
                continuation_id="cont-1",
                reason="tool_confirmation",
                details={"type": "tool_confirmation", "action_id": "a1"},
            ),
            transfer_to_agent="other",
            escalate=True,
            context_effects=({"kind": "compact"},),
        ),
        provider_metadata={"usage": {"total_tokens": 5}},
        error=ErrorInfo(reason="rate_limited", type="RateLimited", details={"retry_delay_s": 2}),
    )


def test_new_generates_id_and_timestamp() -> None:
    event = Event.new(invocation_id="inv", author="user", content="hello")
    assert len(event.id) == 32 and int(event.id, 16) >= 0
    assert event.timestamp > 1_600_000_000
    assert event.content == c.as_content("hello")
    assert event.text() == "hello"
    assert Event.new(invocation_id="inv", author="user").id != event.id


def test_round_trip_is_exact() -> None:
    event = full_event()
    wire = event.to_dict()
    assert Event.from_dict(wire) == event
    assert Event.from_dict(wire).to_dict() == wire
    assert c.canonical_loads(c.canonical_dumps(wire)) == wire


def test_minimal_wire_shape_matches_contract() -> None:
    event = Event(id="e1", invocation_id="", author="user", timestamp=1)
    assert event.to_dict() == {
        "schema_version": 1,
        "id": "e1",
        "invocation_id": "",
        "author": "user",
        "timestamp": 1.0,
        "content": None,
        "partial": False,
        "is_final": False,
        "actions": {
            "state_delta": {},
            "pause": None,
            "transfer_to_agent": None,
            "escalate": False,
            "context_effects": [],
        },
        "provider_metadata": None,
        "error": None,
        "branch": None,
    }
    assert Event.from_dict(event.to_dict()) == event
    assert event.actions.is_empty()


def _mutations() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []

    def variant(path: list[str], value: Any) -> tuple[str, Any]:
        wire = full_event().to_dict()
        node = wire
        for key in path[:-1]:
            node = node[key]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        return ".".join(path), wire

    for key in full_event().to_dict():
        out.append(variant([key], KeyError))
    out += [
        variant(["extra"], 1),
        variant(["schema_version"], 2),
        variant(["schema_version"], True),
        variant(["id"], ""),
        variant(["id"], 5),
        variant(["id"], "a\x00"),
        variant(["author"], None),
        variant(["timestamp"], "now"),
        variant(["timestamp"], True),
        variant(["timestamp"], float("inf")),
        variant(["partial"], 0),
        variant(["is_final"], "true"),
        variant(["content"], "hello"),
        variant(["content"], {"parts": []}),
        variant(["actions"], None),
        variant(["actions", "extra"], 1),
        variant(["actions", "state_delta"], []),
        variant(["actions", "state_delta"], {"k": float("nan")}),
        variant(["actions", "escalate"], None),
        variant(["actions", "context_effects"], {}),
        variant(["actions", "context_effects"], [1]),
        variant(["actions", "pause"], {"reason": "x"}),
        variant(["actions", "pause"], {"continuation_id": "c", "reason": "r", "details": {}, "x": 1}),
        variant(["actions", "transfer_to_agent"], 3),
        variant(["provider_metadata"], []),
        variant(["error"], {"reason": "x"}),
        variant(["error"], "boom"),
        variant(["branch"], 1),
    ]
    return out


@pytest.mark.parametrize(("where", "wire"), _mutations(), ids=[m[0] for m in _mutations()])
def test_malformed_events_are_rejected(where: str, wire: dict[str, Any]) -> None:
    with pytest.raises(EventError):
        Event.from_dict(wire)


@pytest.mark.parametrize(
    "timestamp",
    [10**400, -(10**400), 2**1024, 10**5000, float("nan"), float("-inf")],
    ids=["1e400", "-1e400", "2^1024", "1e5000", "nan", "-inf"],
)
def test_out_of_range_timestamps_are_event_errors(timestamp: Any) -> None:
    wire = full_event().to_dict()
    wire["timestamp"] = timestamp
    with pytest.raises(EventError) as info:
        Event.from_dict(wire)
    assert info.value.reason == "invalid_event" and info.value.details["field"] == "timestamp"
    with pytest.raises(EventError):
        Event.new(invocation_id="i", author="a", timestamp=timestamp)
    with pytest.raises(EventError):
        Event(id="e", invocation_id="i", author="a", timestamp=timestamp)


@pytest.mark.parametrize("bad", ["\ud800", "x\udfffy"])
def test_lone_surrogates_are_event_errors_everywhere(bad: str) -> None:
    for path in (["id"], ["author"], ["branch"], ["actions", "transfer_to_agent"]):
        wire = full_event().to_dict()
        node = wire
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = bad
        with pytest.raises(EventError):
            Event.from_dict(wire)
    for delta in ({"k": bad}, {bad: 1}, {"k": [{"n": bad}]}):
        with pytest.raises(EventError) as info:
            EventActions(state_delta=delta)
        assert info.value.reason == "invalid_json"
        assert bad not in f"{info.value} {info.value!r} {info.value.details}"
    with pytest.raises(EventError):
        Event.new(invocation_id="i", author="a", provider_metadata={"m": bad})


def test_content_errors_surface_as_event_errors_with_structure() -> None:
    wire = full_event().to_dict()
    wire["content"]["parts"][0]["type"] = "video"
    with pytest.raises(EventError) as info:
        Event.from_dict(wire)
    assert info.value.details["content_reason"] == "unknown_part_type"
    assert info.value.details["part"] == 0


def test_constructor_validates_too() -> None:
    with pytest.raises(EventError):
        Event(id="e", invocation_id="i", author="a", timestamp=1.0, content="text")  # type: ignore[arg-type]
    with pytest.raises(EventError):
        EventActions(state_delta={"k": object()})
    with pytest.raises(ContentError):
        Event.new(invocation_id="i", author="a", content={"schema_version": 1, "parts": [{"type": "?"}]})


def test_event_holds_private_copies() -> None:
    delta = {"k": [1]}
    actions = EventActions(state_delta=delta)
    delta["k"].append(2)
    assert actions.state_delta == {"k": [1]}
    wire = Event.new(invocation_id="i", author="a", actions=actions).to_dict()
    wire["actions"]["state_delta"]["k"].append(3)
    assert actions.state_delta == {"k": [1]}


def test_redacted_prunes_secret_keys_but_stored_event_stays_exact() -> None:
    event = full_event()
    before = copy.deepcopy(event.to_dict())
    red = event.redacted()
    assert red.actions.state_delta == {"user:name": "Ada", "temp:token": "[REDACTED]"}
    call = red.content.function_calls()[0] if red.content else None
    assert call is not None and call.args == {"api_key": "[REDACTED]", "x": 1}
    assert red.provider_metadata == {"usage": {"total_tokens": 5}}
    assert event.to_dict() == before
    assert Event.from_dict(red.to_dict()) == red


def test_error_info_from_exception_is_structural() -> None:
    info = ErrorInfo.from_exception(ToolError("secret text xyz", reason="tool_failed", details={"token": "abcdefg"}))
    assert info == ErrorInfo(reason="tool_failed", type="ToolError", details={"token": "[REDACTED]"})
    odd = ErrorInfo.from_exception(ToolError("x", reason="bad\x00reason"))  # AdkError bounds its reason: no NUL
    assert odd == ErrorInfo(reason="bad\ufffdreason", type="ToolError")
    plain = ErrorInfo.from_exception(RuntimeError("secret text xyz"))
    assert plain.to_dict() == {"reason": "internal_error", "type": "RuntimeError", "details": {}}


def test_is_final_response() -> None:
    assert Event.new(invocation_id="i", author="a", is_final=True).is_final_response()
    assert not Event.new(invocation_id="i", author="a", is_final=True, partial=True).is_final_response()


@pytest.mark.parametrize(
    "value", [full_event(), EventActions(), Pause(continuation_id="c", reason="r"), ErrorInfo(reason="r", type="T")]
)
def test_values_pickle(value: object) -> None:
    assert pickle.loads(pickle.dumps(value)) == value


# Huge integers (beyond the float range and beyond the interpreter's int-to-str limit) and lone surrogates
# (which hypothesis' default text strategy never draws) are the inputs that used to escape as raw exceptions.
# (Built by map: hypothesis cannot repr a sampled 10**5000 past the interpreter's int-to-str limit.)
huge_ints = st.builds(lambda e, sign: sign * 10**e, st.sampled_from([309, 400, 4299, 5000]), st.sampled_from([1, -1]))
any_text = st.text(alphabet=st.characters(blacklist_categories=()), max_size=12) | st.sampled_from(
    ["\ud800", "a\udfff", "\udc00b", "x\x00"]
)
scalars = st.none() | st.booleans() | st.integers() | huge_ints | st.floats() | st.text(max_size=12) | any_text
junk = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6) | any_text, inner, max_size=3),
    max_leaves=12,
)


def _perturbed(draw_key: str, value: Any) -> dict[str, Any]:
    wire = full_event().to_dict()
    wire[draw_key] = value
    return wire


event_keys = st.sampled_from(sorted(full_event().to_dict()))


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        junk,
        st.builds(_perturbed, event_keys, junk),
        st.builds(_perturbed, st.sampled_from(["timestamp", "id", "author", "branch"]), scalars),
        st.builds(
            lambda k, v: {**full_event().to_dict(), "actions": {**full_event().to_dict()["actions"], k: v}},
            st.sampled_from(["state_delta", "pause", "transfer_to_agent", "escalate", "context_effects"]),
            junk,
        ),
    )
)
def test_event_decoding_raises_only_event_errors(value: Any) -> None:
    try:
        event = Event.from_dict(value)
    except EventError:
        return
    assert Event.from_dict(event.to_dict()) == event
