"""Scoring one sample: the built-in criteria, custom metric functions and the dispatch to the LLM judge.

:func:`score_sample` gives one :class:`~adk_actors.evaluation.model.Score` per metric, in the metrics' order:

* a failed sample (``trace.error`` set) is ``not_evaluated`` / ``sample_failed`` for every metric;
* a **turn** metric is scored on each turn that holds its expectation (``expected_response`` for the response
  criteria, ``expected_tool_uses`` for the trajectory criteria; a custom turn metric scores every turn); a turn
  whose trace has an error (or is missing) scores 0.0; the sample's score is the mean over those turns, and
  ``details["turns"]`` lists ``{"turn_id", "score"}`` per scored turn (plus a bounded diff for trajectory turns
  that failed); no applicable turn is ``not_evaluated`` / ``no_expectation``;
* a **case** metric (``llm_judge``, a custom case function) is scored once on the whole sample;
* ``passed`` iff score >= threshold; a metric or judge that raises or answers malformed is ``error``
  (``metric_failed`` / ``judge_failed``, details ``{"type": <exception type or reason tag>}``): never a pass, and
  never the exception's message.

Criteria (config in ``MetricSpec.config``):

* ``exact_response`` ``{"normalization": "exact"|"strip"|"casefold"}`` (default ``strip``: surrounding whitespace
  ignored; ``casefold`` also ignores case): 1.0 when equal, else 0.0.
* ``response_match``: ROUGE-1 F1 between the expected and the actual response (see :func:`rouge1_f`).
* ``trajectory_exact`` (same calls in the same order), ``trajectory_in_order`` (the expected calls are a
  subsequence of the actual ones), ``trajectory_any_order`` (the same calls as a multiset, any order),
  ``trajectory_subset`` (the expected calls are a sub-multiset of the actual ones); ``{"args": "exact"|"subset"|
  "ignore"}`` (default ``exact``) compares arguments equal, expected ⊆ actual recursively, or not at all. 1.0 or
  0.0 per turn, as google-adk's ``tool_trajectory_avg_score``.
* ``custom`` ``{"function": "pkg.module:name", "scope"?: "turn"|"case"}``: a turn function
  ``fn(turn: EvalTurn, trace: TurnTrace)`` or a case function ``fn(case: EvalCase, trace: SampleTrace)`` returning
  a finite number or ``(number, details_dict)``. Custom functions are **trusted code**: they are imported and run
  in the evaluating process, with its rights. The scope is the spec's ``scope``; a ``scope`` in the config must
  agree with it.
* ``llm_judge``: the rubric judge (:mod:`adk_actors.evaluation.judge`).
"""

from __future__ import annotations

import importlib
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from adk_actors.content.json_values import copy_json
from adk_actors.errors import AdkError, ValidationError
from adk_actors.evaluation import judge as judge_mod
from adk_actors.evaluation.model import (
    ARG_MATCHES,
    MAX_TURNS,
    TRAJECTORY_CRITERIA,
    EvalCase,
    EvalTurn,
    MetricSpec,
    SampleTrace,
    Score,
    ToolUse,
    TurnTrace,
)
from adk_actors.secrets import prune_secrets

__all__ = [
    "MAX_CUSTOM_DETAILS_BYTES",
    "MAX_DIFF_NAMES",
    "NORMALIZATIONS",
    "args_match",
    "check_metric_config",
    "normalize",
    "rouge1_f",
    "score_sample",
    "tokens",
    "trajectory_diff",
    "trajectory_matches",
]

NORMALIZATIONS: Final = ("exact", "strip", "casefold")
MAX_DIFF_NAMES: Final = 16
"""Tool names listed per ``missing`` / ``unexpected`` list of a failed trajectory turn."""
MAX_CUSTOM_DETAILS_BYTES: Final = 4096
"""A custom function's details, as canonical JSON."""
_MAX_NAME_CHARS = 128
_FUNCTION_RE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_TOKEN_RE = re.compile(r"[^\W_]+")

JudgeCallable = Callable[[dict[str, Any]], Any]
"""An injected judge: the request dict in, the verdict (a ``{"score", "rationale"}`` mapping or its JSON text) out."""


class _MetricFailed(Exception):
    """A metric could not score (a structural tag, never content)."""

    def __init__(self, tag: str) -> None:
        super().__init__(tag)
        self.tag = tag


