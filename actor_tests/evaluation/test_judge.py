"""The rubric LLM judge against the real emulator over HTTP: structured JSON verdicts, strict parsing with bounded
retries, provider faults, and no credential or raw provider message in any score."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from adk_actors.emulator import Emulator
from adk_actors.errors import ValidationError
from adk_actors.evaluation.criteria import check_metric_config, score_sample
from adk_actors.evaluation.judge import VERDICT_SCHEMA, judge_config, parse_verdict
from adk_actors.evaluation.model import EvalCase, EvalTurn, MetricSpec, SampleTrace, Score, ToolUse, TurnTrace
from adk_actors.models.gemini import close_sessions

API_KEY = "test-key-judge-0123456789"
GOOD = {"score": 0.9, "rationale": "Correct and direct."}

CASE = EvalCase(
    id="weather",
    turns=(
        EvalTurn(
            id="ask",
            input="Weather in Tokyo?",
            expected_response="Sunny in Tokyo.",
            expected_tool_uses=(ToolUse("get_weather", {"city": "Tokyo"}),),
        ),
        EvalTurn(id="thanks", input={"schema_version": 1, "parts": [{"type": "text", "text": "Thanks!"}]}),
    ),
)
TRACE = SampleTrace(
    case_id="weather",
    sample=0,
    turns=(
        TurnTrace("ask", "It is sunny in Tokyo.", tool_uses=(ToolUse("get_weather", {"city": "Tokyo"}),)),
        TurnTrace("thanks", "You're welcome."),
    ),
)


@pytest.fixture
def emu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulator]:
    """An emulator with no rules (tests script it) and the judge's key in the environment, as in production."""
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    with Emulator(script={"rules": []}, latency_ms=0) as server:
        yield server
    close_sessions()


def _judge_spec(emu: Emulator | None, threshold: float = 0.8, **config: Any) -> MetricSpec:
    model_config = {"provider": "gemini", "model": "gemini-3.1-flash-lite"}
    if emu is not None:
        model_config["base_url"] = emu.base_url
    base = {"rubric_id": "concise-correct", "rubric_version": "2", "rubric": "Score 1 for a correct, direct answer."}
    return MetricSpec(
        id="rubric", criterion="llm_judge", threshold=threshold, config={**base, "model_config": model_config, **config}
    )


def _judge(spec: MetricSpec, judge: Any = None) -> Score:
    check_metric_config(spec)
    (score,) = score_sample(CASE, TRACE, [spec], judge=judge)
    assert API_KEY not in json.dumps(score.to_dict())
    return score


def _calls(emu: Emulator) -> list[dict[str, Any]]:
    return [r for r in emu.requests if r["path"].endswith(":generateContent")]


def test_a_valid_verdict_passes_with_its_rubric_and_model_recorded(emu):
    emu.set_script({"rules": [{"when": {"json_mode": True}, "respond": {"json": GOOD}}]})
    score = _judge(_judge_spec(emu))
    assert (score.status, score.score, score.reason) == ("passed", 0.9, None)
    assert score.details == {
        "judge_schema": 1,
        "rubric_id": "concise-correct",
        "rubric_version": "2",
        "model": "gemini-3.1-flash-lite",
        "rationale": "Correct and direct.",
        "attempts": 1,
    }
    assert _judge(_judge_spec(emu, threshold=0.95)).status == "failed"


def test_the_request_is_structured_json_with_the_case_in_the_prompt(emu):
    emu.set_script({"rules": [{"when": {"json_mode": True}, "respond": {"json": GOOD}}]})
    _judge(_judge_spec(emu))
    (request,) = _calls(emu)
    body = request["body"]
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert body["generationConfig"]["responseSchema"]["required"] == ["score", "rationale"]
    assert "evaluation judge" in body["systemInstruction"]["parts"][0]["text"]
    (content,) = body["contents"]
    prompt = content["parts"][0]["text"]
    assert prompt.startswith("Rubric concise-correct (version 2):\nScore 1 for a correct, direct answer.")
    turns = json.loads(prompt.split("as JSON:\n", 1)[1])["turns"]
    assert turns[0] == {
        "id": "ask",
        "user": "Weather in Tokyo?",
        "expected_response": "Sunny in Tokyo.",
        "expected_tool_calls": ["get_weather"],
        "agent_response": "It is sunny in Tokyo.",
        "agent_tool_calls": ["get_weather"],
    }
    assert turns[1]["user"] == "Thanks!" and "expected_response" not in turns[1]
    assert request["headers"]["x-goog-api-key"] and API_KEY not in json.dumps(body)


