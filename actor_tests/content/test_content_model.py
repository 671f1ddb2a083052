"""Content model: constructors, wire round-trip, limits at their edges, URI/MIME/base64 rules, pickling."""

from __future__ import annotations

import base64
import pickle

import pytest

from adk_actors import content as c
from adk_actors.content import (
    CEILINGS,
    Content,
    ContentLimits,
    FileDataPart,
    FunctionCallPart,
    FunctionResponsePart,
    InlineDataPart,
    TextPart,
)
from adk_actors.errors import ContentError

MiB = 1024 * 1024
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNk+A8AAQUBAScY42YAAAAASUVORK5CYII=")


def sample() -> Content:
    return c.new(
        [
            c.text("Describe this image briefly."),
            c.text("thinking", thought=True, thought_signature="c2ln"),
            c.inline_data("image/png", PNG),
            c.file_data("application/pdf", "gs://bucket-name/doc.pdf"),
            c.function_call("get_weather", {"city": "Oslo"}, id="call-1", thought_signature="c2ln"),
            c.function_response("get_weather", {"forecast": "sunny"}, id="call-1"),
        ]
    )


def test_round_trip_through_wire_form_is_exact() -> None:
    value = sample()
    wire = value.to_dict()
    assert wire["schema_version"] == 1
    assert Content.from_dict(wire) == value
    assert c.validate(wire) == value
    assert Content.from_dict(wire).to_dict() == wire


def test_wire_form_matches_contract_and_omits_absent_optionals() -> None:
    wire = c.new([c.text("a"), c.function_call("f"), c.function_response("f", {})]).to_dict()
    assert wire == {
        "schema_version": 1,
        "parts": [
            {"type": "text", "text": "a"},
            {"type": "function_call", "name": "f", "args": {}},
            {"type": "function_response", "name": "f", "response": {}},
        ],
    }
    thought = c.text("t", thought=True, thought_signature="c2ln").to_dict()
    assert thought == {"type": "text", "text": "t", "thought": True, "thought_signature": "c2ln"}


def test_inline_bytes_become_canonical_base64() -> None:
    part = c.inline_data("image/png", PNG)
    assert part.data == base64.b64encode(PNG).decode()
    assert part.raw == PNG
    assert part.size == len(PNG)


@pytest.mark.parametrize("encoded", ["-_8=", "-_8", "+/8=", "+/8"])
def test_base64_input_may_be_urlsafe_or_unpadded(encoded: str) -> None:
    part = c.part_from_dict({"type": "inline_data", "mime_type": "application/octet-stream", "data": encoded})
    assert isinstance(part, InlineDataPart)
    assert part.data == "+/8="
    assert part.raw == b"\xfb\xff"


@pytest.mark.parametrize("encoded", ["a", "ab=", "a===", "ab c", "ab\n", "=ab", "ab=c"])
def test_malformed_base64_is_rejected(encoded: str) -> None:
    with pytest.raises(ContentError) as info:
        c.part_from_dict({"type": "inline_data", "mime_type": "image/png", "data": encoded})
    assert info.value.reason == "invalid_base64"


def test_text_only_and_visible_text() -> None:
    only_text = c.new([c.text("Hel"), c.text("hidden", thought=True), c.text("lo")])
    assert only_text.text_only() == "Hello"
    assert only_text.visible_text() == "Hello"
    assert sample().text_only() is None
    assert only_text.simplified() == "Hello"
    assert sample().simplified() is not None and sample().simplified() == sample()
    assert sample().visible_text() == "Describe this image briefly."
    assert c.as_content("hi") == Content(parts=(TextPart(text="hi"),))


