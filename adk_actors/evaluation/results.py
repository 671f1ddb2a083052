"""Evaluation results: the versioned result JSON, its validation, the comparison of two results, and Markdown.

:func:`build_result` turns the traces and scores of a finished (or cancelled) evaluation into the result document
(schema ``adk_actors.eval_result``, version 1) and decides every status and the gate:

* a **sample** is ``error`` when its trace has an error; else ``failed`` when any score failed or errored; else
  ``passed`` when at least one score passed; else (nothing scored) ``passed`` only with
  ``empty_criteria="pass"``, otherwise ``failed`` with reason ``no_criteria_scored``. A sample that never started
  (cancelled, overall timeout) is ``not_evaluated`` with reason ``not_run``.
* a **case** is ``not_evaluated`` when all its samples are; ``error`` when fewer than ``min_successful_samples``
  samples ran to a verdict (passed or failed); else ``passed`` iff its sample pass rate reaches
  ``sample_pass_rate_threshold``.
* the **set** is ``cancelled`` when the evaluation was cancelled; else ``error`` when any case is ``error`` or
  ``not_evaluated``; else ``passed`` iff the case pass rate reaches ``pass_rate_threshold``.

:func:`validate_result` checks a loaded result (and :func:`validate_comparison` a comparison) before anything reads
it, :func:`compare` says what regressed between a baseline and a current result, and :func:`render_markdown`
writes either document as deterministic Markdown. The HTML report is :mod:`adk_actors.evaluation.report`.

Errors are :class:`~adk_actors.errors.ValidationError`: ``invalid_result`` (details ``path`` and ``rule``, never the
value), ``report_too_large``, ``invalid_value`` for comparison options.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from adk_actors.content.json_values import copy_json
from adk_actors.errors import ValidationError
from adk_actors.evaluation.model import (
    MAX_CASES,
    MAX_ID_CHARS,
    MAX_METRICS,
    MAX_TOOL_USES,
    MAX_TURNS,
    SCORE_STATUSES,
    EvalSet,
    MetricSpec,
    SampleTrace,
    Score,
    TurnTrace,
)

__all__ = [
    "CASE_STATUSES",
    "COMPARISON_SCHEMA",
    "MAX_RESPONSE_CHARS",
    "MAX_RESULT_BYTES",
    "MAX_SAMPLES",
    "RESULT_SCHEMA",
    "SAMPLE_STATUSES",
    "SCHEMA_VERSION",
    "SET_STATUSES",
    "build_result",
    "compare",
    "render_markdown",
    "trajectory_diffs",
    "validate_comparison",
    "validate_result",
]

RESULT_SCHEMA: Final = "adk_actors.eval_result"
COMPARISON_SCHEMA: Final = "adk_actors.eval_comparison"
SCHEMA_VERSION: Final = 1
MAX_RESPONSE_CHARS: Final = 4096
"""A captured response is cut to this many characters in a result."""
MAX_RESULT_BYTES: Final = 64 * 1024 * 1024
"""The largest result (or comparison) :func:`validate_result` reads, as JSON."""
MAX_SAMPLES: Final = 100
"""Samples of one case."""
MAX_TAG_CHARS: Final = 128
"""A reason, error type, criterion or model name."""
SAMPLE_STATUSES: Final = ("passed", "failed", "error", "not_evaluated")
CASE_STATUSES: Final = ("passed", "failed", "error", "not_evaluated")
SET_STATUSES: Final = ("passed", "failed", "error", "cancelled")

_DEFAULT_OPTIONS: Final[Mapping[str, Any]] = {
    "samples": 1,
    "pass_rate_threshold": 1.0,
    "sample_pass_rate_threshold": 1.0,
    "min_successful_samples": None,
    "empty_criteria": "fail",
    "capture_responses": True,
    "capture_tool_args": False,
    "max_report_bytes": MAX_RESULT_BYTES,
}
_EPSILON: Final = 1e-9
"""Slack of the comparison's float tests (a drop of exactly the allowed amount passes)."""


def _invalid(path: str, rule: str) -> ValidationError:
    return ValidationError(f"invalid result: {rule}", reason="invalid_result", details={"path": path, "rule": rule})


# ---- building --------------------------------------------------------------------------------------------------------
def _options(options: Any) -> dict[str, Any]:
    """The evaluation options as a plain dict (an ``EvalOptions`` dataclass, or a mapping of its fields)."""
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        values = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    elif isinstance(options, Mapping):
        values = dict(options)
    else:
        raise ValidationError(
            "options must be EvalOptions", reason="invalid_eval_options", details={"type": type(options).__name__}
        )
    return {**_DEFAULT_OPTIONS, **values}


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _tag(value: Any) -> str:
    return str(value)[:MAX_TAG_CHARS]


def _score_dict(score: Score) -> dict[str, Any]:
    out = score.to_dict()
    if "score" in out and not math.isfinite(out["score"]):
        del out["score"]
    return out