@pytest.mark.parametrize(
    ("bad", "tag"),
    [
        ({"text": "Sure! The score is 0.9"}, "malformed_json"),
        ({"text": "[0.9]"}, "malformed_json"),
        ({"json": {"score": 0.5}}, "missing_field"),
        ({"json": {"score": 0.5, "rationale": "r", "confidence": 1}}, "unexpected_field"),
        ({"json": {"score": "high", "rationale": "r"}}, "invalid_type"),
        ({"json": {"score": 1.5, "rationale": "r"}}, "score_out_of_range"),
        ({"json": {"score": -0.1, "rationale": "r"}}, "score_out_of_range"),
    ],
)
def test_a_malformed_verdict_is_retried_then_an_error_never_a_pass(emu, bad, tag):
    emu.set_script({"rules": [{"when": {}, "respond": bad}]})
    score = _judge(_judge_spec(emu, threshold=0.0, max_retries=2))
    assert (score.status, score.reason, score.score) == ("error", "judge_failed", None)
    assert score.details == {"type": tag, "attempts": 3}
    assert len(_calls(emu)) == 3


def test_a_malformed_then_valid_verdict_passes_on_retry(emu):
    emu.set_script(
        {
            "rules": [
                {"when": {}, "respond": {"text": "not json"}, "times": 1},
                {"when": {}, "respond": {"json": {"score": 1.5, "rationale": "r"}}, "times": 1},
                {"when": {}, "respond": {"json": GOOD}},
            ]
        }
    )
    score = _judge(_judge_spec(emu, max_retries=2))
    assert (score.status, score.details["attempts"]) == ("passed", 3)
    assert len(_calls(emu)) == 3


def test_no_retry_means_one_attempt(emu):
    emu.set_script({"rules": [{"when": {}, "respond": {"text": "nope"}}]})
    score = _judge(_judge_spec(emu, max_retries=0))
    assert score.details == {"type": "malformed_json", "attempts": 1} and len(_calls(emu)) == 1


def test_a_provider_fault_is_retried_and_then_an_error_without_its_message(emu):
    emu.set_script({"rules": [{"when": {}, "respond": {"fault": {"status": 503, "message": f"overloaded {API_KEY}"}}}]})
    score = _judge(_judge_spec(emu, max_retries=1))
    assert (score.status, score.reason, score.details) == (
        "error",
        "judge_failed",
        {"type": "unavailable", "attempts": 2},
    )
    emu.set_script(
        {"rules": [{"when": {}, "respond": {"fault": {"status": 500}}, "times": 1}, {"respond": {"json": GOOD}}]}
    )
    assert _judge(_judge_spec(emu, max_retries=1)).status == "passed"


def test_a_slow_judge_times_out_per_attempt(emu):
    emu.set_script({"rules": [{"when": {}, "respond": {"json": GOOD, "delay_ms": 2000}}]})
    score = _judge(_judge_spec(emu, timeout_ms=150, max_retries=0))
    assert (score.status, score.details) == ("error", {"type": "timeout", "attempts": 1})