# ---- config --------------------------------------------------------------------------------------------------------
def _bad(spec: MetricSpec, path: str, rule: str) -> ValidationError:
    return ValidationError(
        f"invalid metric: {rule}", reason="invalid_metric", details={"metric": spec.id, "path": path, "rule": rule}
    )


def _only(spec: MetricSpec, allowed: frozenset[str]) -> None:
    unknown = sorted(str(k)[:64] for k in spec.config if k not in allowed)
    if unknown:
        raise _bad(spec, f"$.config.{unknown[0]}", "unknown key")


def _choice(spec: MetricSpec, key: str, options: Sequence[str], default: str) -> str:
    value = spec.config.get(key, default)
    if value not in options:
        raise _bad(spec, f"$.config.{key}", f"one of {', '.join(options)}")
    return str(value)


@dataclass(frozen=True, slots=True)
class _Custom:
    function: str
    scope: str


def _settings(spec: MetricSpec) -> Any:
    """The criterion's parsed config.

    Raises:
        ValidationError: reason ``invalid_metric``.
    """
    criterion = spec.criterion
    if criterion != "custom" and not 0.0 <= spec.threshold <= 1.0:
        raise _bad(spec, "$.threshold", "a built-in criterion's threshold is between 0 and 1")
    if criterion == "exact_response":
        _only(spec, frozenset({"normalization"}))
        return _choice(spec, "normalization", NORMALIZATIONS, "strip")
    if criterion == "response_match":
        _only(spec, frozenset())
        return None
    if criterion in TRAJECTORY_CRITERIA:
        _only(spec, frozenset({"args"}))
        return _choice(spec, "args", ARG_MATCHES, "exact")
    if criterion == "llm_judge":
        try:
            return judge_mod.judge_config(spec.config)
        except ValidationError as err:
            raise _bad(spec, str(err.details.get("path", "$.config")), str(err.details.get("rule", ""))) from None
    if criterion == "custom":
        _only(spec, frozenset({"function", "scope"}))
        function = spec.config.get("function")
        if not isinstance(function, str) or not _FUNCTION_RE.fullmatch(function):
            raise _bad(spec, "$.config.function", "an importable name 'package.module:function'")
        scope = spec.config.get("scope", spec.scope)
        if scope != spec.scope:
            raise _bad(spec, "$.config.scope", "the config's scope must agree with the metric's scope")
        return _Custom(function=function, scope=spec.scope)
    raise _bad(spec, "$.criterion", "a known criterion")


def _resolve(function: str) -> Callable[..., Any]:
    module_name, _, attr = function.partition(":")
    target: Any = importlib.import_module(module_name)
    for name in attr.split("."):
        target = getattr(target, name)
    if not callable(target):
        raise TypeError("not callable")
    return target


def check_metric_config(spec: MetricSpec) -> None:
    """Validate a metric's criterion config (and threshold range) before anything runs: imports a custom
    function (trusted code: importing runs its module) and validates the judge's provider config (no HTTP).

    Raises:
        ValidationError: reason ``invalid_metric``, details ``metric``, ``path`` and ``rule``.
    """
    settings = _settings(spec)
    if isinstance(settings, _Custom):
        try:
            _resolve(settings.function)
        except Exception:  # any failure to import means the same thing to the caller
            raise _bad(spec, "$.config.function", "an importable callable 'package.module:function'") from None


# ---- response criteria ---------------------------------------------------------------------------------------------
def normalize(text: str, mode: str) -> str:
    """``exact``: unchanged; ``strip``: surrounding whitespace removed; ``casefold``: stripped and casefolded."""
    if mode == "exact":
        return text
    if mode == "strip":
        return text.strip()
    return text.strip().casefold()


def tokens(text: str) -> list[str]:
    """ROUGE-1 tokens: the text lowercased, then its maximal runs of Unicode letters and digits (punctuation,
    whitespace and underscores separate tokens; no stemming, no stop words)."""
    return _TOKEN_RE.findall(text.lower())


def rouge1_f(reference: str, candidate: str) -> float:
    """ROUGE-1 F1 of ``candidate`` against ``reference`` over :func:`tokens`: with ``overlap`` the clipped count of
    shared unigrams, precision = overlap / candidate tokens, recall = overlap / reference tokens, F1 their harmonic
    mean. Two texts without tokens score 1.0; one without tokens scores 0.0."""
    ref, cand = Counter(tokens(reference)), Counter(tokens(candidate))
    if not ref and not cand:
        return 1.0
    overlap = sum((ref & cand).values())
    if overlap == 0:
        return 0.0
    precision = overlap / sum(cand.values())
    recall = overlap / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