def _turn_dict(turn: TurnTrace, expected: Any, opts: Mapping[str, Any]) -> dict[str, Any]:
    out = turn.to_dict()
    out["response"] = turn.response[:MAX_RESPONSE_CHARS] if opts["capture_responses"] else ""
    if not opts["capture_tool_args"]:
        out["tool_uses"] = [{"name": use.name, "args": {}} for use in turn.tool_uses]
    if out.get("error") is not None:
        out["error"] = {k: _tag(v) for k, v in out["error"].items() if k in ("reason", "type")}
    if expected is not None:
        # What the trajectory criteria compared against (names only): the report's trajectory diffs need it.
        out["expected_tools"] = [use.name for use in expected]
    return out


def _sample_status(error: Any, scores: Sequence[Score], empty_criteria: str) -> tuple[str, str | None]:
    if error is not None:
        return "error", _tag(error.get("reason", "sample_failed")) if isinstance(error, Mapping) else "sample_failed"
    statuses = {s.status for s in scores}
    if statuses & {"failed", "error"}:
        return "failed", "criteria_failed"
    if "passed" in statuses:
        return "passed", None
    if empty_criteria == "pass":
        return "passed", None
    return "failed", "no_criteria_scored"


def _aligned(scores: Sequence[Score], metrics: Sequence[MetricSpec]) -> list[Score]:
    """One score per metric, in the metrics' order (a metric without a score is ``not_evaluated``)."""
    by_id = {s.metric_id: s for s in scores}
    return [
        by_id.get(spec.id) or Score(spec.id, "not_evaluated", threshold=spec.threshold, reason="not_scored")
        for spec in metrics
    ]


def _sample(
    trace: SampleTrace,
    scores: Sequence[Score],
    metrics: Sequence[MetricSpec],
    expected: Mapping[str, Any],
    opts: Mapping[str, Any],
) -> dict[str, Any]:
    aligned = _aligned(scores, metrics)
    status, reason = _sample_status(trace.error, aligned, str(opts["empty_criteria"]))
    error = None
    if trace.error is not None:
        error = {"reason": _tag(trace.error.get("reason", "sample_failed")), "type": _tag(trace.error.get("type", ""))}
    return {
        "sample": trace.sample,
        "status": status,
        "reason": reason,
        "error": error,
        "duration_ms": round(max(0.0, trace.duration_ms), 3),
        "scores": [_score_dict(s) for s in aligned],
        "turns": [_turn_dict(t, expected.get(t.turn_id), opts) for t in trace.turns[:MAX_TURNS]],
    }


def _not_run(sample: int, metrics: Sequence[MetricSpec]) -> dict[str, Any]:
    return {
        "sample": sample,
        "status": "not_evaluated",
        "reason": "not_run",
        "error": None,
        "duration_ms": 0.0,
        "scores": [
            Score(spec.id, "not_evaluated", threshold=spec.threshold, reason="not_run").to_dict() for spec in metrics
        ],
        "turns": [],
    }


def _case(case_id: str, samples: list[dict[str, Any]], opts: Mapping[str, Any]) -> dict[str, Any]:
    statuses = [s["status"] for s in samples]
    passed, failed = statuses.count("passed"), statuses.count("failed")
    ran = passed + failed
    pass_rate = passed / ran if ran else None
    wanted = opts["min_successful_samples"]
    if wanted is None:
        wanted = opts["samples"]
    if all(s == "not_evaluated" for s in statuses):
        status, pass_rate = "not_evaluated", None
    elif ran == 0 or ran < wanted:
        status = "error"
    else:
        status = "passed" if pass_rate is not None and pass_rate >= opts["sample_pass_rate_threshold"] else "failed"
    return {"case_id": case_id, "status": status, "pass_rate": pass_rate, "samples": samples}


