"""The strict incremental SSE decoder."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors.errors import StreamError
from adk_actors.models.gemini.sse import SseDecoder


def _decode(chunks: list[bytes]) -> tuple[list[str], bool]:
    decoder = SseDecoder()
    events = [e for c in chunks for e in decoder.feed(c)]
    events += decoder.close()
    return events, decoder.pending


def test_crlf_lf_and_cr_terminators_and_multiline_data():
    body = b'data: {"a":1}\r\n\r\ndata:{"b":2}\n\ndata: x\rdata: y\r\r: comment\n\n'
    assert _decode([body]) == (['{"a":1}', '{"b":2}', "x\ny"], False)


def test_unicode_line_separators_inside_json_do_not_split():
    body = 'data: {"t":"a\u2028b\u0085c"}\r\n\r\n'.encode()
    assert _decode([body])[0] == ['{"t":"a\u2028b\u0085c"}']


@given(st.lists(st.integers(min_value=0, max_value=200), max_size=10))
def test_any_chunking_gives_the_same_events(cuts):
    body = b'data: {"a":"\xc3\xa9"}\r\n\r\ndata: {"b":2}\r\n\r\ndata: {"c":3}\r\n\r\n'
    points = sorted({min(c, len(body)) for c in cuts})
    chunks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)])]
    assert _decode(chunks) == (['{"a":"é"}', '{"b":2}', '{"c":3}'], False)


def test_an_unterminated_event_is_pending():
    events, pending = _decode([b'data: {"a":1}\r\n\r\ndata: {"b"'])
    assert events == ['{"a":1}'] and pending


def test_a_non_sse_line_is_malformed():
    with pytest.raises(StreamError) as info:
        _decode([b"<html>oops</html>\n\n"])
    assert info.value.reason == "malformed_sse"


def test_invalid_utf8_is_malformed():
    with pytest.raises(StreamError) as info:
        _decode([b"data: \xff\xfe\n\n"])
    assert info.value.reason == "malformed_sse"
