"""Parsing responses, grounding envelopes, stream assembly and the reference-shaped outputs (pure)."""

from __future__ import annotations

import pytest

from adk_actors.errors import ProviderError, ProviderHttpError, RateLimited
from adk_actors.models.gemini.http_errors import error_from_body, error_from_payload, parse_duration
from adk_actors.models.gemini.response import StreamAssembler, merge_grounding, parse_response
from adk_actors.models.results import ModelResponse, ProviderResult, as_response, plain_output

SIG = "c2lnbmF0dXJl"


def _resp(parts, **cand):
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", **cand}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5},
        "modelVersion": "gemini-3.1-flash-lite",
        "responseId": "r1",
    }


def test_plain_text_response():
    r = parse_response(_resp([{"text": "Hello", "thoughtSignature": SIG}]))
    assert r.text == "Hello" and r.finish_reason == "stop" and r.provider_metadata is None
    assert r.usage == {"prompt_token_count": 3, "candidates_token_count": 2, "total_token_count": 5}
    assert (r.model_version, r.response_id) == ("gemini-3.1-flash-lite", "r1")
    assert plain_output(r) == "Hello"


def test_thoughts_never_reach_visible_text_and_make_output_structured():
    r = parse_response(_resp([{"text": "pondering", "thought": True}, {"text": "Answer"}]))
    assert r.text == "Answer" and r.has_thoughts
    assert plain_output(r) == {
        "schema_version": 1,
        "parts": [{"type": "text", "text": "pondering", "thought": True}, {"type": "text", "text": "Answer"}],
    }


def test_function_calls_keep_ids_and_signatures():
    r = parse_response(
        _resp(
            [
                {"functionCall": {"id": "c1", "name": "f", "args": {"x": 1}}, "thoughtSignature": SIG},
                {"functionCall": {"name": "g"}},
            ]
        )
    )
    assert r.function_calls == (
        {"name": "f", "args": {"x": 1}, "id": "c1", "thought_signature": SIG},
        {"name": "g", "args": {}, "id": None, "thought_signature": None},
    )
    assert isinstance(plain_output(r), dict)


def test_grounded_candidate_becomes_a_provider_result_envelope():
    meta = {"webSearchQueries": ["q"], "groundingChunks": [{"web": {"uri": "https://x", "title": "x"}}]}
    r = parse_response(_resp([{"text": "A"}], groundingMetadata=meta))
    assert r.provider_metadata == {
        "schema_version": 1,
        "provider": "gemini",
        "type": "google_search_grounding",
        "metadata": meta,
    }
    assert plain_output(r) == ProviderResult(output="A", provider_metadata=r.provider_metadata)


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ("not a map", "invalid_provider_metadata"),
        ({"x": float("nan")}, "invalid_provider_metadata"),
        ({"searchEntryPoint": {"renderedContent": "x" * (256 * 1024)}}, "provider_metadata_too_large"),
    ],
)
def test_bad_grounding_fails_explicitly(meta, reason):
    with pytest.raises(ProviderError) as info:
        parse_response(_resp([{"text": "A"}], groundingMetadata=meta))
    assert info.value.reason == reason


def test_grounding_lists_accumulate_in_arrival_order():
    acc = merge_grounding(None, {"webSearchQueries": ["a"], "searchEntryPoint": {"renderedContent": "1"}})
    acc = merge_grounding(
        acc,
        {
            "webSearchQueries": ["b"],
            "groundingChunks": [{"web": {"uri": "u"}}],
            "searchEntryPoint": {"renderedContent": "2"},
        },
    )
    assert acc == {
        "webSearchQueries": ["a", "b"],
        "groundingChunks": [{"web": {"uri": "u"}}],
        "searchEntryPoint": {"renderedContent": "2"},
    }


def test_prompt_blocked_and_empty_responses():
    with pytest.raises(ProviderError) as info:
        parse_response({"promptFeedback": {"blockReason": "SAFETY"}})
    assert (info.value.reason, info.value.details) == ("prompt_blocked", {"block_reason": "safety"})
    with pytest.raises(ProviderError) as info:
        parse_response({"candidates": []})
    assert info.value.reason == "empty_response"