def _metric_summary(index: int, spec: MetricSpec, cases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    counts = dict.fromkeys(SCORE_STATUSES, 0)
    values: list[float] = []
    for case in cases:
        for sample in case["samples"]:
            score = sample["scores"][index]
            counts[score["status"]] += 1
            if score["status"] in ("passed", "failed") and score.get("score") is not None:
                values.append(float(score["score"]))
    decided = counts["passed"] + counts["failed"]
    return {
        "metric_id": spec.id,
        "criterion": spec.criterion,
        "kind": spec.kind,
        "threshold": spec.threshold,
        "mean_score": round(math.fsum(values) / len(values), 6) if values else None,
        "pass_rate": round(counts["passed"] / decided, 6) if decided else None,
        "counts": counts,
    }


def build_result(
    eval_set: EvalSet,
    metrics: Sequence[MetricSpec],
    options: Any,
    samples: Sequence[tuple[SampleTrace, Sequence[Score]]],
    *,
    agent: Mapping[str, str],
    started_at: float,
    finished_at: float,
    cancelled: bool = False,
    not_run: Sequence[tuple[str, int]] = (),
) -> dict[str, Any]:
    """The result document of one evaluation (see the module docstring for the statuses and the gate).

    Args:
        eval_set: the set that ran.
        metrics: the metrics, in the order each sample's scores are reported.
        options: the ``EvalOptions`` (or a mapping of its fields).
        samples: each finished sample's trace and scores (any order).
        agent: ``{"name", "model"}`` of the evaluated agent.
        started_at: wall-clock start (epoch seconds).
        finished_at: wall-clock end (epoch seconds).
        cancelled: whether the evaluation was cancelled.
        not_run: ``(case_id, sample)`` pairs never started: ``not_evaluated``, reason ``not_run``.

    Returns:
        Plain JSON data: cases in set order, samples ascending.

    Raises:
        ValidationError: ``invalid_result`` for a sample of a case not in the set or reported twice;
            ``report_too_large`` when the result exceeds ``options.max_report_bytes`` even with responses cut.
    """
    opts = _options(options)
    specs = tuple(metrics)
    slots: dict[str, dict[int, dict[str, Any]]] = {case.id: {} for case in eval_set.cases}
    expected = {
        case.id: {turn.id: turn.expected_tool_uses for turn in case.turns if turn.expected_tool_uses is not None}
        for case in eval_set.cases
    }
    for trace, scores in samples:
        slot = slots.get(trace.case_id)
        if slot is None or trace.sample in slot:
            raise _invalid("samples", "each sample belongs to a case of the set and is reported once")
        slot[trace.sample] = _sample(trace, scores, specs, expected[trace.case_id], opts)
    for case_id, sample in not_run:
        slot = slots.get(case_id)
        if slot is None or sample in slot:
            raise _invalid("not_run", "each sample belongs to a case of the set and is reported once")
        slot[sample] = _not_run(sample, specs)
    cases = [_case(case.id, [slots[case.id][n] for n in sorted(slots[case.id])], opts) for case in eval_set.cases]
    counts = {"cases": len(cases), **dict.fromkeys(CASE_STATUSES, 0)}
    for case in cases:
        counts[case["status"]] += 1
    pass_rate = counts["passed"] / len(cases) if cases else 0.0
    if cancelled:
        status = "cancelled"
    elif counts["error"] or counts["not_evaluated"]:
        status = "error"
    else:
        status = "passed" if pass_rate >= opts["pass_rate_threshold"] else "failed"
    result: dict[str, Any] = {
        "schema": RESULT_SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "eval_set": {
            "id": eval_set.id,
            "version": eval_set.version,
            "source": eval_set.source,
            "fingerprint": eval_set.fingerprint(),
            "cases": len(eval_set.cases),
        },
        "agent": {"name": _tag(agent.get("name", "")), "model": _tag(agent.get("model", ""))},
        "metrics": [spec.to_dict() for spec in specs],
        "options": {k: v for k, v in opts.items() if isinstance(v, str | int | float | bool | type(None))},
        "started_at": _iso(started_at),
        "finished_at": _iso(finished_at),
        "duration_ms": round(max(0.0, finished_at - started_at) * 1000, 3),
        "status": status,
        "passed": status == "passed",
        "counts": counts,
        "pass_rate": round(pass_rate, 6),
        "metric_summaries": [_metric_summary(i, spec, cases) for i, spec in enumerate(specs)],
        "cases": [{**case, "pass_rate": _rounded(case["pass_rate"])} for case in cases],
        "truncated": False,
    }
    return _bounded(result, int(opts["max_report_bytes"]))


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode())


