"""W3C trace context: strict traceparent parsing, bounded tracestate, headers in and out, the caller's span."""

from __future__ import annotations

import pickle
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState, use_span

from adk_actors.errors import ValidationError
from adk_actors.observability.trace import (
    MAX_TRACESTATE_CHARS,
    MAX_TRACESTATE_MEMBERS,
    TraceContext,
    bound_tracestate,
    child_of,
    current,
    from_headers,
    inject_headers,
    new_span_id,
    new_trace,
    parse_traceparent,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{SPAN}-01"

hex_ids = st.integers(min_value=1, max_value=(1 << 128) - 1).map(lambda n: format(n, "032x"))
span_ids = st.integers(min_value=1, max_value=(1 << 64) - 1).map(lambda n: format(n, "016x"))
flags = st.integers(min_value=0, max_value=255).map(lambda n: format(n, "02x"))


def test_a_valid_traceparent_parses_to_its_fields_and_prints_back() -> None:
    ctx = parse_traceparent(VALID, "congo=t61rcWkgMzE")
    assert (ctx.trace_id, ctx.span_id, ctx.sampled, ctx.tracestate) == (TRACE, SPAN, True, "congo=t61rcWkgMzE")
    assert ctx.traceparent == VALID
    assert parse_traceparent(f"00-{TRACE}-{SPAN}-00").sampled is False


@given(hex_ids, span_ids, flags)
def test_every_well_formed_version_00_value_parses_exactly(trace_id: str, span_id: str, flag: str) -> None:
    ctx = parse_traceparent(f"00-{trace_id}-{span_id}-{flag}")
    assert (ctx.trace_id, ctx.span_id, ctx.sampled) == (trace_id, span_id, bool(int(flag, 16) & 1))
    assert parse_traceparent(ctx.traceparent) == ctx


@pytest.mark.parametrize(
    "value",
    [
        "",
        f"ff-{TRACE}-{SPAN}-01",  # version ff is never valid
        f"01-{TRACE}-{SPAN}-01",  # only version 00 is accepted (strict)
        f"00-{'0' * 32}-{SPAN}-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero span id
        f"00-{TRACE.upper()}-{SPAN}-01",  # upper-case hex
        f"00-{TRACE}-{SPAN.upper()}-01",
        f"00-{TRACE}-{SPAN}-0A",
        f"00-{TRACE[:-1]}-{SPAN}-01",  # short trace id
        f"00-{TRACE}a-{SPAN}-01",  # long trace id
        f"00-{TRACE}-{SPAN[:-1]}-01",
        f"00-{TRACE}-{SPAN}-1",
        f"00-{TRACE}-{SPAN}-01-extra",  # extra fields are not version 00
        f" {VALID}",
        f"{VALID} ",
        f"00_{TRACE}_{SPAN}_01",
        f"00-{TRACE[:-1]}g-{SPAN}-01",
    ],
)
def test_malformed_traceparents_are_rejected_with_invalid_traceparent(value: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_traceparent(value)
    assert info.value.reason == "invalid_traceparent"


@given(st.text(max_size=80))
def test_arbitrary_text_either_parses_or_raises_invalid_traceparent(value: str) -> None:
    try:
        ctx = parse_traceparent(value)
    except ValidationError as err:
        assert err.reason == "invalid_traceparent"
    else:
        assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}", value)
        assert ctx.trace_id != "0" * 32 and ctx.span_id != "0" * 16


@given(hex_ids, span_ids, st.integers(min_value=0, max_value=54), st.sampled_from("Ggz-X "))
def test_a_single_corrupted_character_is_rejected(trace_id: str, span_id: str, at: int, bad: str) -> None:
    value = f"00-{trace_id}-{span_id}-01"
    corrupted = value[:at] + bad + value[at + 1 :]
    if corrupted == value:
        return
    with pytest.raises(ValidationError):
        parse_traceparent(corrupted)


def test_the_error_says_why_without_quoting_the_value() -> None:
    with pytest.raises(ValidationError) as ff:
        parse_traceparent(f"ff-{TRACE}-{SPAN}-01")
    with pytest.raises(ValidationError) as v01:
        parse_traceparent(f"01-{TRACE}-{SPAN}-01")
    assert ff.value.details["why"] == "version ff is never valid"
    assert v01.value.details["why"] == "unsupported version (only 00)"
    assert TRACE not in str(ff.value) and TRACE not in str(v01.value.details)


def test_construction_validates_ids_like_the_parser() -> None:
    for trace_id, span_id in [("0" * 32, SPAN), (TRACE, "0" * 16), (TRACE.upper(), SPAN), (TRACE, "xyz")]:
        with pytest.raises(ValidationError) as info:
            TraceContext(trace_id, span_id)
        assert info.value.reason == "invalid_traceparent"


tracestate_text = st.text(
    alphabet=st.sampled_from(list("abcxyz019_-*/@=, \t") + ["=", ",", "\x00", "é", "A"]), max_size=700
)


@given(tracestate_text)
def test_tracestate_is_bounded_and_valid_whatever_comes_in(raw: str) -> None:
    state = bound_tracestate(raw)
    assert len(state) <= MAX_TRACESTATE_CHARS
    members = [m for m in state.split(",") if m] if state else []
    assert len(members) <= MAX_TRACESTATE_MEMBERS
    keys = [m.partition("=")[0] for m in members]
    assert len(keys) == len(set(keys))
    for member in members:
        key, sep, value = member.partition("=")
        assert sep and key and value and re.fullmatch(r"[a-z0-9_\-*/@]+", key) and not value.endswith(" ")
    assert bound_tracestate(state) == state  # what we keep is itself valid


def test_tracestate_drops_invalid_and_repeated_members_and_caps_count_and_length() -> None:
    assert bound_tracestate("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE") == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
    assert bound_tracestate("Bad=1,good=2,good=3,nokey,=v,k=v=w,t@vendor=x") == "good=2,t@vendor=x"
    many = ",".join(f"k{i}=v" for i in range(40))
    assert bound_tracestate(many).count(",") + 1 == MAX_TRACESTATE_MEMBERS
    long = ",".join(f"k{i}={'v' * 200}" for i in range(5))
    kept = bound_tracestate(long)
    assert len(kept) <= MAX_TRACESTATE_CHARS and kept.startswith("k0=") and kept.count(",") == 1
    assert bound_tracestate(None) == "" and bound_tracestate(12) == ""
    assert TraceContext(TRACE, SPAN, tracestate="Bad=1,ok=1").tracestate == "ok=1"


def test_new_trace_and_child_of_keep_the_trace_and_change_the_span() -> None:
    root = new_trace()
    assert re.fullmatch(r"[0-9a-f]{32}", root.trace_id) and root.sampled
    child = child_of(TraceContext(TRACE, SPAN, False, "a=1"))
    assert (child.trace_id, child.sampled, child.tracestate) == (TRACE, False, "a=1") and child.span_id != SPAN
    assert len({new_span_id() for _ in range(100)}) == 100
    assert pickle.loads(pickle.dumps(child)) == child


def test_from_headers_is_case_insensitive_and_lenient() -> None:
    ctx = from_headers({"TraceParent": VALID, "TRACESTATE": "a=1", "Accept": "x"})
    assert ctx is not None and (ctx.trace_id, ctx.span_id, ctx.tracestate) == (TRACE, SPAN, "a=1")
    assert from_headers({"traceparent": f" {VALID}\t"}) is not None  # HTTP optional whitespace
    assert from_headers({}) is None
    assert from_headers({"traceparent": "00-bad"}) is None
    assert from_headers({"traceparent": f"ff-{TRACE}-{SPAN}-01"}) is None
    assert from_headers({"traceparent": VALID, "TraceParent": VALID}) is None  # two values: ignore both


def test_inject_headers_sets_the_header_values_and_replaces_old_ones() -> None:
    ctx = TraceContext(TRACE, SPAN, True, "a=1")
    out = inject_headers(ctx, {"Traceparent": "old", "TraceState": "old", "x-api": "1"})
    assert out == {"x-api": "1", "traceparent": VALID, "tracestate": "a=1"}
    assert inject_headers(TraceContext(TRACE, SPAN), None) == {"traceparent": VALID}
    assert inject_headers(None, {"a": "b"}) == {"a": "b"}


def test_current_is_the_callers_active_opentelemetry_span() -> None:
    assert current() is None  # no span active
    tracer = TracerProvider().get_tracer("web-handler")
    with tracer.start_as_current_span("GET /ask") as span:
        ctx = current()
        otel = span.get_span_context()
        assert ctx is not None
        assert ctx.trace_id == format(otel.trace_id, "032x") and ctx.span_id == format(otel.span_id, "016x")
        assert ctx.sampled is True
    assert current() is None
    remote = SpanContext(int(TRACE, 16), int(SPAN, 16), True, TraceFlags(0), TraceState([("v", "1")]))
    with use_span(NonRecordingSpan(remote)):
        assert current() == TraceContext(TRACE, SPAN, False, "v=1")