def test_as_content_accepts_each_shape() -> None:
    part = c.text("x")
    expected = Content(parts=(part,))
    assert c.as_content(part) == expected
    assert c.as_content([part]) == expected
    assert c.as_content(expected) is expected
    assert c.as_content(expected.to_dict()) == expected
    with pytest.raises(ContentError):
        c.as_content(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("mime", ["image/png", "application/vnd.api+json", "text/plain", "audio/l16"])
def test_lowercase_mime_types_are_accepted(mime: str) -> None:
    assert c.file_data(mime, "https://example.com/x").mime_type == mime


@pytest.mark.parametrize(
    "mime",
    [
        "Image/png",
        "image/PNG",
        "image",
        "image/png; charset=x",
        "text/plain;a=b",
        "/png",
        "image/",
        "",
        "image/png ",
        " image/png",
    ],
)
def test_mime_types_must_be_lowercase_type_subtype(mime: str) -> None:
    with pytest.raises(ContentError) as info:
        c.inline_data(mime, b"x")
    assert info.value.reason == "invalid_mime_type"


@pytest.mark.parametrize(
    "uri",
    [
        "https://example.com/a.pdf",
        "https://example.com:8443/a?b=c",
        "gs://my-bucket/path/to/object.pdf",
        "https://EXAMPLE.com/x",
    ],
)
def test_permitted_uris(uri: str) -> None:
    assert c.file_data("application/pdf", uri).uri == uri


@pytest.mark.parametrize(
    ("uri", "rule"),
    [
        ("relative/path.pdf", "scheme"),
        ("/abs/path.pdf", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("http://example.com/a", "scheme"),
        ("data:text/plain;base64,aGk=", "scheme"),
        ("ftp://example.com/a", "scheme"),
        ("HTTPS://example.com/a", "scheme"),
        ("https://user:pw@example.com/a", "credentials"),
        ("https://user@example.com/a", "credentials"),
        ("https://example.com/a#frag", "fragment"),
        ("https://example.com/a b", "characters"),
        ("https://exämple.com/a", "characters"),
        ("https:///nohost", "authority"),
        ("https://", "authority"),
        ("gs://", "authority"),
        ("https://exa_mple.com/", "authority"),
    ],
)
def test_forbidden_uris(uri: str, rule: str) -> None:
    with pytest.raises(ContentError) as info:
        c.file_data("application/pdf", uri)
    assert info.value.reason == "invalid_uri"
    assert info.value.details["rule"] == rule
    assert uri not in str(info.value) and uri not in repr(info.value.details)


def _limit(exc: pytest.ExceptionInfo[ContentError]) -> str:
    assert exc.value.reason == "limit_exceeded"
    return str(exc.value.details["limit"])


def test_text_part_limit_edge() -> None:
    c.text("a" * MiB)
    with pytest.raises(ContentError) as info:
        c.text("a" * (MiB + 1))
    assert _limit(info) == "max_text_part_bytes"


def test_text_limit_counts_utf8_bytes() -> None:
    limits = ContentLimits(max_text_part_bytes=4)
    c.text("éé", limits=limits)
    with pytest.raises(ContentError):
        c.text("ééa", limits=limits)


def test_inline_part_limit_edge() -> None:
    c.inline_data("application/octet-stream", b"\0" * (10 * MiB))
    with pytest.raises(ContentError) as info:
        c.inline_data("application/octet-stream", b"\0" * (10 * MiB + 1))
    assert _limit(info) == "max_inline_part_bytes"
    encoded = base64.b64encode(b"\0" * (10 * MiB + 1)).decode()
    with pytest.raises(ContentError) as info:
        c.part_from_dict({"type": "inline_data", "mime_type": "image/png", "data": encoded})
    assert _limit(info) == "max_inline_part_bytes"


def test_inline_total_limit_edge() -> None:
    five = c.inline_data("application/octet-stream", b"\0" * (5 * MiB))
    c.new([five, five, five])
    one = c.inline_data("application/octet-stream", b"\0")
    with pytest.raises(ContentError) as info:
        c.new([five, five, five, one])
    assert _limit(info) == "max_inline_total_bytes"


def test_part_count_limit_edge() -> None:
    c.new([c.text("x")] * 64)
    with pytest.raises(ContentError) as info:
        c.new([c.text("x")] * 65)
    assert _limit(info) == "max_parts"
    with pytest.raises(ContentError) as info:
        Content.from_dict({"schema_version": 1, "parts": [{"type": "text", "text": "x"}] * 65})
    assert _limit(info) == "max_parts"


def test_uri_limit_edge() -> None:
    prefix = "https://example.com/"
    c.file_data("text/plain", prefix + "a" * (4096 - len(prefix)))
    with pytest.raises(ContentError) as info:
        c.file_data("text/plain", prefix + "a" * (4097 - len(prefix)))
    assert _limit(info) == "max_uri_bytes"


def _payload_of_size(size: int) -> dict[str, str]:
    overhead = len('{"k":""}')
    return {"k": "a" * (size - overhead)}


@pytest.mark.parametrize(
    "build",
    [
        lambda payload: c.function_call("f", payload),
        lambda payload: c.function_response("f", payload),
    ],
)
def test_function_payload_limit_edge(build: object) -> None:
    build(_payload_of_size(MiB))  # type: ignore[operator]
    with pytest.raises(ContentError) as info:
        build(_payload_of_size(MiB + 1))  # type: ignore[operator]
    assert _limit(info) == "max_function_payload_bytes"


def test_lowered_limits_apply_at_their_edge() -> None:
    limits = ContentLimits().lowered(
        max_parts=2,
        max_text_part_bytes=3,
        max_inline_part_bytes=2,
        max_inline_total_bytes=3,
        max_uri_bytes=25,
        max_function_payload_bytes=9,
    )
    c.new([c.text("x"), c.text("y")], limits=limits)
    with pytest.raises(ContentError):
        c.new([c.text("x")] * 3, limits=limits)
    c.text("abc", limits=limits)
    with pytest.raises(ContentError):
        c.text("abcd", limits=limits)
    two = c.inline_data("image/png", b"ab", limits=limits)
    with pytest.raises(ContentError):
        c.inline_data("image/png", b"abc", limits=limits)
    with pytest.raises(ContentError):
        c.new([two, two], limits=limits)
    c.file_data("text/plain", "https://example.com/abcde", limits=limits)
    with pytest.raises(ContentError):
        c.file_data("text/plain", "https://example.com/abcdef", limits=limits)
    c.function_call("f", {"k": "a"}, limits=limits)
    with pytest.raises(ContentError):
        c.function_call("f", {"k": "ab"}, limits=limits)
    wire = c.new([c.text("abcd")]).to_dict()
    with pytest.raises(ContentError):
        c.validate(wire, limits=limits)


@pytest.mark.parametrize("name", sorted(CEILINGS))
def test_limits_may_not_be_raised_past_ceilings(name: str) -> None:
    assert ContentLimits(**{name: CEILINGS[name]}).to_dict()[name] == CEILINGS[name]
    with pytest.raises(ContentError) as info:
        ContentLimits(**{name: CEILINGS[name] + 1})
    assert info.value.reason == "limit_above_ceiling"
    for bad in (0, -1, True, 1.5, "3"):
        with pytest.raises(ContentError) as info:
            ContentLimits(**{name: bad})  # type: ignore[arg-type]
        assert info.value.reason == "invalid_limit"


def test_limits_from_dict_rejects_unknown_names() -> None:
    assert ContentLimits.from_dict({"max_parts": 3}).max_parts == 3
    with pytest.raises(ContentError):
        ContentLimits.from_dict({"max_partz": 3})


@pytest.mark.parametrize(
    "wire",
    [
        [],
        3,
        {"parts": []},
        {"schema_version": 2, "parts": []},
        {"schema_version": True, "parts": []},
        {"schema_version": 1, "parts": {}},
        {"schema_version": 1, "parts": [], "role": "user"},
        {"schema_version": 1, "parts": [{"type": "video", "text": "x"}]},
        {"schema_version": 1, "parts": [{"type": "text"}]},
        {"schema_version": 1, "parts": [{"type": "text", "text": 3}]},
        {"schema_version": 1, "parts": [{"type": "text", "text": "x", "extra": 1}]},
        {"schema_version": 1, "parts": [{"type": "text", "text": "x", "thought": "yes"}]},
        {"schema_version": 1, "parts": [{"type": "text", "text": "x\ud800"}]},
        {"schema_version": 1, "parts": [{"type": "function_call", "name": "1bad", "args": {}}]},
        {"schema_version": 1, "parts": [{"type": "function_call", "name": "f", "args": []}]},
        {"schema_version": 1, "parts": [{"type": "function_call", "name": "f", "args": {"x": float("nan")}}]},
        {"schema_version": 1, "parts": [{"type": "function_call", "name": "f", "args": {"x": "a\x00"}}]},
        {"schema_version": 1, "parts": [{"type": "function_call", "name": "f", "args": {}, "id": ""}]},
        {"schema_version": 1, "parts": [{"type": "function_response", "name": "f", "response": {1: 2}}]},
        {"schema_version": 1, "parts": [{"type": "inline_data", "mime_type": "image/png", "data": b"x"}]},
    ],
)
def test_malformed_wire_content_is_rejected(wire: object) -> None:
    with pytest.raises(ContentError):
        c.validate(wire)


def test_deeply_nested_args_are_rejected_without_recursion_error() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(5000):
        child: dict[str, object] = {}
        node["a"] = child
        node = child
    with pytest.raises(ContentError) as info:
        c.function_call("f", deep)
    assert info.value.reason == "limit_exceeded"


def test_parts_hold_private_copies_of_payloads() -> None:
    args = {"a": [1]}
    part = c.function_call("f", args)
    args["a"].append(2)
    assert part.args == {"a": [1]}
    part.to_dict()["args"]["a"].append(3)
    assert part.args == {"a": [1]}


def test_error_details_never_echo_values() -> None:
    secret = "sk-super-secret-value"
    for attempt in (
        lambda: c.text(secret * 100_000),
        lambda: c.file_data("text/plain", f"https://{secret}@example.com/"),
        lambda: c.function_call("f", {"k": float("inf"), "v": secret}),
        lambda: c.part_from_dict({"type": "inline_data", "mime_type": "image/png", "data": secret + "!"}),
        lambda: c.inline_data(secret, b"x"),
    ):
        with pytest.raises(ContentError) as info:
            attempt()
        assert secret not in str(info.value) and secret not in repr(info.value.details)


@pytest.mark.parametrize(
    "value",
    [
        sample(),
        TextPart(text="x", thought=True),
        InlineDataPart(mime_type="image/png", data="AAAA"),
        FileDataPart(mime_type="text/plain", uri="https://example.com/a"),
        FunctionCallPart(name="f", args={"a": 1}, id="1"),
        FunctionResponsePart(name="f", response={"r": None}),
        ContentLimits(max_parts=3),
    ],
)
def test_values_pickle(value: object) -> None:
    assert pickle.loads(pickle.dumps(value)) == value