# ---- trajectory criteria -------------------------------------------------------------------------------------------
def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _json_subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(k in actual and _json_subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list | tuple) and isinstance(actual, list | tuple):
        return len(expected) == len(actual) and all(_json_subset(x, y) for x, y in zip(expected, actual, strict=True))
    return _json_equal(expected, actual)


def args_match(expected: Mapping[str, Any], actual: Mapping[str, Any], mode: str) -> bool:
    """``exact``: JSON-equal (``1 == 1.0``, ``true != 1``); ``subset``: every expected key is in ``actual`` with a
    matching value, recursively (lists match item by item, same length); ``ignore``: always."""
    if mode == "ignore":
        return True
    if mode == "subset":
        return _json_subset(dict(expected), dict(actual))
    return _json_equal(dict(expected), dict(actual))


def _calls_match(expected: ToolUse, actual: ToolUse, mode: str) -> bool:
    return expected.name == actual.name and args_match(expected.args, actual.args, mode)


def _matching(expected: Sequence[ToolUse], actual: Sequence[ToolUse], mode: str) -> dict[int, int]:
    """A maximum matching expected index -> actual index (augmenting paths: with ``subset`` arguments a greedy
    pairing can miss a matching that exists)."""
    edges = [[j for j, a in enumerate(actual) if _calls_match(e, a, mode)] for e in expected]
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(expected)):
        augment(i, set())
    return {i: j for j, i in owner.items()}


def _in_order(expected: Sequence[ToolUse], actual: Sequence[ToolUse], mode: str) -> int:
    """How many expected calls match, in order, a subsequence of the actual ones (greedy earliest match is
    optimal for a subsequence)."""
    found = 0
    for call in actual:
        if found < len(expected) and _calls_match(expected[found], call, mode):
            found += 1
    return found


def trajectory_matches(criterion: str, expected: Sequence[ToolUse], actual: Sequence[ToolUse], mode: str) -> bool:
    """Whether ``actual`` satisfies ``expected`` under a trajectory criterion and an argument mode."""
    if criterion == "trajectory_exact":
        return len(expected) == len(actual) and all(
            _calls_match(e, a, mode) for e, a in zip(expected, actual, strict=True)
        )
    if criterion == "trajectory_in_order":
        return _in_order(expected, actual, mode) == len(expected)
    if criterion == "trajectory_any_order":
        return len(expected) == len(actual) and len(_matching(expected, actual, mode)) == len(expected)
    if criterion == "trajectory_subset":
        return len(_matching(expected, actual, mode)) == len(expected)
    raise ValueError(criterion)


def _names(calls: Sequence[ToolUse]) -> list[str]:
    return [c.name[:_MAX_NAME_CHARS] for c in calls[:MAX_DIFF_NAMES]]


def trajectory_diff(expected: Sequence[ToolUse], actual: Sequence[ToolUse], mode: str) -> dict[str, Any]:
    """A bounded diff of names: ``missing`` (expected calls no actual call matches), ``unexpected`` (actual calls no
    expected call matches) and ``order_differs`` when every call matches but not in the expected order."""
    pairs = _matching(expected, actual, mode)
    used = set(pairs.values())
    missing = [e for i, e in enumerate(expected) if i not in pairs]
    unexpected = [a for j, a in enumerate(actual) if j not in used]
    diff: dict[str, Any] = {}
    if missing:
        diff["missing"] = _names(missing)
    if unexpected:
        diff["unexpected"] = _names(unexpected)
    if not missing and not unexpected:
        diff["order_differs"] = True
    return diff


# ---- scoring -------------------------------------------------------------------------------------------------------
def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _MetricFailed("invalid_score")
    return float(value)


def _custom_result(result: Any) -> tuple[float, dict[str, Any]]:
    details: Any = {}
    if isinstance(result, tuple):
        if len(result) != 2 or not isinstance(result[1], Mapping):
            raise _MetricFailed("invalid_score")
        result, details = result
    score = _number(result)
    try:
        copied, _ = copy_json(dict(details), max_bytes=MAX_CUSTOM_DETAILS_BYTES, max_depth=8)
    except ValidationError:
        raise _MetricFailed("invalid_details") from None
    return score, copied


