"""Hypothesis fuzzing: content validation raises only ContentError, never another exception, never hangs."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors import content as c
from adk_actors.content import Content
from adk_actors.errors import ContentError

# Lone surrogates (never drawn by the default text strategy) and integers beyond the float range / the
# interpreter's int-to-str limit are drawn explicitly.
any_text = st.text(alphabet=st.characters(blacklist_categories=()), max_size=20) | st.sampled_from(
    ["\ud800", "x\udfff", "\udc00y", "\ud83d"]
)
huge_ints = st.builds(lambda e, sign: sign * 10**e, st.sampled_from([309, 400, 4299, 5000]), st.sampled_from([1, -1]))
json_scalars = st.none() | st.booleans() | st.integers() | huge_ints | st.floats() | st.text(max_size=20) | any_text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8) | any_text, inner, max_size=4),
    max_leaves=20,
)
anything = st.recursive(
    json_scalars | st.binary(max_size=8) | st.characters(),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner) | st.dictionaries(json_scalars, inner, max_size=4),
    max_leaves=20,
)
part_types = st.sampled_from(["text", "inline_data", "file_data", "function_call", "function_response", "x"])
field_values = st.one_of(
    st.text(max_size=30),
    any_text,
    st.sampled_from(["image/png", "https://example.com/a", "gs://bucket/o", "QUJD", "f"]),
    json_values,
    anything,
)
parts = st.builds(
    lambda tag, fields: {"type": tag, **fields},
    part_types,
    st.dictionaries(
        st.sampled_from(
            [
                "text",
                "thought",
                "thought_signature",
                "mime_type",
                "data",
                "uri",
                "name",
                "args",
                "response",
                "id",
                "extra",
            ]
        ),
        field_values,
        max_size=5,
    ),
)
wire = st.fixed_dictionaries(
    {"schema_version": st.sampled_from([1, 1, 1, 2, True, "1"]), "parts": st.lists(parts, max_size=5)}
)


@settings(max_examples=400, deadline=None)
@given(wire | anything)
def test_validate_raises_only_content_errors(value: Any) -> None:
    try:
        result = c.validate(value)
    except ContentError:
        return
    assert Content.from_dict(result.to_dict()) == result


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60) | any_text)
def test_uri_checks_raise_only_content_errors(uri: str) -> None:
    for candidate in (uri, "https://" + uri, "gs://" + uri):
        try:
            c.check_uri(candidate)
        except ContentError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ABCabc019+/-_=", max_size=24))
def test_base64_decoding_raises_only_content_errors(encoded: str) -> None:
    try:
        canonical, size = c.canonical_base64(encoded)
    except ContentError:
        return
    assert c.canonical_base64(canonical) == (canonical, size)
