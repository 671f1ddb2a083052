"""Scoring samples: the response and trajectory criteria, custom metrics, the accounting rules of
``score_sample`` and ``check_metric_config``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk_actors.errors import ValidationError
from adk_actors.evaluation.criteria import (
    args_match,
    check_metric_config,
    rouge1_f,
    score_sample,
    tokens,
    trajectory_diff,
    trajectory_matches,
)
from adk_actors.evaluation.model import EvalCase, EvalTurn, MetricSpec, SampleTrace, ToolUse, TurnTrace
from adk_actors.secrets import Secret

from .e1_metrics import SECRET_VALUE

M = "actor_tests.evaluation.e1_metrics"
SETTINGS = settings(database=None, max_examples=150, deadline=None)


def _case(*turns: EvalTurn) -> EvalCase:
    return EvalCase(id="c", turns=turns)


def _turn(ident: str = "t1", *, response: str | None = None, tools: list[ToolUse] | None = None) -> EvalTurn:
    return EvalTurn(
        id=ident, input="q", expected_response=response, expected_tool_uses=None if tools is None else tuple(tools)
    )


def _trace(*turns: TurnTrace, error: dict[str, str] | None = None) -> SampleTrace:
    return SampleTrace(case_id="c", sample=0, turns=turns, error=error)


def _spec(criterion: str, threshold: float = 1.0, ident: str = "m", scope: str | None = None, **config: Any):
    extra = {"scope": scope} if scope else {}
    return MetricSpec(id=ident, criterion=criterion, threshold=threshold, config=config, **extra)  # type: ignore[arg-type]


def _one(case: EvalCase, trace: SampleTrace, spec: MetricSpec):
    (score,) = score_sample(case, trace, [spec])
    return score


def tu(name: str, **args: Any) -> ToolUse:
    return ToolUse(name, args)


# ---- response criteria ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("normalization", "expected", "actual", "score"),
    [
        ("exact", "Sunny.", "Sunny.", 1.0),
        ("exact", "Sunny.", " Sunny.\n", 0.0),
        ("strip", "Sunny.", " Sunny.\n", 1.0),
        ("strip", "Sunny.", "sunny.", 0.0),
        ("casefold", "STRASSE", " straße ", 1.0),
        ("casefold", "Sunny.", "Sunny!", 0.0),
        (None, "Sunny.", "\tSunny.  ", 1.0),  # default strip
    ],
)
def test_exact_response_normalizations(normalization, expected, actual, score):
    config = {"normalization": normalization} if normalization else {}
    result = _one(_case(_turn(response=expected)), _trace(TurnTrace("t1", actual)), _spec("exact_response", **config))
    assert result.score == score and result.status == ("passed" if score == 1.0 else "failed")
    assert result.details == {"turns": [{"turn_id": "t1", "score": score}]}


@pytest.mark.parametrize(
    ("reference", "candidate", "value"),
    [
        ("the cat sat on the mat", "the cat sat on the mat", 1.0),
        ("the cat sat on the mat", "the cat sat on a mat", 5 / 6),
        ("the cat was found under the bed", "the cat was under the bed", 2 * (6 / 6) * (6 / 7) / (6 / 6 + 6 / 7)),
        ("Sunny, 25 degrees!", "sunny 25 DEGREES", 1.0),
        ("alpha beta", "gamma delta", 0.0),
        ("", "", 1.0),
        ("", "words", 0.0),
        ("snake_case words", "snake case words", 1.0),
        ("Zürich café", "zürich CAFÉ", 1.0),
    ],
)
def test_rouge1_known_values(reference, candidate, value):
    assert rouge1_f(reference, candidate) == pytest.approx(value)


def test_rouge1_tokenization_is_lowercase_letter_and_digit_runs():
    assert tokens("It's 25°C — sunny_today!") == ["it", "s", "25", "c", "sunny", "today"]


def test_response_match_uses_the_threshold_and_averages_turns():
    case = _case(_turn("a", response="the cat sat on the mat"), _turn("b", response="alpha beta"), _turn("c"))
    trace = _trace(TurnTrace("a", "the cat sat on a mat"), TurnTrace("b", "alpha beta"), TurnTrace("c", "x"))
    result = _one(case, trace, _spec("response_match", threshold=0.9))
    assert result.score == pytest.approx((5 / 6 + 1.0) / 2)
    assert result.status == "passed"
    assert [t["turn_id"] for t in result.details["turns"]] == ["a", "b"]  # turn c has no expectation
    assert _one(case, trace, _spec("response_match", threshold=0.95)).status == "failed"


texts = st.text(alphabet=st.sampled_from("ab cAB.,é1"), max_size=30)


@SETTINGS
@given(a=texts, b=texts)
def test_rouge1_properties(a, b):
    value = rouge1_f(a, b)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(rouge1_f(b, a))  # F1 is symmetric
    assert rouge1_f(a, a) == 1.0
    assert rouge1_f(a.upper(), b) == pytest.approx(value)
    if set(tokens(a)).isdisjoint(tokens(b)) and (tokens(a) or tokens(b)):
        assert value == 0.0


# ---- trajectory criteria -------------------------------------------------------------------------------------------
W, W_TOKYO, W_PARIS, C = tu("w"), tu("w", city="Tokyo"), tu("w", city="Paris"), tu("c")
W_TOKYO_DAYS = tu("w", city="Tokyo", days=3)

TRAJECTORY_TABLE = [
    # expected, actual, args, {criterion: matches}
    ([W_TOKYO, C], [W_TOKYO, C], "exact", dict(exact=True, in_order=True, any_order=True, subset=True)),
    ([W_TOKYO, C], [C, W_TOKYO], "exact", dict(exact=False, in_order=False, any_order=True, subset=True)),
    ([W_TOKYO, C], [W_TOKYO, W_PARIS, C], "exact", dict(exact=False, in_order=True, any_order=False, subset=True)),
    ([W_TOKYO, C], [C, W_PARIS, W_TOKYO], "exact", dict(exact=False, in_order=False, any_order=False, subset=True)),
    ([W_TOKYO, C], [W_TOKYO], "exact", dict(exact=False, in_order=False, any_order=False, subset=False)),
    ([W_TOKYO], [W_PARIS], "exact", dict(exact=False, in_order=False, any_order=False, subset=False)),
    ([W_TOKYO], [W_PARIS], "ignore", dict(exact=True, in_order=True, any_order=True, subset=True)),
    ([W_TOKYO], [W_TOKYO_DAYS], "exact", dict(exact=False, in_order=False, any_order=False, subset=False)),
    ([W_TOKYO], [W_TOKYO_DAYS], "subset", dict(exact=True, in_order=True, any_order=True, subset=True)),
    ([W_TOKYO_DAYS], [W_TOKYO], "subset", dict(exact=False, in_order=False, any_order=False, subset=False)),
    ([], [], "exact", dict(exact=True, in_order=True, any_order=True, subset=True)),
    ([], [C], "exact", dict(exact=False, in_order=True, any_order=False, subset=True)),
    ([W, W], [W], "exact", dict(exact=False, in_order=False, any_order=False, subset=False)),
    # A greedy pairing would give the wider expectation the only call that fits the narrower one.
    ([W, W_TOKYO], [W_TOKYO_DAYS, W_PARIS], "subset", dict(exact=False, in_order=False, any_order=True, subset=True)),
]


@pytest.mark.parametrize(("expected", "actual", "args", "outcomes"), TRAJECTORY_TABLE)
def test_trajectory_criteria_table(expected, actual, args, outcomes):
    for name, matches in outcomes.items():
        criterion = f"trajectory_{name}"
        assert trajectory_matches(criterion, expected, actual, args) is matches, criterion
        result = _one(
            _case(_turn(tools=expected)), _trace(TurnTrace("t1", tool_uses=tuple(actual))), _spec(criterion, args=args)
        )
        assert result.score == (1.0 if matches else 0.0)
        assert result.status == ("passed" if matches else "failed")


def test_args_matching_is_json_equality_and_recursive_subset():
    assert args_match({"n": 1}, {"n": 1.0}, "exact")
    assert not args_match({"n": True}, {"n": 1}, "exact")
    assert not args_match({"n": 1}, {"n": "1"}, "exact")
    assert args_match({"o": {"a": 1}}, {"o": {"a": 1, "b": 2}, "x": 0}, "subset")
    assert not args_match({"o": {"a": 1}}, {"o": {"a": 1, "b": 2}, "x": 0}, "exact")
    assert args_match({"l": [{"a": 1}]}, {"l": [{"a": 1, "b": 2}]}, "subset")
    assert not args_match({"l": [{"a": 1}]}, {"l": [{"a": 1}, {"a": 2}]}, "subset")
    assert args_match({"anything": 1}, {}, "ignore")


def test_a_failed_trajectory_turn_carries_a_bounded_name_diff():
    expected = [W_TOKYO, C]
    actual = [W_PARIS] + [tu(f"extra_{i}") for i in range(40)]
    case = _case(_turn(tools=expected))
    result = _one(case, _trace(TurnTrace("t1", tool_uses=tuple(actual))), _spec("trajectory_exact"))
    (turn,) = result.details["turns"]
    assert turn["missing"] == ["w", "c"]
    assert turn["unexpected"][:2] == ["w", "extra_0"] and len(turn["unexpected"]) == 16
    reordered = trajectory_diff([W_TOKYO, C], [C, W_TOKYO], "exact")
    assert reordered == {"order_differs": True}


names = st.sampled_from(["a", "b", "c"])
calls = st.builds(lambda n, v: ToolUse(n, {} if v is None else {"v": v}), names, st.none() | st.integers(0, 2))
call_lists = st.lists(calls, max_size=6)
modes = st.sampled_from(["exact", "subset", "ignore"])


@SETTINGS
@given(expected=call_lists, actual=call_lists, mode=modes)
def test_trajectory_criteria_imply_each_other(expected, actual, mode):
    exact, in_order, any_order, subset = (
        trajectory_matches(f"trajectory_{c}", expected, actual, mode)
        for c in ("exact", "in_order", "any_order", "subset")
    )
    if exact:
        assert in_order and any_order
    if in_order or any_order:
        assert subset
    if in_order and len(expected) == len(actual):
        assert exact
    if any_order:
        assert len(expected) == len(actual)
    # Everything matches itself; ignoring arguments only ever helps.
    assert trajectory_matches("trajectory_exact", actual, actual, mode)
    for c in ("exact", "in_order", "any_order", "subset"):
        if trajectory_matches(f"trajectory_{c}", expected, actual, mode):
            assert trajectory_matches(f"trajectory_{c}", expected, actual, "ignore")


@SETTINGS
@given(expected=call_lists, actual=call_lists)
def test_any_order_is_multiset_equality_with_exact_args(expected, actual):
    def key(use: ToolUse) -> str:
        return json.dumps([use.name, use.args], sort_keys=True)

    same = sorted(map(key, expected)) == sorted(map(key, actual))
    assert trajectory_matches("trajectory_any_order", expected, actual, "exact") is same


# ---- accounting ----------------------------------------------------------------------------------------------------
def test_one_score_per_metric_in_order_with_ids_and_thresholds():
    case = _case(_turn(response="hi", tools=[]))
    specs = [_spec("exact_response", ident="x", threshold=0.5), _spec("trajectory_exact", ident="y", threshold=1.0)]
    scores = score_sample(case, _trace(TurnTrace("t1", "hi")), specs)
    assert [(s.metric_id, s.threshold, s.status) for s in scores] == [("x", 0.5, "passed"), ("y", 1.0, "passed")]


def test_a_failed_sample_is_not_evaluated_by_every_metric():
    specs = [_spec("exact_response", ident="x"), _spec("llm_judge", ident="j", scope="case")]
    scores = score_sample(_case(_turn(response="hi")), _trace(error={"reason": "timeout", "type": "AskTimeout"}), specs)
    assert [(s.status, s.reason, s.score) for s in scores] == [("not_evaluated", "sample_failed", None)] * 2


def test_no_applicable_turn_is_not_evaluated_no_expectation():
    case = _case(_turn(response="hi"))
    result = _one(case, _trace(TurnTrace("t1", "hi")), _spec("trajectory_subset"))
    assert (result.status, result.reason, result.score) == ("not_evaluated", "no_expectation", None)


def test_a_turn_that_failed_or_did_not_run_scores_zero():
    case = _case(_turn("a", response="x"), _turn("b", response="y"), _turn("c", response="z"))
    trace = _trace(TurnTrace("a", "x"), TurnTrace("b", error={"reason": "provider_error", "type": "ProviderError"}))
    result = _one(case, trace, _spec("exact_response", threshold=0.3))
    assert result.score == pytest.approx(1 / 3) and result.status == "passed"
    assert result.details["turns"] == [
        {"turn_id": "a", "score": 1.0},
        {"turn_id": "b", "score": 0.0, "error": "provider_error"},
        {"turn_id": "c", "score": 0.0, "error": "turn_missing"},
    ]


# ---- custom metrics ------------------------------------------------------------------------------------------------
def test_custom_turn_and_case_metrics():
    case = _case(_turn("a", response="one two three"), _turn("b"))
    trace = _trace(TurnTrace("a", "one two", tool_uses=(C, C)), TurnTrace("b", "x y z", tool_uses=(W,)))
    turn = _one(case, trace, _spec("custom", threshold=0.5, function=f"{M}:word_count_ratio"))
    assert turn.score == pytest.approx((2 / 3 + 1.0) / 2) and turn.status == "passed"
    assert turn.details["turns"][0] == {"turn_id": "a", "score": pytest.approx(2 / 3), "details": {"words": 2}}
    whole = _one(case, trace, _spec("custom", threshold=3, scope="case", function=f"{M}:tool_count"))
    assert (whole.score, whole.status) == (3.0, "passed")
    judge_kind = MetricSpec(id="k", criterion="custom", kind="judge", config={"function": f"{M}:constant_half"})
    assert _one(case, trace, judge_kind).score == 0.5


@pytest.mark.parametrize(
    ("function", "scope", "type_tag"),
    [
        ("raises", "turn", "RuntimeError"),
        ("raises_adk", "case", "tool_unavailable"),
        ("not_a_number", "turn", "invalid_score"),
        ("nan", "turn", "invalid_score"),
        ("boolean", "turn", "invalid_score"),
        ("bad_details", "turn", "invalid_details"),
        ("huge_details", "turn", "invalid_details"),
        ("NOT_CALLABLE", "turn", "TypeError"),
        ("missing_function", "turn", "AttributeError"),
    ],
)
def test_a_failing_custom_metric_is_an_error_never_a_pass(function, scope, type_tag):
    spec = _spec("custom", threshold=0.0, scope=scope, function=f"{M}:{function}")
    result = _one(_case(_turn()), _trace(TurnTrace("t1", "r")), spec)
    assert (result.status, result.reason, result.score) == ("error", "metric_failed", None)
    assert result.details == {"type": type_tag}
    assert SECRET_VALUE not in json.dumps(result.to_dict())


def test_secrets_never_reach_custom_details():
    Secret(SECRET_VALUE)  # a configured secret: registered for scrubbing wherever it shows up
    result = _one(_case(_turn()), _trace(TurnTrace("t1", "r")), _spec("custom", function=f"{M}:secret_details"))
    details = result.details["turns"][0]["details"]
    assert details["api_key"] == "[REDACTED]" and details["nested"]["auth_token"] == "[REDACTED]"
    assert SECRET_VALUE not in json.dumps(result.to_dict())


# ---- config checks -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "path"),
    [
        (_spec("exact_response", normalization="lower"), "$.config.normalization"),
        (_spec("exact_response", other=1), "$.config.other"),
        (_spec("response_match", threshold=1.5), "$.threshold"),
        (_spec("response_match", n=2), "$.config.n"),
        (_spec("trajectory_in_order", args="fuzzy"), "$.config.args"),
        (_spec("custom"), "$.config.function"),
        (_spec("custom", function="not a name"), "$.config.function"),
        (_spec("custom", function="actor_tests.evaluation.no_such_module:f"), "$.config.function"),
        (_spec("custom", function=f"{M}:missing_function"), "$.config.function"),
        (_spec("custom", function=f"{M}:NOT_CALLABLE"), "$.config.function"),
        (
            MetricSpec(id="m", criterion="custom", config={"function": f"{M}:tool_count", "scope": "case"}),
            "$.config.scope",
        ),
        (_spec("llm_judge", scope="case"), "$.config.rubric"),
    ],
)
def test_check_metric_config_refuses_bad_configs(spec, path):
    with pytest.raises(ValidationError) as info:
        check_metric_config(spec)
    assert info.value.reason == "invalid_metric"
    assert info.value.details["path"] == path and info.value.details["metric"] == "m"


def test_check_metric_config_accepts_good_configs():
    for spec in [
        _spec("exact_response", normalization="casefold"),
        _spec("response_match", threshold=0.8),
        _spec("trajectory_subset", args="subset"),
        _spec("custom", threshold=7, function=f"{M}:word_count_ratio"),
        MetricSpec(id="m", criterion="custom", scope="case", config={"function": f"{M}:tool_count", "scope": "case"}),
    ]:
        check_metric_config(spec)


def test_an_unchecked_bad_config_scores_as_an_error():
    result = _one(_case(_turn(response="x")), _trace(TurnTrace("t1", "x")), _spec("exact_response", normalization=1))
    assert (result.status, result.reason, result.details) == ("error", "metric_failed", {"type": "invalid_metric"})