def test_stream_assembler_frames_and_final():
    asm = StreamAssembler()
    f0 = asm.feed(
        {
            "candidates": [{"content": {"parts": [{"text": "hm", "thought": True}]}}],
            "usageMetadata": {"promptTokenCount": 1},
        }
    )
    f1 = asm.feed(
        {"candidates": [{"content": {"parts": [{"text": "Hel"}]}, "groundingMetadata": {"webSearchQueries": ["a"]}}]}
    )
    f2 = asm.feed(
        {
            "candidates": [
                {
                    "content": {"parts": [{"text": "lo"}, {"text": "", "thoughtSignature": SIG}]},
                    "finishReason": "STOP",
                    "groundingMetadata": {"webSearchQueries": ["b"]},
                }
            ],
            "usageMetadata": {"promptTokenCount": 1, "totalTokenCount": 9},
        }
    )
    assert (f0.text, f1.text, f2.text) == ("", "Hel", "lo")
    assert f0.provider_metadata is None
    assert f1.provider_metadata["metadata"] == {"webSearchQueries": ["a"]}
    assert f2.provider_metadata["metadata"] == {"webSearchQueries": ["a", "b"]}
    final = asm.result()
    assert final.text == "Hello" and final.finish_reason == "stop"
    assert final.content["parts"] == [
        {"type": "text", "text": "hm", "thought": True},
        {"type": "text", "text": "Hello"},
        {"type": "text", "text": "", "thought_signature": SIG},
    ]
    assert final.usage == {"prompt_token_count": 1, "total_token_count": 9}
    assert final.provider_metadata == f2.provider_metadata


def test_as_response_accepts_every_output_form():
    assert as_response("hi").text == "hi"
    r = ModelResponse(content={"schema_version": 1, "parts": []})
    assert as_response(r) is r
    grounded = as_response(ProviderResult(output="x", provider_metadata={"schema_version": 1}))
    assert grounded.provider_metadata == {"schema_version": 1} and grounded.text == "x"
    with pytest.raises(ProviderError) as info:
        as_response(42)
    assert (info.value.reason, info.value.details) == ("invalid_provider_result", {"type": "int"})


def test_durations():
    assert parse_duration("26s") == 26.0 and parse_duration("57.238747106s") == pytest.approx(57.238747106)
    assert parse_duration("soon") is None and parse_duration(3) is None


def test_error_bodies_map_to_typed_errors_without_secrets():
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "quota for key AIzaSECRETKEY",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"},
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "PerMinute"}]},
            ],
        }
    }
    err = error_from_payload(429, [body], ("AIzaSECRETKEY",))
    assert isinstance(err, RateLimited)
    assert err.details == {
        "status": 429,
        "google_status": "RESOURCE_EXHAUSTED",
        "message": "quota for key [REDACTED]",
        "retry_delay_s": 1.5,
        "quota_ids": ["PerMinute"],
    }
    assert "AIzaSECRETKEY" not in repr(err) + str(err)
    bad_key = error_from_body(
        400,
        b'{"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "API key not '
        b'valid.", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", '
        b'"reason": "API_KEY_INVALID"}]}}',
    )
    assert bad_key.reason == "invalid_api_key" and type(bad_key) is ProviderHttpError
    assert error_from_body(502, b"<html>").details == {"status": 502}
    assert error_from_payload(200, {"error": {"code": 503}}, midstream=True).details == {
        "status": 503,
        "midstream": True,
    }


def _meta_of_size(size: int) -> dict:
    import json

    meta = {"searchEntryPoint": {"renderedContent": ""}}
    base = len(json.dumps(meta, separators=(",", ":")).encode())
    meta["searchEntryPoint"]["renderedContent"] = "é" * ((size - base) // 2) + "x" * ((size - base) % 2)
    assert len(json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode()) == size
    return meta


def test_grounding_cap_is_256_kib_inclusive():
    at_limit, over = _meta_of_size(256 * 1024), _meta_of_size(256 * 1024 + 1)
    assert parse_response(_resp([{"text": "A"}], groundingMetadata=at_limit)).provider_metadata["metadata"] == at_limit
    assert merge_grounding(None, at_limit) == at_limit
    for call in (
        lambda: parse_response(_resp([{"text": "A"}], groundingMetadata=over)),
        lambda: merge_grounding(None, over),
    ):
        with pytest.raises(ProviderError) as info:
            call()
        assert info.value.reason == "provider_metadata_too_large"
        assert info.value.details == {"bytes": 256 * 1024 + 1, "limit": 256 * 1024}
    # accumulation: two halves, each well under the cap, cross it only together
    half = {"webSearchQueries": ["a" * (128 * 1024)]}
    with pytest.raises(ProviderError) as info:
        merge_grounding(merge_grounding(None, half), half)
    assert info.value.reason == "provider_metadata_too_large"