def _bounded(result: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """``result`` within ``max_bytes`` of JSON: responses are dropped first (``truncated`` says so)."""
    copy_json(result, field="result")  # JSON-safe (finite floats, str keys) before it is measured or written
    if _size(result) <= max_bytes:
        return result
    for case in result["cases"]:
        for sample in case["samples"]:
            for turn in sample["turns"]:
                turn["response"] = ""
    result["truncated"] = True
    size = _size(result)
    if size > max_bytes:
        raise ValidationError(
            "the result is larger than max_report_bytes",
            reason="report_too_large",
            details={"max_bytes": max_bytes, "bytes": size},
        )
    return result


# ---- validation ------------------------------------------------------------------------------------------------------
class _Check:
    """Shape checks of a loaded document; every failure names its JSON path and rule."""

    @staticmethod
    def obj(value: Any, path: str, required: Sequence[str]) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise _invalid(path, "an object is expected")
        for key in required:
            if key not in value:
                raise _invalid(f"{path}.{key}", "a required key is missing")
        return value

    @staticmethod
    def seq(value: Any, path: str, limit: int) -> list[Any]:
        if not isinstance(value, list):
            raise _invalid(path, "a list is expected")
        if len(value) > limit:
            raise _invalid(path, f"at most {limit} items")
        return value

    @staticmethod
    def text(value: Any, path: str, limit: int, *, empty: bool = True) -> str:
        if not isinstance(value, str) or len(value) > limit or (not empty and not value):
            raise _invalid(path, f"a text of at most {limit} characters")
        return value

    @staticmethod
    def opt_text(value: Any, path: str, limit: int) -> None:
        if value is not None:
            _Check.text(value, path, limit)

    @staticmethod
    def num(value: Any, path: str, *, low: float | None = None, high: float | None = None, null: bool = False) -> None:
        if value is None and null:
            return
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise _invalid(path, "a finite number" + (" or null" if null else ""))
        if (low is not None and value < low) or (high is not None and value > high):
            raise _invalid(path, f"a number in [{low}, {high}]")

    @staticmethod
    def count(value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_CASES * MAX_SAMPLES:
            raise _invalid(path, "a count")
        return value

    @staticmethod
    def one_of(value: Any, path: str, allowed: Sequence[str]) -> str:
        if value not in allowed:
            raise _invalid(path, f"one of {', '.join(allowed)}")
        return str(value)


def _loaded(data: Any, what: str, schema: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _invalid("$", "an object is expected")
    if data.get("schema") != schema:
        raise _invalid("$.schema", f"the schema of {what} is {schema}")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise _invalid("$.schema_version", f"schema_version {SCHEMA_VERSION} is supported")
    try:
        copied, _ = copy_json(data, field="$", max_bytes=MAX_RESULT_BYTES)
    except ValidationError as err:
        raise _invalid("$", f"a JSON document of at most {MAX_RESULT_BYTES} bytes ({err.reason})") from None
    return dict(copied)


def _check_score(score: Any, path: str) -> None:
    c = _Check
    c.obj(score, path, ("metric_id", "status"))
    c.text(score["metric_id"], f"{path}.metric_id", MAX_ID_CHARS, empty=False)
    c.one_of(score["status"], f"{path}.status", SCORE_STATUSES)
    c.num(score.get("score"), f"{path}.score", null=True)
    c.num(score.get("threshold", 0.0), f"{path}.threshold")
    c.opt_text(score.get("reason"), f"{path}.reason", MAX_TAG_CHARS)
    if not isinstance(score.get("details", {}), dict):
        raise _invalid(f"{path}.details", "an object is expected")


def _check_turn(turn: Any, path: str) -> None:
    c = _Check
    c.obj(turn, path, ("turn_id",))
    c.text(turn["turn_id"], f"{path}.turn_id", MAX_ID_CHARS, empty=False)
    c.text(turn.get("response", ""), f"{path}.response", MAX_RESPONSE_CHARS)
    for i, use in enumerate(c.seq(turn.get("tool_uses", []), f"{path}.tool_uses", MAX_TOOL_USES)):
        c.obj(use, f"{path}.tool_uses[{i}]", ("name",))
        c.text(use["name"], f"{path}.tool_uses[{i}].name", MAX_ID_CHARS)
    for i, name in enumerate(c.seq(turn.get("expected_tools", []), f"{path}.expected_tools", MAX_TOOL_USES)):
        c.text(name, f"{path}.expected_tools[{i}]", MAX_ID_CHARS)
    if turn.get("error") is not None:
        c.obj(turn["error"], f"{path}.error", ())


def _check_sample(sample: Any, path: str) -> None:
    c = _Check
    c.obj(sample, path, ("sample", "status", "scores"))
    c.count(sample["sample"], f"{path}.sample")
    c.one_of(sample["status"], f"{path}.status", SAMPLE_STATUSES)
    c.opt_text(sample.get("reason"), f"{path}.reason", MAX_TAG_CHARS)
    if sample.get("error") is not None:
        error = c.obj(sample["error"], f"{path}.error", ("reason",))
        c.text(error["reason"], f"{path}.error.reason", MAX_TAG_CHARS)
        c.opt_text(error.get("type"), f"{path}.error.type", MAX_TAG_CHARS)
    c.num(sample.get("duration_ms", 0.0), f"{path}.duration_ms", low=0.0)
    for i, score in enumerate(c.seq(sample["scores"], f"{path}.scores", MAX_METRICS)):
        _check_score(score, f"{path}.scores[{i}]")
    for i, turn in enumerate(c.seq(sample.get("turns", []), f"{path}.turns", MAX_TURNS)):
        _check_turn(turn, f"{path}.turns[{i}]")


def _check_counts(counts: Any, path: str, keys: Sequence[str]) -> None:
    _Check.obj(counts, path, keys)
    for key in keys:
        _Check.count(counts[key], f"{path}.{key}")


def validate_result(data: Any) -> dict[str, Any]:
    """Check a loaded result document: schema and version, shape, value kinds and bounds.

    Returns:
        A copy of ``data`` (safe to keep: the caller's value is not shared).

    Raises:
        ValidationError: ``invalid_result``, details ``path`` and ``rule``.
    """
    c = _Check
    doc = _loaded(data, "a result", RESULT_SCHEMA)
    c.obj(doc, "$", ("eval_set", "agent", "metrics", "status", "passed", "counts", "pass_rate", "cases"))
    eval_set = c.obj(doc["eval_set"], "$.eval_set", ("id",))
    c.text(eval_set["id"], "$.eval_set.id", MAX_ID_CHARS, empty=False)
    for key in ("version", "source", "fingerprint"):
        c.opt_text(eval_set.get(key), f"$.eval_set.{key}", MAX_ID_CHARS)
    agent = c.obj(doc["agent"], "$.agent", ())
    for key in ("name", "model"):
        c.opt_text(agent.get(key), f"$.agent.{key}", MAX_TAG_CHARS)
    for i, metric in enumerate(c.seq(doc["metrics"], "$.metrics", MAX_METRICS)):
        c.obj(metric, f"$.metrics[{i}]", ("id", "criterion"))
        c.text(metric["id"], f"$.metrics[{i}].id", MAX_ID_CHARS, empty=False)
        c.text(metric["criterion"], f"$.metrics[{i}].criterion", MAX_TAG_CHARS)
    c.one_of(doc["status"], "$.status", SET_STATUSES)
    if not isinstance(doc["passed"], bool) or doc["passed"] != (doc["status"] == "passed"):
        raise _invalid("$.passed", "a boolean, true exactly when the status is passed")
    _check_counts(doc["counts"], "$.counts", ("cases", *CASE_STATUSES))
    c.num(doc["pass_rate"], "$.pass_rate", low=0.0, high=1.0)
    for key in ("started_at", "finished_at"):
        c.opt_text(doc.get(key), f"$.{key}", 64)
    c.num(doc.get("duration_ms", 0.0), "$.duration_ms", low=0.0)
    for i, summary in enumerate(c.seq(doc.get("metric_summaries", []), "$.metric_summaries", MAX_METRICS)):
        path = f"$.metric_summaries[{i}]"
        c.obj(summary, path, ("metric_id", "counts"))
        c.text(summary["metric_id"], f"{path}.metric_id", MAX_ID_CHARS, empty=False)
        c.opt_text(summary.get("criterion"), f"{path}.criterion", MAX_TAG_CHARS)
        c.num(summary.get("threshold", 0.0), f"{path}.threshold")
        c.num(summary.get("mean_score"), f"{path}.mean_score", null=True)
        c.num(summary.get("pass_rate"), f"{path}.pass_rate", low=0.0, high=1.0, null=True)
        _check_counts(summary["counts"], f"{path}.counts", SCORE_STATUSES)
    seen: set[str] = set()
    for i, case in enumerate(c.seq(doc["cases"], "$.cases", MAX_CASES)):
        path = f"$.cases[{i}]"
        c.obj(case, path, ("case_id", "status", "samples"))
        case_id = c.text(case["case_id"], f"{path}.case_id", MAX_ID_CHARS, empty=False)
        if case_id in seen:
            raise _invalid(f"{path}.case_id", "case ids are unique")
        seen.add(case_id)
        c.one_of(case["status"], f"{path}.status", CASE_STATUSES)
        c.num(case.get("pass_rate"), f"{path}.pass_rate", low=0.0, high=1.0, null=True)
        for j, sample in enumerate(c.seq(case["samples"], f"{path}.samples", MAX_SAMPLES)):
            _check_sample(sample, f"{path}.samples[{j}]")
    return doc


def validate_comparison(data: Any) -> dict[str, Any]:
    """Check a loaded comparison document (what :func:`compare` returns).

    Raises:
        ValidationError: ``invalid_result``, details ``path`` and ``rule``.
    """
    c = _Check
    doc = _loaded(data, "a comparison", COMPARISON_SCHEMA)
    c.obj(doc, "$", ("passed", "same_set", "pass_rate", "metrics", "cases"))
    for key in ("passed", "same_set"):
        if not isinstance(doc[key], bool):
            raise _invalid(f"$.{key}", "a boolean")
    rates = c.obj(doc["pass_rate"], "$.pass_rate", ("baseline", "current", "drop"))
    c.num(rates["baseline"], "$.pass_rate.baseline", low=0.0, high=1.0)
    c.num(rates["current"], "$.pass_rate.current", low=0.0, high=1.0)
    c.num(rates["drop"], "$.pass_rate.drop", low=-1.0, high=1.0)
    c.num(doc.get("max_pass_rate_drop", 0.0), "$.max_pass_rate_drop", low=0.0, high=1.0)
    for i, metric in enumerate(c.seq(doc["metrics"], "$.metrics", 2 * MAX_METRICS)):
        path = f"$.metrics[{i}]"
        c.obj(metric, path, ("metric_id", "baseline", "current", "delta", "tolerance", "regressed"))
        c.text(metric["metric_id"], f"{path}.metric_id", MAX_ID_CHARS, empty=False)
        for key in ("baseline", "current", "delta"):
            c.num(metric[key], f"{path}.{key}", null=True)
        c.num(metric["tolerance"], f"{path}.tolerance", low=0.0)
        if not isinstance(metric["regressed"], bool):
            raise _invalid(f"{path}.regressed", "a boolean")
    cases = c.obj(doc["cases"], "$.cases", ("regressed", "improved", "added", "removed"))
    for key in ("regressed", "improved", "added", "removed"):
        for i, ident in enumerate(c.seq(cases[key], f"$.cases.{key}", MAX_CASES)):
            c.text(ident, f"$.cases.{key}[{i}]", MAX_ID_CHARS, empty=False)
    sets = doc.get("sets", {})
    c.obj(sets, "$.sets", ())
    for side in ("baseline", "current"):
        if side in sets:
            info = c.obj(sets[side], f"$.sets.{side}", ())
            for key in ("id", "version", "fingerprint", "status", "finished_at"):
                c.opt_text(info.get(key), f"$.sets.{side}.{key}", MAX_ID_CHARS)
    return doc


# ---- comparison ------------------------------------------------------------------------------------------------------
def _tolerances(value: Mapping[str, float]) -> dict[str, float]:
    if not isinstance(value, Mapping) or len(value) > 4 * MAX_METRICS:
        raise ValidationError(
            "metric_tolerances is an object of metric ids", reason="invalid_value", details={"key": "metric_tolerances"}
        )
    out: dict[str, float] = {}
    for key, tol in value.items():
        if (
            not isinstance(key, str)
            or isinstance(tol, bool)
            or not isinstance(tol, int | float)
            or not math.isfinite(tol)
            or tol < 0
        ):
            raise ValidationError(
                "a metric tolerance is a finite number >= 0",
                reason="invalid_value",
                details={"key": "metric_tolerances"},
            )
        out[key] = float(tol)
    return out


def _set_info(result: Mapping[str, Any]) -> dict[str, Any]:
    eval_set = result["eval_set"]
    return {
        "id": eval_set["id"],
        "version": eval_set.get("version"),
        "fingerprint": eval_set.get("fingerprint"),
        "status": result["status"],
        "finished_at": result.get("finished_at"),
    }


def compare(
    baseline: Any,
    current: Any,
    *,
    max_pass_rate_drop: float = 0.0,
    metric_tolerances: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Compare a current result to a baseline result.

    A metric **regressed** when the baseline scored it (a mean score) and the current result scores it lower than
    the baseline by more than its tolerance (default 0), or no longer scores it at all. A case regressed when it
    passed in the baseline and does not now; improved the other way round. The comparison ``passed`` when no
    metric regressed and the pass rate dropped by at most ``max_pass_rate_drop`` (case regressions are listed,
    not gating: the pass-rate drop bounds them).

    Raises:
        ValidationError: ``invalid_result`` for either document; ``invalid_value`` for the options.
    """
    if (
        isinstance(max_pass_rate_drop, bool)
        or not isinstance(max_pass_rate_drop, int | float)
        or not 0.0 <= max_pass_rate_drop <= 1.0
    ):
        raise ValidationError(
            "max_pass_rate_drop is a number in [0, 1]", reason="invalid_value", details={"key": "max_pass_rate_drop"}
        )
    tolerances = _tolerances(metric_tolerances or {})
    base, cur = validate_result(baseline), validate_result(current)
    before = {m["metric_id"]: m.get("mean_score") for m in base.get("metric_summaries", [])}
    after = {m["metric_id"]: m.get("mean_score") for m in cur.get("metric_summaries", [])}
    metrics = []
    for metric_id in [*after, *(k for k in before if k not in after)]:
        old, new = before.get(metric_id), after.get(metric_id)
        tolerance = tolerances.get(metric_id, 0.0)
        delta = None if old is None or new is None else round(new - old, 6)
        regressed = old is not None and (new is None or (delta is not None and delta < -tolerance - _EPSILON))
        metrics.append(
            {
                "metric_id": metric_id,
                "baseline": old,
                "current": new,
                "delta": delta,
                "tolerance": tolerance,
                "regressed": regressed,
            }
        )
    old_cases = {case["case_id"]: case["status"] for case in base["cases"]}
    new_cases = {case["case_id"]: case["status"] for case in cur["cases"]}
    both = [ident for ident in new_cases if ident in old_cases]
    drop = round(float(base["pass_rate"]) - float(cur["pass_rate"]), 6)
    passed = not any(m["regressed"] for m in metrics) and drop <= max_pass_rate_drop + _EPSILON
    return {
        "schema": COMPARISON_SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "passed": passed,
        "same_set": base["eval_set"]["id"] == cur["eval_set"]["id"]
        and base["eval_set"].get("fingerprint") == cur["eval_set"].get("fingerprint"),
        "pass_rate": {"baseline": base["pass_rate"], "current": cur["pass_rate"], "drop": drop},
        "max_pass_rate_drop": float(max_pass_rate_drop),
        "metrics": metrics,
        "cases": {
            "regressed": [i for i in both if old_cases[i] == "passed" and new_cases[i] != "passed"],
            "improved": [i for i in both if old_cases[i] != "passed" and new_cases[i] == "passed"],
            "added": [i for i in new_cases if i not in old_cases],
            "removed": [i for i in old_cases if i not in new_cases],
        },
        "sets": {"baseline": _set_info(base), "current": _set_info(cur)},
    }


# ---- trajectory diffs ------------------------------------------------------------------------------------------------
def trajectory_diffs(result: Mapping[str, Any], *, limit: int = 200) -> list[dict[str, Any]]:
    """The turns of failed or errored samples whose tool names differ from the expected trajectory, as
    ``{"case_id", "sample", "turn_id", "expected": [names], "actual": [names]}`` (at most ``limit``, in result
    order). Only turns with an expectation (``expected_tools``) are compared."""
    diffs: list[dict[str, Any]] = []
    for case in result["cases"]:
        for sample in case["samples"]:
            if sample["status"] not in ("failed", "error"):
                continue
            for turn in sample.get("turns", []):
                if "expected_tools" not in turn:
                    continue
                actual = [use["name"] for use in turn.get("tool_uses", [])]
                if actual != turn["expected_tools"]:
                    diffs.append(
                        {
                            "case_id": case["case_id"],
                            "sample": sample["sample"],
                            "turn_id": turn["turn_id"],
                            "expected": list(turn["expected_tools"]),
                            "actual": actual,
                        }
                    )
                    if len(diffs) >= limit:
                        return diffs
    return diffs


# ---- Markdown --------------------------------------------------------------------------------------------------------
_MD_SPECIAL = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "*": "\\*",
        "_": "\\_",
        "`": "\\`",
        "[": "\\[",
        "]": "\\]",
        "#": "\\#",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
        "\n": " ",
        "\r": " ",
    }
)
_MAX_LISTED: Final = 100
"""Failing cases (and listed ids) a report shows; the rest are counted."""


def _md(text: Any) -> str:
    """Untrusted text as inert Markdown (no markup, no HTML, one line)."""
    return str(text).translate(_MD_SPECIAL)


def _pct(value: Any) -> str:
    return "—" if value is None else f"{float(value) * 100:.1f}%"


def _num(value: Any) -> str:
    return "—" if value is None else f"{float(value):.3f}"


def _signed(value: Any) -> str:
    return "—" if value is None else f"{float(value):+.3f}"


def _names(names: Sequence[str]) -> str:
    return ", ".join(_md(n) for n in names) if names else "(none)"


def render_markdown(document: Any, *, result: Any = None) -> str:
    """A deterministic Markdown report of a result or a comparison (validated first).

    A result: a summary table, a per-metric table, the failing cases with their failing metrics and trajectory
    diffs. A comparison: what regressed first, then the pass rates, the metric deltas and the case changes;
    ``result`` (the current result) appends its report.

    Raises:
        ValidationError: ``invalid_result``.
    """
    if isinstance(document, dict) and document.get("schema") == COMPARISON_SCHEMA:
        text = _comparison_md(validate_comparison(document))
        if result is not None:
            text += "\n" + _result_md(validate_result(result), level=2)
        return text
    return _result_md(validate_result(document))


def _result_md(doc: Mapping[str, Any], *, level: int = 1) -> str:
    h = "#" * level
    counts = doc["counts"]
    lines = [
        f"{h} Evaluation {_md(doc['eval_set']['id'])}: {doc['status'].upper()}",
        "",
        "| | |",
        "|---|---|",
        f"| status | {doc['status']} |",
        f"| eval set | {_md(doc['eval_set']['id'])} version {_md(doc['eval_set'].get('version', ''))} |",
        f"| fingerprint | {_md(doc['eval_set'].get('fingerprint', ''))} |",
        f"| agent | {_md(doc['agent'].get('name', ''))} ({_md(doc['agent'].get('model', '') or 'model unknown')}) |",
        f"| pass rate | {_pct(doc['pass_rate'])} (gate {_pct(doc.get('options', {}).get('pass_rate_threshold'))}) |",
        f"| cases | {counts['cases']}: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} error, "
        f"{counts['not_evaluated']} not evaluated |",
        f"| samples per case | {_md(doc.get('options', {}).get('samples', '—'))} |",
        f"| started | {_md(doc.get('started_at', ''))} |",
        f"| duration | {float(doc.get('duration_ms', 0.0)) / 1000:.3f} s |",
    ]
    if doc.get("truncated"):
        lines.append("| note | responses were cut to keep the result within max_report_bytes |")
    lines += ["", f"{h}# Metrics", ""]
    summaries = doc.get("metric_summaries", [])
    if summaries:
        lines += [
            "| metric | criterion | kind | threshold | mean score | pass rate | passed | failed | error "
            "| not evaluated |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for m in summaries:
            n = m["counts"]
            lines.append(
                f"| {_md(m['metric_id'])} | {_md(m.get('criterion', ''))} | {_md(m.get('kind', ''))} | "
                f"{_num(m.get('threshold'))} | {_num(m.get('mean_score'))} | {_pct(m.get('pass_rate'))} | "
                f"{n['passed']} | {n['failed']} | {n['error']} | {n['not_evaluated']} |"
            )
    else:
        lines.append("No metrics.")
    lines += ["", f"{h}# Cases not passed", ""]
    lines += _failing_md(doc)
    return "\n".join(lines) + "\n"


def _failing_md(doc: Mapping[str, Any]) -> list[str]:
    failing = [case for case in doc["cases"] if case["status"] != "passed"]
    if not failing:
        return ["All cases passed."]
    criteria = {m["id"]: m["criterion"] for m in doc["metrics"]}
    diffs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for diff in trajectory_diffs(doc, limit=10 * _MAX_LISTED):
        diffs.setdefault((diff["case_id"], diff["sample"]), []).append(diff)
    lines: list[str] = []
    for case in failing[:_MAX_LISTED]:
        lines.append(
            f"- case {_md(case['case_id'])}: {case['status']} (sample pass rate {_pct(case.get('pass_rate'))})"
        )
        for sample in case["samples"]:
            if sample["status"] == "passed":
                continue
            why = sample.get("reason") or ""
            if sample.get("error"):
                why = f"{sample['error']['reason']} ({sample['error'].get('type') or 'error'})"
            lines.append(f"  - sample {sample['sample']}: {sample['status']}" + (f", {_md(why)}" if why else ""))
            for score in sample["scores"]:
                if score["status"] not in ("failed", "error"):
                    continue
                got = _num(score.get("score")) if score.get("score") is not None else _md(score.get("reason", ""))
                lines.append(
                    f"    - metric {_md(score['metric_id'])} ({_md(criteria.get(score['metric_id'], ''))}): "
                    f"{score['status']}, {got} (threshold {_num(score.get('threshold'))})"
                )
            for diff in diffs.get((case["case_id"], sample["sample"]), []):
                lines.append(
                    f"    - trajectory of turn {_md(diff['turn_id'])}: expected {_names(diff['expected'])}; "
                    f"actual {_names(diff['actual'])}"
                )
    if len(failing) > _MAX_LISTED:
        lines.append(f"- … and {len(failing) - _MAX_LISTED} more")
    return lines


def _comparison_md(doc: Mapping[str, Any]) -> str:
    rates = doc["pass_rate"]
    allowed = float(doc.get("max_pass_rate_drop", 0.0))
    regressed_metrics = [m for m in doc["metrics"] if m["regressed"]]
    lines = [f"# Evaluation comparison: {'PASSED' if doc['passed'] else 'REGRESSED'}", ""]
    sets = doc.get("sets", {})
    if "baseline" in sets and "current" in sets:
        b, c = sets["baseline"], sets["current"]
        lines.append(
            f"Baseline {_md(b.get('id', ''))} ({_md(b.get('status', ''))}, {_md(b.get('finished_at', ''))}) "
            f"against current {_md(c.get('id', ''))} ({_md(c.get('status', ''))}, {_md(c.get('finished_at', ''))})."
        )
        lines.append("")
    if not doc["same_set"]:
        lines += ["**Warning:** the two results ran different eval sets (id or fingerprint differ).", ""]
    lines += ["## Regressions", ""]
    found = False
    if rates["drop"] > allowed + _EPSILON:
        found = True
        lines.append(f"- pass rate dropped by {_pct(rates['drop'])} (allowed {_pct(allowed)})")
    for m in regressed_metrics:
        found = True
        lines.append(
            f"- metric {_md(m['metric_id'])}: {_num(m['baseline'])} → {_num(m['current'])} "
            f"(delta {_signed(m['delta'])}, tolerance {_num(m['tolerance'])})"
        )
    regressed_cases = doc["cases"]["regressed"]
    if regressed_cases:
        found = True
        shown = ", ".join(_md(i) for i in regressed_cases[:_MAX_LISTED])
        more = f" and {len(regressed_cases) - _MAX_LISTED} more" if len(regressed_cases) > _MAX_LISTED else ""
        lines.append(f"- cases no longer passing: {shown}{more}")
    if not found:
        lines.append("None.")
    lines += [
        "",
        "## Pass rate",
        "",
        "| baseline | current | drop | allowed drop |",
        "|---:|---:|---:|---:|",
        f"| {_pct(rates['baseline'])} | {_pct(rates['current'])} | {_pct(rates['drop'])} | {_pct(allowed)} |",
        "",
        "## Metrics",
        "",
    ]
    if doc["metrics"]:
        lines += ["| metric | baseline | current | delta | tolerance | regressed |", "|---|---:|---:|---:|---:|---|"]
        for m in doc["metrics"]:
            lines.append(
                f"| {_md(m['metric_id'])} | {_num(m['baseline'])} | {_num(m['current'])} | {_signed(m['delta'])} | "
                f"{_num(m['tolerance'])} | {'yes' if m['regressed'] else 'no'} |"
            )
    else:
        lines.append("No metrics.")
    lines += ["", "## Cases", ""]
    for key, label in (("improved", "improved"), ("added", "added"), ("removed", "removed")):
        ids = doc["cases"][key]
        shown = ", ".join(_md(i) for i in ids[:_MAX_LISTED]) if ids else "none"
        more = f" and {len(ids) - _MAX_LISTED} more" if len(ids) > _MAX_LISTED else ""
        lines.append(f"- {label}: {shown}{more}")
    return "\n".join(lines) + "\n"
