"""evaluation/results.py: statuses and the gate of build_result, validate_result, compare and Markdown."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actor_tests.evaluation.e3_support import (
    AGENT,
    FINISHED,
    METRICS,
    STARTED,
    eval_set,
    result,
    roundtrip,
    scores,
    trace,
)
from adk_actors.errors import ValidationError
from adk_actors.evaluation.model import SampleTrace, Score, TurnTrace, metric_specs
from adk_actors.evaluation.results import (
    COMPARISON_SCHEMA,
    RESULT_SCHEMA,
    build_result,
    compare,
    render_markdown,
    trajectory_diffs,
    validate_comparison,
    validate_result,
)

FAULT = {"reason": "provider_failed", "type": "ProviderHttpError"}


def case_of(doc: dict[str, Any], ident: str) -> dict[str, Any]:
    return next(c for c in doc["cases"] if c["case_id"] == ident)


# ---- statuses ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sample", "options", "status", "reason"),
    [
        ((trace("weather"), scores()), {}, "passed", None),
        ((trace("weather"), scores("failed")), {}, "failed", "criteria_failed"),
        ((trace("weather"), scores("passed", "error")), {}, "failed", "criteria_failed"),
        ((trace("weather", error=FAULT), scores("not_evaluated", "not_evaluated")), {}, "error", "provider_failed"),
        ((trace("weather"), scores("not_evaluated", "not_evaluated")), {}, "failed", "no_criteria_scored"),
        ((trace("weather"), scores("not_evaluated", "not_evaluated")), {"empty_criteria": "pass"}, "passed", None),
        ((trace("weather"), scores("passed", "not_evaluated")), {}, "passed", None),
        ((trace("weather"), []), {}, "failed", "no_criteria_scored"),
    ],
    ids=["passed", "failed", "metric-error", "trace-error", "nothing-scored", "empty-pass", "partial", "no-scores"],
)
def test_the_sample_status_follows_the_table(sample: Any, options: dict[str, Any], status: str, reason: Any) -> None:
    doc = result({"weather": [sample]}, options=options)
    entry = case_of(doc, "weather")["samples"][0]
    assert (entry["status"], entry["reason"]) == (status, reason)
    if status == "error":
        assert entry["error"] == FAULT
        assert case_of(doc, "weather")["status"] == "error" and doc["status"] == "error"


def test_a_metric_without_a_score_is_not_evaluated_and_scores_follow_the_metric_order() -> None:
    doc = result({"weather": [(trace("weather"), scores()[1:])]})
    got = case_of(doc, "weather")["samples"][0]["scores"]
    assert [s["metric_id"] for s in got] == ["response", "trajectory"]
    assert got[0]["status"] == "not_evaluated" and got[0]["reason"] == "not_scored"
    assert got[1]["status"] == "passed"


def samples_of(ident: str, statuses: list[str]) -> list[tuple[SampleTrace, list[Score]]]:
    out = []
    for n, status in enumerate(statuses):
        if status == "error":
            out.append((trace(ident, n, error=FAULT), scores("not_evaluated", "not_evaluated")))
        else:
            out.append((trace(ident, n), scores(status, status)))
    return out


@pytest.mark.parametrize(
    ("statuses", "options", "status", "rate"),
    [
        (["passed", "passed", "passed"], {"samples": 3}, "passed", 1.0),
        (["passed", "failed", "passed"], {"samples": 3}, "failed", 2 / 3),
        (["passed", "failed", "passed"], {"samples": 3, "sample_pass_rate_threshold": 0.6}, "passed", 2 / 3),
        (["passed", "error", "passed"], {"samples": 3}, "error", 1.0),
        (["passed", "error", "passed"], {"samples": 3, "min_successful_samples": 2}, "passed", 1.0),
        (["error", "error", "error"], {"samples": 3, "min_successful_samples": 0}, "error", None),
    ],
)
def test_the_case_status_counts_samples_against_min_successful_and_the_sample_threshold(
    statuses: list[str], options: dict[str, Any], status: str, rate: float | None
) -> None:
    doc = result({"weather": samples_of("weather", statuses)}, options=options, case_ids=["weather"])
    case = doc["cases"][0]
    assert case["status"] == status
    assert case["pass_rate"] == (None if rate is None else round(rate, 6))


def test_samples_never_started_are_not_evaluated_and_a_cancelled_set_says_so() -> None:
    doc = build_result(
        eval_set(("weather", "greeting")),
        METRICS,
        {"samples": 2},
        [(trace("weather", 1), scores()), (trace("weather", 0), scores())],
        agent=AGENT,
        started_at=STARTED,
        finished_at=FINISHED,
        cancelled=True,
        not_run=[("greeting", 1), ("greeting", 0)],
    )
    weather, greeting = doc["cases"]
    assert [s["sample"] for s in weather["samples"]] == [0, 1]
    assert weather["status"] == "passed"
    assert greeting["status"] == "not_evaluated" and greeting["pass_rate"] is None
    assert [(s["sample"], s["status"], s["reason"]) for s in greeting["samples"]] == [
        (0, "not_evaluated", "not_run"),
        (1, "not_evaluated", "not_run"),
    ]
    assert doc["status"] == "cancelled" and doc["passed"] is False
    assert doc["counts"] == {"cases": 2, "passed": 1, "failed": 0, "error": 0, "not_evaluated": 1}
    assert doc["metric_summaries"][0]["counts"] == {"passed": 2, "failed": 0, "error": 0, "not_evaluated": 2}


def test_a_sample_not_run_without_cancellation_makes_the_set_an_error() -> None:
    doc = build_result(
        eval_set(("weather", "greeting")),
        METRICS,
        {},
        [(trace("weather"), scores())],
        agent=AGENT,
        started_at=STARTED,
        finished_at=FINISHED,
        not_run=[("greeting", 0)],
    )
    assert [c["status"] for c in doc["cases"]] == ["passed", "not_evaluated"]
    assert doc["status"] == "error" and doc["passed"] is False


@pytest.mark.parametrize(
    ("outcome", "options", "status"),
    [
        ({}, {}, "passed"),
        ({"greeting": "failed"}, {}, "failed"),
        ({"greeting": "failed"}, {"pass_rate_threshold": 0.6}, "passed"),
        ({"greeting": "failed", "booking": "failed"}, {"pass_rate_threshold": 0.6}, "failed"),
        ({"greeting": "error"}, {"pass_rate_threshold": 0.0}, "error"),
    ],
)
def test_the_set_gate(outcome: dict[str, str], options: dict[str, Any], status: str) -> None:
    doc = result({ident: samples_of(ident, [s]) for ident, s in outcome.items()}, options=options)
    assert doc["status"] == status
    assert doc["passed"] is (status == "passed")


def test_the_result_document_has_the_schema_and_the_summaries() -> None:
    doc = result({"greeting": [(trace("greeting", tools=("lookup",)), scores("passed", "failed"))]})
    assert doc["schema"] == RESULT_SCHEMA and doc["schema_version"] == 1
    assert doc["eval_set"] == {
        "id": "demo",
        "version": "3",
        "source": "adk_actors/v2",
        "fingerprint": eval_set().fingerprint(),
        "cases": 3,
    }
    assert doc["agent"] == AGENT
    assert doc["started_at"] == "2023-11-14T22:13:20.000Z" and doc["duration_ms"] == 2500.0
    assert doc["counts"] == {"cases": 3, "passed": 2, "failed": 1, "error": 0, "not_evaluated": 0}
    assert doc["pass_rate"] == round(2 / 3, 6)
    trajectory = doc["metric_summaries"][1]
    assert trajectory == {
        "metric_id": "trajectory",
        "criterion": "trajectory_exact",
        "kind": "metric",
        "threshold": 1.0,
        "mean_score": round(2 / 3, 6),
        "pass_rate": round(2 / 3, 6),
        "counts": {"passed": 2, "failed": 1, "error": 0, "not_evaluated": 0},
    }
    turn = case_of(doc, "greeting")["samples"][0]["turns"][0]
    assert turn["expected_tools"] == ["get_weather"]
    assert turn["tool_uses"] == [{"name": "lookup", "args": {}}]
    assert json.loads(json.dumps(doc)) == doc


def test_responses_and_tool_arguments_are_captured_only_when_asked_and_responses_are_cut() -> None:
    long = "x" * 5000
    outcome = {"weather": [(trace("weather", response=long), scores())]}
    off = case_of(result(outcome, options={"capture_responses": False}), "weather")["samples"][0]["turns"][0]
    assert off["response"] == "" and off["tool_uses"][0]["args"] == {}
    on = case_of(result(outcome, options={"capture_tool_args": True}), "weather")["samples"][0]["turns"][0]
    assert len(on["response"]) == 4096 and on["tool_uses"][0]["args"] == {"city": "Paris"}


def test_a_result_over_max_report_bytes_loses_its_responses_first_then_is_refused() -> None:
    outcome = {"weather": [(trace("weather", response="y" * 4000), scores())]}
    full = result(outcome)
    size = len(json.dumps(full, separators=(",", ":")).encode())
    cut = result(outcome, options={"max_report_bytes": size - 1000})
    assert cut["truncated"] is True
    assert case_of(cut, "weather")["samples"][0]["turns"][0]["response"] == ""
    with pytest.raises(ValidationError) as caught:
        result(outcome, options={"max_report_bytes": 500})
    assert caught.value.reason == "report_too_large"
    assert caught.value.details["max_bytes"] == 500


def test_a_sample_of_an_unknown_case_or_a_duplicate_is_refused() -> None:
    for outcome in (
        {"weather": [(trace("nope"), scores())]},
        {"weather": [(trace("weather"), scores()), (trace("weather"), scores())]},
    ):
        with pytest.raises(ValidationError) as caught:
            result(outcome)
        assert caught.value.reason == "invalid_result"


def test_the_order_of_finished_samples_does_not_change_the_result() -> None:
    samples = samples_of("weather", ["passed", "failed", "error"]) + samples_of("greeting", ["failed", "passed"])
    kwargs: dict[str, Any] = {"agent": AGENT, "started_at": STARTED, "finished_at": FINISHED}
    one = build_result(eval_set(("weather", "greeting")), METRICS, {"samples": 3}, samples, **kwargs)
    two = build_result(eval_set(("weather", "greeting")), METRICS, {"samples": 3}, samples[::-1], **kwargs)
    assert one == two
    assert [c["case_id"] for c in one["cases"]] == ["weather", "greeting"]
    assert render_markdown(one) == render_markdown(two)


# ---- validate_result --------------------------------------------------------------------------------------------
def test_a_saved_result_validates_and_the_copy_is_not_shared() -> None:
    doc = roundtrip(result({"greeting": [(trace("greeting"), scores("failed"))]}))
    checked = validate_result(doc)
    assert checked == doc and checked is not doc
    checked["cases"][0]["case_id"] = "changed"
    assert doc["cases"][0]["case_id"] == "weather"


def _broken(change: str) -> Any:
    doc = roundtrip(result())
    if change == "not-an-object":
        return [doc]
    if change == "schema":
        doc["schema"] = "something.else"
    elif change == "version":
        doc["schema_version"] = 2
    elif change == "status":
        doc["status"] = "<script>"
    elif change == "passed-disagrees":
        doc["passed"] = False
    elif change == "pass-rate":
        doc["pass_rate"] = 1.5
    elif change == "missing-cases":
        del doc["cases"]
    elif change == "case-status":
        doc["cases"][1]["status"] = "maybe"
    elif change == "duplicate-case":
        doc["cases"][1]["case_id"] = doc["cases"][0]["case_id"]
    elif change == "score-status":
        doc["cases"][0]["samples"][0]["scores"][0]["status"] = "great"
    elif change == "long-id":
        doc["cases"][0]["case_id"] = "secret-value-" + "z" * 300
    elif change == "count-type":
        doc["counts"]["passed"] = "3"
    elif change == "too-many-turns":
        doc["cases"][0]["samples"][0]["turns"] = [{"turn_id": "t"}] * 65
    elif change == "nan":
        doc["pass_rate"] = float("nan")
    return doc


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ("not-an-object", "$"),
        ("schema", "$.schema"),
        ("version", "$.schema_version"),
        ("status", "$.status"),
        ("passed-disagrees", "$.passed"),
        ("pass-rate", "$.pass_rate"),
        ("missing-cases", "$.cases"),
        ("case-status", "$.cases[1].status"),
        ("duplicate-case", "$.cases[1].case_id"),
        ("score-status", "$.cases[0].samples[0].scores[0].status"),
        ("long-id", "$.cases[0].case_id"),
        ("count-type", "$.counts.passed"),
        ("too-many-turns", "$.cases[0].samples[0].turns"),
        ("nan", "$"),
    ],
)
def test_a_malformed_result_is_refused_with_its_path_never_its_content(change: str, path: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_result(_broken(change))
    assert caught.value.reason == "invalid_result"
    assert caught.value.details["path"] == path
    assert "secret-value" not in json.dumps(caught.value.to_dict()) and "<script>" not in str(caught.value.to_dict())


# ---- compare ----------------------------------------------------------------------------------------------------
def _failing(*idents: str) -> dict[str, Any]:
    return roundtrip(result({i: [(trace(i, tools=()), scores("passed", "failed"))] for i in idents}))


def test_compare_lists_regressed_improved_added_and_removed_cases() -> None:
    baseline = roundtrip(result({"greeting": [(trace("greeting"), scores("failed"))]}))
    current = roundtrip(
        result(
            {"weather": [(trace("weather"), scores("failed"))]},
            case_ids=("weather", "greeting", "extra"),
        )
    )
    got = compare(baseline, current, max_pass_rate_drop=0.5, metric_tolerances={"response": 0.5})
    assert got["schema"] == COMPARISON_SCHEMA and got["schema_version"] == 1
    assert got["cases"] == {
        "regressed": ["weather"],
        "improved": ["greeting"],
        "added": ["extra"],
        "removed": ["booking"],
    }
    assert got["same_set"] is False
    assert got["passed"] is True
    assert validate_comparison(roundtrip(got)) == got


def test_a_metric_drop_beyond_its_tolerance_regresses_and_fails_the_comparison() -> None:
    baseline, current = roundtrip(result()), _failing("weather")
    got = compare(baseline, current, max_pass_rate_drop=1.0)
    rows = {m["metric_id"]: m for m in got["metrics"]}
    assert rows["trajectory"] == {
        "metric_id": "trajectory",
        "baseline": 1.0,
        "current": round(2 / 3, 6),
        "delta": round(2 / 3 - 1, 6),
        "tolerance": 0.0,
        "regressed": True,
    }
    assert rows["response"]["regressed"] is False and rows["response"]["delta"] == 0.0
    assert got["passed"] is False and got["same_set"] is True
    tolerant = compare(baseline, current, max_pass_rate_drop=1.0, metric_tolerances={"trajectory": 0.34})
    assert tolerant["passed"] is True


def test_the_pass_rate_drop_gates_the_comparison_at_exactly_the_allowed_amount() -> None:
    baseline, current = roundtrip(result()), _failing("weather")
    tolerances = {"trajectory": 1.0}
    drop = compare(baseline, current, metric_tolerances=tolerances)["pass_rate"]["drop"]
    assert drop == round(1 / 3, 6)
    assert compare(baseline, current, max_pass_rate_drop=drop, metric_tolerances=tolerances)["passed"] is True
    assert compare(baseline, current, max_pass_rate_drop=0.33, metric_tolerances=tolerances)["passed"] is False
    assert compare(current, baseline)["passed"] is True  # an improvement never fails


def test_a_metric_the_current_result_no_longer_scores_regresses() -> None:
    baseline = roundtrip(result())
    current = roundtrip(
        build_result(
            eval_set(),
            METRICS[:1],
            {},
            [(trace(i), scores()[:1]) for i in ("weather", "greeting", "booking")],
            agent=AGENT,
            started_at=STARTED,
            finished_at=FINISHED,
        )
    )
    rows = {m["metric_id"]: m for m in compare(baseline, current)["metrics"]}
    assert rows["trajectory"]["current"] is None and rows["trajectory"]["regressed"] is True


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"max_pass_rate_drop": -0.1}, "max_pass_rate_drop"),
        ({"max_pass_rate_drop": True}, "max_pass_rate_drop"),
        ({"metric_tolerances": {"response": -1}}, "metric_tolerances"),
        ({"metric_tolerances": {"response": "0.1"}}, "metric_tolerances"),
        ({"metric_tolerances": ["response"]}, "metric_tolerances"),
    ],
)
def test_bad_comparison_options_are_refused(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ValidationError) as caught:
        compare(result(), result(), **kwargs)
    assert caught.value.reason == "invalid_value" and caught.value.details["key"] == key


def test_compare_validates_both_documents() -> None:
    with pytest.raises(ValidationError) as caught:
        compare({"schema": RESULT_SCHEMA}, result())
    assert caught.value.reason == "invalid_result"


# ---- Markdown ---------------------------------------------------------------------------------------------------
def test_the_markdown_report_has_the_summary_metrics_and_failing_cases_with_trajectory_diffs() -> None:
    doc = result(
        {
            "greeting": [(trace("greeting", tools=("lookup", "get_weather")), scores("passed", "failed"))],
            "booking": [(trace("booking", error=FAULT), scores("not_evaluated", "not_evaluated"))],
        }
    )
    text = render_markdown(doc)
    assert text.startswith("# Evaluation demo: ERROR\n")
    assert "| pass rate | 33.3% (gate 100.0%) |" in text
    assert "| response | exact\\_response | metric | 1.000 | 1.000 | 100.0% | 2 | 0 | 0 | 1 |" in text
    assert "- case greeting: failed (sample pass rate 0.0%)" in text
    assert "    - metric trajectory (trajectory\\_exact): failed, 0.000 (threshold 1.000)" in text
    assert "    - trajectory of turn t1: expected get\\_weather; actual lookup, get\\_weather" in text
    assert "  - sample 0: error, provider\\_failed (ProviderHttpError)" in text
    assert "weather:" not in text  # a passing case is not listed
    assert trajectory_diffs(doc) == [
        {
            "case_id": "greeting",
            "sample": 0,
            "turn_id": "t1",
            "expected": ["get_weather"],
            "actual": ["lookup", "get_weather"],
        }
    ]


def test_markdown_makes_hostile_ids_inert() -> None:
    hostile = "<script>alert(1)</script>|[x](javascript:y)`"
    doc = result({hostile: [(trace(hostile), scores("failed"))]}, case_ids=(hostile,))
    text = render_markdown(doc)
    assert "<script>" not in text and "[x](" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\|\\[x\\](javascript:y)\\`" in text


def test_the_comparison_markdown_puts_what_regressed_first() -> None:
    baseline, current = roundtrip(result()), _failing("weather")
    got = compare(baseline, current)
    text = render_markdown(got, result=current)
    assert text.startswith("# Evaluation comparison: REGRESSED\n")
    regressions = text.index("## Regressions")
    assert text.index("- pass rate dropped by 33.3% (allowed 0.0%)") > regressions
    assert "- metric trajectory: 1.000 → 0.667 (delta -0.333, tolerance 0.000)" in text
    assert "- cases no longer passing: weather" in text
    assert text.index("## Regressions") < text.index("## Pass rate") < text.index("## Evaluation demo: FAILED")
    assert render_markdown(compare(baseline, baseline)).count("None.") == 1


# ---- properties -------------------------------------------------------------------------------------------------
_STATUS = st.sampled_from(["passed", "failed", "error", "not_evaluated"])
_SAMPLE = st.one_of(
    st.tuples(st.just("error"), st.just("x"), st.just("x")),
    st.tuples(st.just("ran"), _STATUS, _STATUS),
    st.tuples(st.just("not_run"), st.just("x"), st.just("x")),
)


@settings(max_examples=150, deadline=None)
@given(
    plan=st.lists(st.lists(_SAMPLE, min_size=0, max_size=4), min_size=1, max_size=6),
    samples=st.integers(1, 4),
    minimum=st.one_of(st.none(), st.integers(0, 4)),
    threshold=st.floats(0, 1),
    sample_threshold=st.floats(0, 1),
    empty=st.sampled_from(["fail", "pass"]),
    cancelled=st.booleans(),
)
def test_counts_always_sum_rates_stay_in_bounds_and_rendering_is_deterministic(
    plan: list[list[tuple[str, str, str]]],
    samples: int,
    minimum: int | None,
    threshold: float,
    sample_threshold: float,
    empty: str,
    cancelled: bool,
) -> None:
    ids = [f"case-{i}" for i in range(len(plan))]
    finished: list[tuple[SampleTrace, list[Score]]] = []
    not_run: list[tuple[str, int]] = []
    for ident, case_plan in zip(ids, plan, strict=True):
        for n, (kind, first, second) in enumerate(case_plan):
            if kind == "not_run":
                not_run.append((ident, n))
            elif kind == "error":
                finished.append((trace(ident, n, error=FAULT), scores("not_evaluated", "not_evaluated")))
            else:
                finished.append((SampleTrace(ident, n, (TurnTrace("t1", "ok"),)), scores(first, second)))
    options = {
        "samples": samples,
        "min_successful_samples": minimum,
        "pass_rate_threshold": threshold,
        "sample_pass_rate_threshold": sample_threshold,
        "empty_criteria": empty,
    }
    doc = build_result(
        eval_set(ids),
        METRICS,
        options,
        finished,
        agent=AGENT,
        started_at=STARTED,
        finished_at=FINISHED,
        cancelled=cancelled,
        not_run=not_run,
    )
    counts = doc["counts"]
    assert counts["cases"] == len(ids) == sum(counts[k] for k in ("passed", "failed", "error", "not_evaluated"))
    assert 0.0 <= doc["pass_rate"] <= 1.0
    assert doc["passed"] is (doc["status"] == "passed")
    if cancelled:
        assert doc["status"] == "cancelled"
    total = sum(len(p) for p in plan)
    for summary in doc["metric_summaries"]:
        assert sum(summary["counts"].values()) == total
        assert summary["pass_rate"] is None or 0.0 <= summary["pass_rate"] <= 1.0
    for case in doc["cases"]:
        assert case["pass_rate"] is None or 0.0 <= case["pass_rate"] <= 1.0
    saved = roundtrip(doc)
    assert validate_result(saved) == doc
    assert render_markdown(saved) == render_markdown(copy.deepcopy(doc))
    assert compare(saved, doc)["passed"] is True


def test_metric_specs_are_accepted_as_values() -> None:
    specs = metric_specs([{"id": "only", "criterion": "custom", "config": {"function": "m:f"}}])
    doc = build_result(
        eval_set(("weather",)),
        specs,
        {},
        [(trace("weather"), [Score("only", "passed", 0.9, 1.0)])],
        agent=AGENT,
        started_at=STARTED,
        finished_at=FINISHED,
    )
    assert doc["metrics"] == [specs[0].to_dict()]
    assert doc["status"] == "passed"