def _error_type(exc: BaseException) -> str:
    if isinstance(exc, AdkError):
        return exc.reason
    return type(exc).__name__[:64]


def _applies(spec: MetricSpec, turn: EvalTurn) -> bool:
    if spec.criterion in ("exact_response", "response_match"):
        return turn.expected_response is not None
    if spec.criterion in TRAJECTORY_CRITERIA:
        return turn.expected_tool_uses is not None
    return True


def _turn_score(spec: MetricSpec, settings: Any, turn: EvalTurn, trace: TurnTrace) -> tuple[float, dict[str, Any]]:
    criterion = spec.criterion
    if criterion == "exact_response":
        expected = normalize(turn.expected_response or "", settings)
        return (1.0 if normalize(trace.response, settings) == expected else 0.0), {}
    if criterion == "response_match":
        return rouge1_f(turn.expected_response or "", trace.response), {}
    if criterion in TRAJECTORY_CRITERIA:
        expected_calls = turn.expected_tool_uses or ()
        if trajectory_matches(criterion, expected_calls, trace.tool_uses, settings):
            return 1.0, {}
        return 0.0, trajectory_diff(expected_calls, trace.tool_uses, settings)
    function = _resolve(settings.function)
    score, details = _custom_result(function(turn, trace))
    return score, ({"details": details} if details else {})


def _verdict(spec: MetricSpec, score: float, details: dict[str, Any]) -> Score:
    status: Literal["passed", "failed"] = "passed" if score >= spec.threshold else "failed"
    return Score(spec.id, status, score=score, threshold=spec.threshold, details=prune_secrets(details))


def _score_turns(spec: MetricSpec, settings: Any, case: EvalCase, trace: SampleTrace) -> Score:
    traces = {t.turn_id: t for t in trace.turns}
    entries: list[dict[str, Any]] = []
    for turn in case.turns[:MAX_TURNS]:
        if not _applies(spec, turn):
            continue
        turn_trace = traces.get(turn.id)
        if turn_trace is None or turn_trace.error is not None:
            reason = "turn_missing" if turn_trace is None else str((turn_trace.error or {}).get("reason", "error"))
            entries.append({"turn_id": turn.id, "score": 0.0, "error": reason[:64]})
            continue
        score, extra = _turn_score(spec, settings, turn, turn_trace)
        entries.append({"turn_id": turn.id, "score": score, **extra})
    if not entries:
        return Score(spec.id, "not_evaluated", threshold=spec.threshold, reason="no_expectation")
    mean = sum(e["score"] for e in entries) / len(entries)
    if not math.isfinite(mean):
        raise _MetricFailed("invalid_score")
    return _verdict(spec, mean, {"turns": entries})


def _score_one(spec: MetricSpec, case: EvalCase, trace: SampleTrace, judge: JudgeCallable | None) -> Score:
    if trace.error is not None:
        return Score(spec.id, "not_evaluated", threshold=spec.threshold, reason="sample_failed")
    try:
        settings = _settings(spec)
    except ValidationError:
        return Score(
            spec.id, "error", threshold=spec.threshold, reason="metric_failed", details={"type": "invalid_metric"}
        )
    if spec.criterion == "llm_judge":
        return judge_mod.run_judge(spec, settings, case, trace, judge)
    try:
        if spec.scope == "case":
            function = _resolve(settings.function)
            score, details = _custom_result(function(case, trace))
            return _verdict(spec, score, {"details": details} if details else {})
        return _score_turns(spec, settings, case, trace)
    except _MetricFailed as failed:
        tag = failed.tag
    except Exception as exc:  # a metric's failure is its score's status, never the caller's crash
        tag = _error_type(exc)
    return Score(spec.id, "error", threshold=spec.threshold, reason="metric_failed", details={"type": tag})


def score_sample(
    case: EvalCase, trace: SampleTrace, metrics: Sequence[MetricSpec], *, judge: JudgeCallable | None = None
) -> list[Score]:
    """Score one sample of ``case``: one :class:`Score` per metric, in the order of ``metrics`` (see the module
    docstring for the rules). ``judge`` replaces the provider call of every ``llm_judge`` metric (tests, apps).

    Never raises for a metric's own failure: that is the score's ``error`` status.
    """
    return [_score_one(spec, case, trace, judge) for spec in metrics]
