"""``evaluation.runner``: options, the schedule's bounds, and whole evaluations against the emulator (accounting,
turn order, sample isolation, timeouts, cancellation, cleanup, a 1,000-case run in bounded memory)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import types
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actor_tests.agents.conftest import config_for, emu  # noqa: F401
from actor_tests.runner.conftest import svc, until  # noqa: F401
from adk_actors import Agent, FunctionTool
from adk_actors.errors import AgentError, ConfigError, ValidationError
from adk_actors.evaluation.model import EvalSet, MetricSpec, SampleTrace, Score
from adk_actors.evaluation.runner import (
    AgentTarget,
    EvalOptions,
    _response_text,
    _Schedule,
    eval_app_name,
    resolve_target,
    run_eval,
)
from adk_actors.runtime.system import ActorSystemHandle, group_pids

RESPONSE = MetricSpec(id="response", criterion="exact_response")
TRAJECTORY = MetricSpec(id="trajectory", criterion="trajectory_exact")

SCRIPT = {
    "rules": [
        {"when": {"has_function_response": True, "function_response_name": "bump"},
         "respond": {"text": "count {response.count} user {response.user}"}},
        {"when": {"has_function_response": True}, "respond": {"text": "Sunny in {args.city}"}},
        {"when": {"user_text_contains": "Tokyo"},
         "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}},
        {"when": {"user_text_contains": "Paris"},
         "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Lyon"}}]}},
        {"when": {"user_text_contains": "bump"}, "respond": {"function_calls": [{"name": "bump", "args": {}}]}},
        {"when": {"user_text_contains": "explode"}, "respond": {"fault": {"status": 400, "message": "bad"}}},
        {"when": {"user_text_contains": "slow"}, "respond": {"text": "late", "delay_ms": 20000}},
        {"when": {"user_text_contains": "greet"}, "respond": {"text": "goodbye"}},
        {"when": {}, "respond": {"text": "You said: {user_text}"}},
    ]
}  # fmt: skip


# ---- helpers --------------------------------------------------------------------------------------------------------
def weather_tool() -> FunctionTool:
    """``get_weather(city)`` (a closure: it travels to the worker by value, never importing this module)."""

    def get_weather(city: str) -> dict:
        """Get the weather for a city."""
        return {"city": city, "forecast": "sunny"}

    return FunctionTool(get_weather)


def bump_tool() -> FunctionTool:
    """``bump()``: reads the session's ``count`` and ``user:count`` and writes both plus one (a closure: it travels
    to the worker by value)."""

    def bump(tool_context: Any) -> dict:
        """Increment the counters."""
        count = int(tool_context.state.get("count", 0)) + 1
        user = int(tool_context.state.get("user:count", 0)) + 1
        tool_context.actions.set_state("count", count)
        tool_context.actions.set_state("user:count", user)
        return {"count": count, "user": user}

    return FunctionTool(bump)


def eval_set(cases: list[dict[str, Any]]) -> EvalSet:
    return EvalSet.from_dict({"schema_version": 2, "id": "runner-tests", "cases": cases})


def case(case_id: str, *turns: tuple[str, str | None, list[dict[str, Any]] | None], **extra: Any) -> dict[str, Any]:
    out = []
    for i, (text, response, tools) in enumerate(turns):
        turn: dict[str, Any] = {"id": f"t{i + 1}", "input": text}
        if response is not None:
            turn["expected_response"] = response
        if tools is not None:
            turn["expected_tool_uses"] = tools
        out.append(turn)
    return {"id": case_id, "turns": out, **extra}


def target(emulator: Any, prefix: str, tools: tuple[Any, ...] = (), **runner_options: Any) -> AgentTarget:
    return AgentTarget(f"{prefix}_{uuid.uuid4().hex[:6]}", config_for(emulator), tools, runner_options)


def live_agents(system: ActorSystemHandle, prefix: str) -> list[str]:
    """Agents the hosts report whose name starts with ``prefix`` (the hosts' own inner-actor tables)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for inner in node.get("inner") or ():
                if isinstance(inner, Mapping) and inner.get("actor") == "AgentActor":
                    name = str(inner.get("register_as") or "")
                    if name.startswith(prefix):
                        found.append(name)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(system.tree())
    return found


def assert_clean(system: ActorSystemHandle, sessions: Any, tgt: AgentTarget) -> None:
    assert live_agents(system, f"{tgt.name}_") == []
    assert sessions.list_sessions(app_name=eval_app_name(tgt.name)) == []


def by_case(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["case_id"]: c for c in result["cases"]}


def scores_of(sample: dict[str, Any]) -> dict[str, str]:
    return {s["metric_id"]: s["status"] for s in sample["scores"]}


def _stand_in_criteria() -> types.ModuleType:
    """A tiny scorer for the runner's mechanics while ``criteria`` is not importable (exact response and
    exact trajectory only)."""
    module = types.ModuleType("adk_actors.evaluation.criteria")

    def check_metric_config(spec: MetricSpec) -> None:
        if spec.criterion not in ("exact_response", "trajectory_exact"):
            raise ValidationError("stand-in", reason="invalid_metric", details={"path": "criterion"})

    def score_sample(case: Any, trace: SampleTrace, metrics: Any, *, judge: Any = None) -> list[Score]:
        out = []
        for spec in metrics:
            if trace.error is not None:
                out.append(Score(spec.id, "not_evaluated", threshold=spec.threshold, reason="sample_failed"))
                continue
            points = []
            for turn, done in zip(case.turns, trace.turns, strict=False):
                if spec.criterion == "exact_response" and turn.expected_response is not None:
                    points.append(float(done.response.strip() == turn.expected_response.strip()))
                if spec.criterion == "trajectory_exact" and turn.expected_tool_uses is not None:
                    points.append(float(list(turn.expected_tool_uses) == list(done.tool_uses)))
            if not points:
                out.append(Score(spec.id, "not_evaluated", threshold=spec.threshold, reason="no_expectation"))
                continue
            mean = sum(points) / len(points)
            out.append(Score(spec.id, "passed" if mean >= spec.threshold else "failed", mean, spec.threshold))
        return out

    module.check_metric_config = check_metric_config  # type: ignore[attr-defined]
    module.score_sample = score_sample  # type: ignore[attr-defined]
    return module


@pytest.fixture(autouse=True)
def scoring(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real ``criteria`` when it imports (always, once it has landed); the stand-in otherwise."""
    try:
        import adk_actors.evaluation.criteria  # noqa: F401
    except ImportError:
        monkeypatch.setitem(__import__("sys").modules, "adk_actors.evaluation.criteria", _stand_in_criteria())


@pytest.fixture
def emu_script(emu: Any) -> Any:  # noqa: F811
    emu.set_script(SCRIPT)
    return emu


# ---- options --------------------------------------------------------------------------------------------------------
def test_default_options_are_the_documented_ones() -> None:
    options = EvalOptions()
    assert options.to_dict() == {
        "samples": 1,
        "concurrency": 4,
        "sample_concurrency": 1,
        "pass_rate_threshold": 1.0,
        "sample_pass_rate_threshold": 1.0,
        "min_successful_samples": None,
        "empty_criteria": "fail",
        "case_timeout_s": 300.0,
        "overall_timeout_s": None,
        "capture_responses": True,
        "capture_tool_args": False,
        "max_report_bytes": 64 * 1024 * 1024,
    }
    assert EvalOptions.from_dict(options.to_dict()) == options
    assert EvalOptions(samples=3).required_samples == 3
    assert EvalOptions(samples=3, min_successful_samples=2).required_samples == 2


HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_VALID = {
    "samples": lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 100,
    "concurrency": lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 256,
    "sample_concurrency": lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 64,
    "pass_rate_threshold": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1,
    "sample_pass_rate_threshold": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1,
    "min_successful_samples": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v == 1),
    "empty_criteria": lambda v: v in ("fail", "pass"),
    "case_timeout_s": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 86400,
    "overall_timeout_s": lambda v: (
        v is None or (isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 604800)
    ),
    "capture_responses": lambda v: isinstance(v, bool),
    "capture_tool_args": lambda v: isinstance(v, bool),
    "max_report_bytes": lambda v: isinstance(v, int) and not isinstance(v, bool) and 1024 <= v <= 1024**3,
}


def _rules(name: str) -> set[str]:
    """The rule texts an option refuses values with, from fixed bad values of each kind (type, low, high)."""
    rules = set()
    for bad in (object(), -(10**9), 10**12, -0.5, "text"):
        if not _VALID[name](bad):
            with pytest.raises(ValidationError) as err:
                EvalOptions(**{name: bad})
            rules.add(err.value.details["rule"])
    return rules


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(_VALID)), value=HOSTILE)
def test_hostile_options_are_refused_as_invalid_eval_options(name: str, value: Any) -> None:
    if _VALID[name](value):
        assert getattr(EvalOptions(**{name: value}), name) == value
        return
    with pytest.raises(ValidationError) as err:
        EvalOptions(**{name: value})
    assert err.value.reason == "invalid_eval_options"
    assert err.value.details == {"field": name, "rule": err.value.details["rule"]}
    assert err.value.details["rule"] in _rules(name)  # one of the field's fixed rules: never an echo of the value


@given(st.dictionaries(st.text(max_size=12), HOSTILE, max_size=4))
@settings(max_examples=100, deadline=None)
def test_options_from_hostile_json_raise_only_invalid_eval_options(data: dict[str, Any]) -> None:
    try:
        EvalOptions.from_dict(data)
    except ValidationError as err:
        assert err.reason == "invalid_eval_options"


def test_min_successful_samples_cannot_exceed_samples() -> None:
    with pytest.raises(ValidationError) as err:
        EvalOptions(samples=2, min_successful_samples=3)
    assert err.value.details["field"] == "min_successful_samples"
    with pytest.raises(ValidationError):
        EvalOptions.from_dict({"samples": 2, "bogus": 1})


# ---- the schedule (pure) --------------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(
    cases=st.integers(1, 12),
    samples=st.integers(1, 5),
    concurrency=st.integers(1, 6),
    sample_concurrency=st.integers(1, 4),
    order=st.randoms(use_true_random=False),
)
def test_schedule_starts_every_sample_once_within_both_bounds(
    cases: int, samples: int, concurrency: int, sample_concurrency: int, order: Any
) -> None:
    options = EvalOptions(samples=samples, concurrency=concurrency, sample_concurrency=sample_concurrency)
    schedule = _Schedule(cases, options)
    started: list[tuple[int, int]] = []
    running: list[tuple[int, int]] = []
    finished: set[tuple[int, int]] = set()
    while True:
        running += schedule.take()
        started += [r for r in running if r not in started]
        open_cases = {c for c, _ in started if sum(1 for f in finished if f[0] == c) < samples}
        assert len(open_cases) <= concurrency
        for c in {c for c, _ in running}:
            assert sum(1 for r in running if r[0] == c) <= sample_concurrency
        if not running:
            break
        done = running.pop(order.randrange(len(running)))
        finished.add(done)
        schedule.done(done[0])
    assert sorted(started) == [(c, s) for c in range(cases) for s in range(1, samples + 1)]
    assert not schedule.pending()


def test_schedule_reports_what_never_started() -> None:
    schedule = _Schedule(3, EvalOptions(samples=2, concurrency=1))
    assert schedule.take() == [(0, 1)]
    assert schedule.not_started() == [(0, 2), (1, 1), (1, 2), (2, 1), (2, 2)]
    assert schedule.take() == [] and not schedule.pending()


def test_a_content_output_is_read_as_its_answer_text_without_thoughts() -> None:
    content = {
        "schema_version": 1,
        "parts": [
            {"type": "text", "text": "thinking...", "thought": True},
            {"type": "text", "text": "Sunny "},
            {"type": "function_call", "name": "f", "args": {}},
            {"type": "text", "text": "today"},
        ],
    }
    assert _response_text(content) == "Sunny today"
    assert _response_text("plain") == "plain"
    assert _response_text({"b": 1, "a": [2]}) == '{"a":[2],"b":1}'  # a structured output, as canonical JSON


# ---- targets --------------------------------------------------------------------------------------------------------
def test_targets_resolve_from_an_agent_value_and_an_agent_file(tmp_path: Path) -> None:
    agent = Agent(name="Resolved", instruction="Be brief.", provider_config={"provider": "gemini"})
    resolved = resolve_target(agent)
    assert (resolved.name, resolved.config["instructions"]) == ("Resolved", "Be brief.")
    path = tmp_path / "agent.json"
    path.write_text(json.dumps({"name": "FromFile", "model": "gemini-x", "runner_options": {"max_llm_calls": 3}}))
    from_file = resolve_target(str(path))
    assert (from_file.name, from_file.model, from_file.runner_options) == ("FromFile", "gemini-x", {"max_llm_calls": 3})
    with pytest.raises(ConfigError) as err:
        resolve_target(42)
    assert err.value.details == {"key": "target", "type": "int"}
    with pytest.raises(AgentError):
        AgentTarget("no spaces allowed", {})
    with pytest.raises(ConfigError):
        AgentTarget("Fine", {}, tools="not a list")  # type: ignore[arg-type]


def test_invalid_inputs_fail_before_anything_runs(system: ActorSystemHandle, emu_script: Any, svc: Any) -> None:  # noqa: F811
    cases = eval_set([case("c", ("hello", "You said: hello", None))])
    tgt = target(emu_script, "EvalInvalid", max_llm_calls=-1)
    with pytest.raises(ConfigError) as err:
        run_eval(tgt, cases, [RESPONSE], system=system)
    assert err.value.details["key"] == "runner_options.max_llm_calls"
    streaming = target(emu_script, "EvalInvalid", streaming_mode="text")
    with pytest.raises(ConfigError):
        run_eval(streaming, cases, [RESPONSE], system=system)
    with pytest.raises(ValidationError) as bad_metric:
        run_eval(target(emu_script, "EvalInvalid"), cases, [{"id": "m", "criterion": "nope"}], system=system)
    assert bad_metric.value.reason == "invalid_metric"
    with pytest.raises(ValidationError) as bad_set:
        run_eval(target(emu_script, "EvalInvalid"), {"schema_version": 9}, [RESPONSE], system=system)
    assert bad_set.value.reason == "invalid_eval_set"
    assert emu_script.requests == []
    assert live_agents(system, "EvalInvalid_") == []


# ---- whole evaluations ----------------------------------------------------------------------------------------------
def test_pass_trajectory_failure_response_failure_and_error_are_each_accounted(
    system: ActorSystemHandle,
    emu_script: Any,
    svc: Any,  # noqa: F811
) -> None:
    tokyo = [{"name": "get_weather", "args": {"city": "Tokyo"}}]
    paris = [{"name": "get_weather", "args": {"city": "Paris"}}]
    cases = eval_set(
        [
            case("passes", ("Weather in Tokyo?", "Sunny in Tokyo", tokyo)),
            case("wrong_tool_args", ("Weather in Paris?", "Sunny in Lyon", paris)),
            case("wrong_answer", ("Please greet me", "hello", [])),
            case("provider_fault", ("explode now", "anything", [])),
        ]
    )
    tgt = target(emu_script, "EvalAccount", (weather_tool(),))
    seen: list[dict[str, Any]] = []
    result = run_eval(
        tgt,
        cases,
        [RESPONSE, TRAJECTORY],
        EvalOptions(concurrency=4, capture_tool_args=True),
        system=system,
        progress=seen.append,
    )
    found = by_case(result)
    assert [c["case_id"] for c in result["cases"]] == ["passes", "wrong_tool_args", "wrong_answer", "provider_fault"]
    assert found["passes"]["status"] == "passed"
    assert scores_of(found["passes"]["samples"][0]) == {"response": "passed", "trajectory": "passed"}
    assert found["passes"]["samples"][0]["turns"][0]["tool_uses"] == tokyo
    assert found["wrong_tool_args"]["status"] == "failed"
    assert scores_of(found["wrong_tool_args"]["samples"][0]) == {"response": "passed", "trajectory": "failed"}
    assert found["wrong_answer"]["status"] == "failed"
    assert scores_of(found["wrong_answer"]["samples"][0]) == {"response": "failed", "trajectory": "passed"}
    fault = found["provider_fault"]["samples"][0]
    assert found["provider_fault"]["status"] == "error"
    assert fault["status"] == "error" and fault["error"]["type"] == "ProviderHttpError"
    assert set(scores_of(fault).values()) == {"not_evaluated"}
    assert result["status"] == "error" and result["passed"] is False
    assert result["counts"] == {"cases": 4, "passed": 1, "failed": 2, "error": 1, "not_evaluated": 0}
    assert result["agent"] == {"name": tgt.name, "model": ""}
    assert sorted((p["case_id"], p["status"]) for p in seen) == [
        ("passes", "passed"),
        ("provider_fault", "error"),
        ("wrong_answer", "failed"),
        ("wrong_tool_args", "failed"),
    ]
    assert [p["done"] for p in seen] == [1, 2, 3, 4] and {p["total"] for p in seen} == {4}
    assert_clean(system, svc, tgt)


def test_turns_run_in_order_and_a_failed_turn_ends_its_sample(
    system: ActorSystemHandle,
    emu_script: Any,
    svc: Any,  # noqa: F811
) -> None:
    cases = eval_set(
        [
            case(
                "ordered",
                ("one", "You said: one", None),
                ("two", "You said: two", None),
                ("three", "You said: three", None),
            ),
            case("broken", ("first", "You said: first", None), ("explode", None, None), ("never", None, None)),
        ]
    )
    tgt = target(emu_script, "EvalOrder")
    result = run_eval(tgt, cases, [RESPONSE], EvalOptions(concurrency=1), system=system)
    ordered = by_case(result)["ordered"]["samples"][0]
    assert [t["turn_id"] for t in ordered["turns"]] == ["t1", "t2", "t3"]
    assert [t["response"] for t in ordered["turns"]] == ["You said: one", "You said: two", "You said: three"]
    assert ordered["status"] == "passed"
    # The model saw the conversation in order: the third request carries the first two turns before its input.
    third = next(r for r in emu_script.requests if "three" in json.dumps(r["body"]["contents"][-1]))
    texts = [p.get("text") for c in third["body"]["contents"] for p in c["parts"] if "text" in p]
    assert texts == ["one", "You said: one", "two", "You said: two", "three"]
    broken = by_case(result)["broken"]["samples"][0]
    assert [t["turn_id"] for t in broken["turns"]] == ["t1", "t2"]
    assert broken["turns"][1]["error"]["type"] == "ProviderHttpError"
    assert broken["status"] == "error"
    assert not any("never" in json.dumps(r["body"]) for r in emu_script.requests)
    assert_clean(system, svc, tgt)


def test_samples_are_independent_no_state_leaks_between_them(
    system: ActorSystemHandle,
    emu_script: Any,
    svc: Any,  # noqa: F811
) -> None:
    cases = eval_set(
        [
            case(
                "counter",
                ("bump", "count 11 user 1", None),
                ("bump", "count 12 user 2", None),
                initial_state={"count": 10},
            )
        ]
    )
    tgt = target(emu_script, "EvalIsolated", (bump_tool(),))
    calls: list[int] = []

    def broken_display(update: dict[str, Any]) -> None:
        calls.append(update["done"])
        raise RuntimeError("the display broke")

    options = EvalOptions(samples=4, sample_concurrency=4)
    result = run_eval(tgt, cases, [RESPONSE], options, system=system, progress=broken_display)
    assert calls == [1]  # progress stopped after it raised; the evaluation went on
    samples = result["cases"][0]["samples"]
    assert [s["sample"] for s in samples] == [1, 2, 3, 4]
    assert [[t["response"] for t in s["turns"]] for s in samples] == [["count 11 user 1", "count 12 user 2"]] * 4
    assert result["status"] == "passed"
    assert_clean(system, svc, tgt)


def test_cancel_mid_evaluation_stops_running_samples_and_leaves_nothing(
    system: ActorSystemHandle,
    emu_script: Any,
    svc: Any,  # noqa: F811
) -> None:
    cases = eval_set([case(f"slow{i}", ("slow please", "late", None)) for i in range(6)])
    tgt = target(emu_script, "EvalCancel")
    cancel = threading.Event()
    holding: list[int] = []

    def cancel_when_two_are_asking() -> None:
        try:
            until(lambda: len(emu_script.requests) >= 2, 20.0, "two samples asking the model")
            holding.append(len(live_agents(system, f"{tgt.name}_")))  # what the running samples hold right now
        finally:
            cancel.set()

    helper = threading.Thread(target=cancel_when_two_are_asking)
    helper.start()
    began = time.monotonic()
    options = EvalOptions(concurrency=2, case_timeout_s=30.0)
    result = run_eval(tgt, cases, [RESPONSE], options, system=system, cancel=cancel)
    helper.join()
    assert holding == [2]
    assert time.monotonic() - began < 10.0  # the 20 s answers were not waited for
    assert result["status"] == "cancelled" and result["passed"] is False
    samples = [c["samples"][0] for c in result["cases"]]
    assert [s["status"] for s in samples[:2]] == ["error", "error"]
    assert {s["error"]["reason"] for s in samples[:2]} == {"cancelled"}
    assert [s["status"] for s in samples[2:]] == ["not_evaluated"] * 4
    assert len(emu_script.requests) == 2
    assert_clean(system, svc, tgt)


def test_keyboard_interrupt_cancels_cleans_up_and_returns_the_result(
    system: ActorSystemHandle,
    emu_script: Any,
    svc: Any,  # noqa: F811
) -> None:
    cases = eval_set(
        [
            case("fast", ("hello", "You said: hello", None)),
            case("slow", ("slow please", "late", None)),
            case("later", ("hello again", "You said: hello again", None)),
        ]
    )
    tgt = target(emu_script, "EvalInterrupt")

    def interrupt(_: dict[str, Any]) -> None:
        until(lambda: any("slow" in json.dumps(r["body"]) for r in emu_script.requests), 20.0, "slow case asking")
        raise KeyboardInterrupt

    result = run_eval(tgt, cases, [RESPONSE], EvalOptions(concurrency=2), system=system, progress=interrupt)
    found = by_case(result)
    assert result["status"] == "cancelled"
    assert found["fast"]["status"] == "passed"
    assert found["slow"]["samples"][0]["error"]["reason"] == "cancelled"
    assert found["later"]["samples"][0]["status"] == "not_evaluated"
    assert_clean(system, svc, tgt)


def test_case_and_overall_timeouts_stop_hung_samples(
    system: ActorSystemHandle,
    emu_script: Any,
    svc: Any,  # noqa: F811
) -> None:
    cases = eval_set([case("quick", ("hello", "You said: hello", None)), case("hung", ("slow please", "late", None))])
    tgt = target(emu_script, "EvalTimeout")
    began = time.monotonic()
    result = run_eval(tgt, cases, [RESPONSE], EvalOptions(case_timeout_s=1.0), system=system)
    assert time.monotonic() - began < 8.0
    found = by_case(result)
    assert found["quick"]["status"] == "passed"
    assert found["hung"]["samples"][0]["error"] == {"reason": "case_timeout", "type": "Aborted"}
    assert result["status"] == "error"
    assert_clean(system, svc, tgt)

    overall = eval_set([case(f"hung{i}", ("slow please", "late", None)) for i in range(3)])
    began = time.monotonic()
    result = run_eval(tgt, overall, [RESPONSE], EvalOptions(concurrency=1, overall_timeout_s=1.0), system=system)
    assert time.monotonic() - began < 8.0
    statuses = [(c["samples"][0]["status"], c["samples"][0].get("reason")) for c in result["cases"]]
    assert statuses[0] == ("error", "overall_timeout")
    assert [s for s, _ in statuses[1:]] == ["not_evaluated", "not_evaluated"]
    assert result["status"] == "error"
    assert_clean(system, svc, tgt)


def test_an_agent_value_target_with_a_sub_agent_value_runs_and_is_cleaned(
    system: ActorSystemHandle,
    emu_script: Any,
    svc: Any,  # noqa: F811
) -> None:
    tag = uuid.uuid4().hex[:6]
    provider = {"provider": "gemini", "base_url": emu_script.base_url, "api_key": "test-key"}
    helper = Agent(name=f"EvalHelper_{tag}", description="Helps.", provider_config=provider)
    root = Agent(name=f"EvalRoot_{tag}", sub_agents=[helper], provider_config=provider)
    cases = eval_set([case("hi", ("hello", "You said: hello", None))])
    result = run_eval(root, cases, [RESPONSE], system=system)
    assert result["status"] == "passed"
    assert live_agents(system, f"EvalRoot_{tag}") == [] and live_agents(system, f"EvalHelper_{tag}") == []
    assert svc.list_sessions(app_name=eval_app_name(root.name)) == []


# ---- scale ----------------------------------------------------------------------------------------------------------
def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def _reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _node_rss_mb(system: ActorSystemHandle) -> float:
    """Resident memory of every process of the node (RSS, so shared pages count once per process)."""
    total = 0
    for pid in group_pids(system.pgid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024.0


@pytest.fixture
def report_line(request: pytest.FixtureRequest) -> Iterator[Callable[[str], None]]:
    lines: list[str] = []
    yield lines.append
    if lines:
        request.node.user_properties.append(("measured", "; ".join(lines)))
        print("\n" + "\n".join(lines))


def test_a_thousand_cases_at_concurrency_32_run_in_bounded_memory(
    system: ActorSystemHandle,
    emu_script: Any,
    svc: Any,  # noqa: F811
    report_line: Callable[[str], None],
) -> None:
    cases = eval_set([case(f"c{i:04d}", (f"hello {i}", f"You said: hello {i}", None)) for i in range(1000)])
    tgt = target(emu_script, "EvalScale")
    node_before = _node_rss_mb(system)
    _reset_peak_rss()
    base = _peak_rss_mb()
    began = time.monotonic()
    result = run_eval(tgt, cases, [RESPONSE], EvalOptions(concurrency=32), system=system)
    seconds = time.monotonic() - began
    peak = _peak_rss_mb()
    node_after = _node_rss_mb(system)
    report_line(
        f"1,000 single-turn cases, concurrency 32: {seconds:.1f} s ({1000 / seconds:.0f} cases/s), "
        f"caller peak RSS {peak:.0f} MB (+{peak - base:.0f} MB over the start), "
        f"node RSS {node_before:.0f} -> {node_after:.0f} MB"
    )
    assert result["status"] == "passed" and result["counts"]["passed"] == 1000
    assert peak - base < 150.0
    assert seconds < 60.0
    assert_clean(system, svc, tgt)


# ---- a google-adk eval set, end to end --------------------------------------------------------------------------
ADK_SCRIPT = {
    "rules": [
        {"when": {"has_function_response": True}, "respond": {"text": "The weather in {args.city} is sunny."}},
        {"when": {"user_text_contains": "Tokyo"},
         "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]}},
        {"when": {"user_text_contains": "Paris"},
         "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]}},
        {"when": {"user_text_contains": "Oslo"},
         "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]}},
        {"when": {}, "respond": {"text": "I am a weather assistant."}},
    ]
}  # fmt: skip


def test_a_google_adk_eval_set_runs_against_an_agent_file_and_each_case_is_accounted(
    system: ActorSystemHandle,
    emu: Any,  # noqa: F811
    svc: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    from adk_actors.evaluation.adk_format import load_eval_set

    emu.set_script(ADK_SCRIPT)
    eval_set = load_eval_set(Path(__file__).parent / "data" / "weather.evalset.json")
    assert eval_set.source == "google-adk"
    agent_file = tmp_path / "weather_agent.json"
    name = f"AdkWeather_{uuid.uuid4().hex[:6]}"
    config = {k: v for k, v in config_for(emu).items() if k != "api_key"}  # a file never holds a key
    agent_file.write_text(json.dumps({"name": name, **config, "tools": ["actor_tests.agents.support:get_weather"]}))
    from_file = resolve_target(str(agent_file))
    assert "name" not in from_file.config  # each sample's agent is named on its own
    keyed = AgentTarget(from_file.name, {**from_file.config, "api_key": "test-key"}, from_file.tools)
    metrics = [RESPONSE, MetricSpec(id="trajectory", criterion="trajectory_exact", config={"args": "exact"})]
    result = run_eval(keyed, eval_set, metrics, EvalOptions(concurrency=2), system=system)
    found = by_case(result)
    assert found["tokyo_forecast"]["status"] == "passed"
    # The second turn expects a unit conversion the agent never makes: a trajectory failure, not an error.
    [sample] = found["two_cities_in_a_row"]["samples"]
    assert found["two_cities_in_a_row"]["status"] == "failed" and scores_of(sample)["trajectory"] == "failed"
    assert found["small_talk_without_tools"]["status"] == "passed"
    assert result["counts"] == {"cases": 3, "passed": 2, "failed": 1, "error": 0, "not_evaluated": 0}
    assert live_agents(system, name) == []


def test_an_evaluation_adds_at_most_one_agent_name_per_running_slot_to_the_nodes_metrics(
    system: ActorSystemHandle,
    emu_script: Any,
    svc: Any,  # noqa: F811
) -> None:
    """Every sample gets a fresh agent, but names are reused per running slot: a large set cannot flood the node's
    bounded metrics series with one series per sample."""
    from adk_actors import observability, telemetry

    tgt = target(emu_script, "EvalSlots")
    cases = eval_set([case(f"c{i}", (f"hello {i}", f"You said: hello {i}", None)) for i in range(24)])
    with telemetry.attach("agent.prompt.stop", system=system) as sub:
        result = run_eval(tgt, cases, [RESPONSE], EvalOptions(concurrency=3), system=system)
        seen = 0
        while seen < 24:  # the hub counts an event before it fans it out: then all 24 turns are in the metrics
            seen += str(sub.next(10).metadata.get("agent", "")).startswith(tgt.name)
    assert result["counts"]["passed"] == 24
    series = observability.snapshot(system)["instruments"]["adk.turns"]["series"]
    names = {s["labels"]["agent"] for s in series if s["labels"].get("agent", "").startswith(tgt.name)}
    assert 1 <= len(names) <= 3 and sum(s["value"] for s in series if s["labels"].get("agent") in names) == 24
    assert live_agents(system, tgt.name) == []