def test_a_missing_api_key_fails_at_once_without_http(emu, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY")
    score = _judge(_judge_spec(emu, max_retries=3))
    assert score.details == {"type": "missing_api_key", "attempts": 1} and _calls(emu) == []


def test_the_rationale_is_bounded_and_scrubbed_of_configured_secrets(emu):
    rationale = f"The key {API_KEY} was seen. " + "x" * 5000
    emu.set_script({"rules": [{"when": {}, "respond": {"json": {"score": 1, "rationale": rationale}}}]})
    score = _judge(_judge_spec(emu, max_rationale_chars=40))
    assert score.details["rationale"] == "The key [REDACTED] was seen. xxxxxxxxxxx"


def test_an_injected_judge_gets_the_request_and_is_parsed_as_strictly():
    requests: list[dict[str, Any]] = []
    answers = iter(['{"score": 0.2', {"score": 0.7, "rationale": "ok"}])

    def judge(request: dict[str, Any]) -> Any:
        requests.append(request)
        return next(answers)

    score = _judge(_judge_spec(None, threshold=0.5, max_retries=1), judge=judge)
    assert (score.status, score.score, score.details["attempts"]) == ("passed", 0.7, 2)
    first = requests[0]
    assert (first["judge_schema"], first["metric_id"], first["attempt"]) == (1, "rubric", 1)
    assert first["response_schema"] == VERDICT_SCHEMA and first["timeout_ms"] == 30000
    assert "Weather in Tokyo?" in first["prompt"] and requests[1]["attempt"] == 2

    def broken(request: dict[str, Any]) -> Any:
        raise KeyError("secret-looking message")

    failed = _judge(_judge_spec(None, max_retries=0), judge=broken)
    assert failed.details == {"type": "KeyError", "attempts": 1}


def test_a_failed_turn_and_a_failed_sample_reach_the_judge_structurally():
    seen: list[str] = []

    def judge(request: dict[str, Any]) -> Any:
        seen.append(request["prompt"])
        return GOOD

    trace = SampleTrace(
        case_id="weather", sample=1, turns=(TurnTrace("ask", error={"reason": "provider_error", "type": "X"}),)
    )
    score_sample(CASE, trace, [_judge_spec(None)], judge=judge)
    turns = json.loads(seen[0].split("as JSON:\n", 1)[1])["turns"]
    assert turns[0]["agent_error"] == "provider_error" and turns[1]["agent_error"] == "the turn did not run"
    failed = SampleTrace(case_id="weather", sample=2, error={"reason": "timeout", "type": "AskTimeout"})
    (score,) = score_sample(CASE, failed, [_judge_spec(None)], judge=judge)
    assert (score.status, score.reason, len(seen)) == ("not_evaluated", "sample_failed", 1)


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"rubric": ""}, "$.config.rubric"),
        ({"rubric_id": None}, "$.config.rubric_id"),
        ({"rubric_version": "a\nb"}, "$.config.rubric_version"),
        ({"max_retries": 6}, "$.config.max_retries"),
        ({"max_retries": True}, "$.config.max_retries"),
        ({"timeout_ms": 0}, "$.config.timeout_ms"),
        ({"max_rationale_chars": -1}, "$.config.max_rationale_chars"),
        ({"surprise": 1}, "$.config.surprise"),
        ({"model_config": {"api_key": API_KEY}}, "$.config.model_config.api_key"),
        ({"model_config": {"instructions": "be nice"}}, "$.config.model_config.instructions"),
        (
            {"model_config": {"generation_config": {"response_schema": {}}}},
            "$.config.model_config.generation_config.response_schema",
        ),
        ({"model_config": {"provider": "no_such_provider"}}, "$.config.model_config"),
        ({"model_config": {"base_url": "http://example.com"}}, "$.config.model_config.base_url"),
        ({"model_config": {"temperature": 0}}, "$.config.model_config.temperature"),
        ({"model_config": "gemini"}, "$.config.model_config"),
    ],
)
def test_bad_judge_configs_are_invalid_metric_without_the_key(change, path):
    spec = _judge_spec(None)
    spec = MetricSpec(id=spec.id, criterion="llm_judge", config={**spec.config, **change})
    with pytest.raises(ValidationError) as info:
        check_metric_config(spec)
    assert info.value.reason == "invalid_metric" and info.value.details["path"] == path
    assert API_KEY not in json.dumps(info.value.details) and API_KEY not in str(info.value)


def test_judge_config_defaults():
    cfg = judge_config({"rubric_id": "r", "rubric_version": 3, "rubric": "Be right."})
    assert (cfg.rubric_version, cfg.timeout_ms, cfg.max_retries, cfg.max_rationale_chars) == ("3", 30000, 2, 1000)
    assert cfg.model_config == {"provider": "gemini"} and cfg.model == "gemini-3.1-flash-lite"


@pytest.mark.parametrize(
    ("answer", "tag"),
    [
        ("x" * 70_000, "answer_too_large"),
        ('{"score": NaN, "rationale": "r"}', "malformed_json"),
        ('{"score": 1e999, "rationale": "r"}', "score_out_of_range"),
        ('{"score": true, "rationale": "r"}', "invalid_type"),
        ('{"score": 1, "rationale": 5}', "invalid_type"),
        ("[" * 100_00 + "]" * 100_00, "malformed_json"),
        (None, "malformed_json"),
    ],
)
def test_parse_verdict_is_strict(answer, tag):
    from adk_actors.evaluation.judge import VerdictError

    with pytest.raises(VerdictError) as info:
        parse_verdict(answer)
    assert info.value.tag == tag
    assert parse_verdict('{"rationale": "fine", "score": 1}') == (1.0, "fine")
