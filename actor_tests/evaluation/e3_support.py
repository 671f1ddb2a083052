"""Shared values of the results/report/CLI tests: a small eval set, metrics, and traces with chosen outcomes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from adk_actors.evaluation.model import EvalSet, MetricSpec, SampleTrace, Score, ToolUse, TurnTrace, metric_specs
from adk_actors.evaluation.results import build_result

METRICS = metric_specs(
    [
        {"id": "response", "criterion": "exact_response", "threshold": 1.0},
        {"id": "trajectory", "criterion": "trajectory_exact", "threshold": 1.0},
    ]
)
STARTED = 1_700_000_000.0
FINISHED = STARTED + 2.5
AGENT = {"name": "Helper", "model": "gemini-test"}


def eval_set(case_ids: Sequence[str] = ("weather", "greeting", "booking"), *, set_id: str = "demo") -> EvalSet:
    """A schema-2 set: each case one turn expecting ``get_weather`` and the answer ``sunny``."""
    return EvalSet.from_dict(
        {
            "schema_version": 2,
            "id": set_id,
            "version": "3",
            "cases": [
                {
                    "id": ident,
                    "turns": [
                        {
                            "id": "t1",
                            "input": "What is the weather?",
                            "expected_response": "sunny",
                            "expected_tool_uses": [{"name": "get_weather", "args": {"city": "Paris"}}],
                        }
                    ],
                }
                for ident in case_ids
            ],
        }
    )


def trace(
    case_id: str,
    sample: int = 0,
    *,
    tools: Sequence[str] = ("get_weather",),
    response: str = "sunny",
    error: Mapping[str, str] | None = None,
) -> SampleTrace:
    turns = () if error else (TurnTrace("t1", response, tuple(ToolUse(n, {"city": "Paris"}) for n in tools)),)
    return SampleTrace(case_id, sample, turns, dict(error) if error else None, duration_ms=12.5)


def scores(
    response: str = "passed", trajectory: str = "passed", metrics: Sequence[MetricSpec] = METRICS
) -> list[Score]:
    out = []
    for spec, status in zip(metrics, (response, trajectory), strict=False):
        value = {"passed": 1.0, "failed": 0.0}.get(status)
        reason = {"error": "metric_failed", "not_evaluated": "no_expectation"}.get(status)
        out.append(Score(spec.id, status, value, spec.threshold, reason))  # type: ignore[arg-type]
    return out


def result(
    outcomes: Mapping[str, Sequence[tuple[SampleTrace, Sequence[Score]]]] | None = None,
    *,
    options: Mapping[str, Any] | None = None,
    case_ids: Sequence[str] = ("weather", "greeting", "booking"),
    **kwargs: Any,
) -> dict[str, Any]:
    """``build_result`` for :func:`eval_set` (every case passing unless ``outcomes`` says otherwise)."""
    outcomes = outcomes or {}
    samples = []
    for ident in case_ids:
        samples += list(outcomes.get(ident, [(trace(ident), scores())]))
    return build_result(
        eval_set(case_ids),
        METRICS,
        dict(options or {}),
        samples,
        agent=AGENT,
        started_at=STARTED,
        finished_at=FINISHED,
        **kwargs,
    )


def roundtrip(value: Any) -> Any:
    """``value`` as a file would give it back."""
    return json.loads(json.dumps(value))


def demo_result(*, worse: bool = False) -> dict[str, Any]:
    """A realistic result for the screenshot: six cases, three samples, three metrics."""
    ids = ["weather-paris", "weather-tokyo", "book-flight", "cancel-booking", "greeting", "refund-policy"]
    specs = metric_specs(
        [
            {"id": "response", "criterion": "response_match", "threshold": 0.7},
            {"id": "trajectory", "criterion": "trajectory_in_order", "threshold": 1.0},
            {"id": "exact", "criterion": "exact_response", "threshold": 1.0},
        ]
    )
    samples: list[tuple[SampleTrace, list[Score]]] = []
    for c, ident in enumerate(ids):
        for n in range(3):
            bad = (c + n) % 4 == 3 or (worse and c == 1)
            tools = ("search_flights", "cancel") if bad else ("get_weather",)
            turn = TurnTrace("t1", f"Answer {ident} #{n}", tuple(ToolUse(t) for t in tools), duration_ms=120.0)
            if c == 5 and n == 2:
                samples.append(
                    (SampleTrace(ident, n, (), {"reason": "provider_failed", "type": "ProviderHttpError"}), [])
                )
                continue
            match = round(0.62 + 0.07 * ((c * 3 + n) % 6), 2)
            samples.append(
                (
                    SampleTrace(ident, n, (turn,), duration_ms=240.0),
                    [
                        Score("response", "passed" if match >= 0.7 else "failed", match, 0.7),
                        Score("trajectory", "failed" if bad else "passed", 0.0 if bad else 1.0, 1.0),
                        Score("exact", "passed" if not bad else "failed", 0.0 if bad else 1.0, 1.0),
                    ],
                )
            )
    return build_result(
        eval_set(ids, set_id="travel-assistant"),
        specs,
        {"samples": 3, "sample_pass_rate_threshold": 0.6, "min_successful_samples": 2, "pass_rate_threshold": 0.8},
        samples,
        agent=AGENT,
        started_at=STARTED,
        finished_at=FINISHED,
    )
