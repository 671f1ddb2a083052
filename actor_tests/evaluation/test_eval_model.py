"""The eval-set model's validators against hostile JSON: every bad value is ``ValidationError(invalid_eval_set)``
(or ``invalid_metric``) with a structural path and rule, never another exception and never the value itself."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_actors.errors import ValidationError
from adk_actors.evaluation.model import MAX_INPUT_BYTES, MAX_TURNS, EvalSet, MetricSpec, metric_specs

MARK = "Zq9-hostile-marker"
"""Planted in hostile values: it must never come back in an error."""

SETTINGS = settings(database=None, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

V2: dict[str, Any] = {
    "schema_version": 2,
    "id": "weather",
    "version": "3",
    "cases": [
        {
            "id": "tokyo",
            "initial_state": {"unit": "celsius"},
            "turns": [
                {
                    "id": "ask",
                    "input": "What is the weather in Tokyo?",
                    "expected_response": "Sunny.",
                    "expected_tool_uses": [{"name": "get_weather", "args": {"city": "Tokyo"}}],
                },
                {"id": "thanks", "input": {"schema_version": 1, "parts": [{"type": "text", "text": "Thanks"}]}},
            ],
        }
    ],
}

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | st.just(MARK)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
hostile = (
    json_values
    | st.just(float("nan"))
    | st.just("x" * (MAX_INPUT_BYTES + 1))
    | st.just({1: "non-str key"})
    | st.just(object())
    | st.just(b"bytes")
    | st.just("\ud800")
    | st.just("nul\x00" + MARK)
)


def _deep(depth: int) -> Any:
    value: Any = MARK
    for _ in range(depth):
        value = [value]
    return value


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every container member's path in ``value``."""
    out = []
    if isinstance(value, dict):
        for key, item in value.items():
            out.append((*prefix, key))
            out.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.append((*prefix, i))
            out.extend(_paths(item, (*prefix, i)))
    return out


def _set_at(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    out = copy.deepcopy(value)
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return out


def _assert_invalid(data: Any, reason: str = "invalid_eval_set") -> ValidationError:
    with pytest.raises(ValidationError) as info:
        EvalSet.from_dict(data) if reason == "invalid_eval_set" else metric_specs(data)
    err = info.value
    assert err.reason == reason
    assert set(err.details) >= {"path", "rule"} and str(err.details["path"]).startswith("$")
    assert MARK not in json.dumps(err.details) and MARK not in str(err)
    return err


def test_a_valid_v2_set_round_trips_and_its_fingerprint_is_stable():
    built = EvalSet.from_dict(V2)
    assert built.source == "adk_actors/v2"
    assert [t.id for t in built.cases[0].turns] == ["ask", "thanks"]
    assert EvalSet.from_dict(built.to_dict()) == built
    assert built.fingerprint() == EvalSet.from_dict(json.loads(json.dumps(V2))).fingerprint()
    assert built.fingerprint().startswith("sha256:")


def test_v1_cases_are_single_turn_cases():
    built = EvalSet.from_dict(
        {"schema_version": 1, "id": "s", "cases": [{"id": "c", "input": "hi", "expected_response": "hello"}]}
    )
    assert built.source == "adk_actors/v1"
    (turn,) = built.cases[0].turns
    assert (turn.id, turn.input, turn.expected_response, turn.expected_tool_uses) == ("c", "hi", "hello", None)


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d.update(schema_version=3), "$.schema_version"),
        (lambda d: d.update(schema_version=True), "$.schema_version"),
        (lambda d: d.update(extra=1), "$.extra"),
        (lambda d: d.update(cases=[]), "$.cases"),
        (lambda d: d["cases"].append(copy.deepcopy(d["cases"][0])), "$.cases[1].id"),
        (lambda d: d["cases"][0]["turns"].append(copy.deepcopy(d["cases"][0]["turns"][0])), "$.cases[0].turns"),
        (lambda d: d["cases"][0]["turns"][0].update(input=""), "$.cases[0].turns[0].input"),
        (lambda d: d["cases"][0]["turns"][0].update(input={"parts": []}), "$.cases[0].turns[0].input"),
        (lambda d: d["cases"][0]["turns"][0].update(expected_tool_uses={"name": "x"}), "$.cases[0].turns[0]"),
        (lambda d: d["cases"][0]["turns"][0]["expected_tool_uses"][0].update(args=[1]), "$.cases[0].turns[0]"),
        (lambda d: d["cases"][0].update(id="a\nb"), "$.cases[0].id"),
        (lambda d: d["cases"][0].update(id="x" * 257), "$.cases[0].id"),
        (lambda d: d["cases"][0].update(turns=[d["cases"][0]["turns"][0]] * (MAX_TURNS + 1)), "$.cases[0].turns"),
        (lambda d: d["cases"][0].update(metadata=_deep(200)), "$"),
        (lambda d: d["cases"][0].update(initial_state={"k": float("inf")}), "$"),
    ],
)
def test_broken_sets_name_the_path_and_the_rule(mutate, path):
    data = copy.deepcopy(V2)
    mutate(data)
    err = _assert_invalid(data)
    assert str(err.details["path"]).startswith(path)


def test_a_huge_input_is_refused_by_its_bound():
    data = copy.deepcopy(V2)
    data["cases"][0]["turns"][0]["input"] = MARK + "x" * MAX_INPUT_BYTES
    assert _assert_invalid(data).details["path"] == "$.cases[0].turns[0].input"


@SETTINGS
@given(data=st.data())
def test_any_hostile_value_anywhere_is_invalid_eval_set_or_accepted(data):
    """Replace one member of a valid set with a hostile value: the validator accepts it (when the model allows such a
    value there) or refuses it as invalid_eval_set, never another exception."""
    paths = _paths(V2)
    path = data.draw(st.sampled_from(paths))
    value = data.draw(hostile)
    mutated = _set_at(V2, path, value)
    try:
        built = EvalSet.from_dict(mutated)
    except ValidationError as err:
        assert err.reason == "invalid_eval_set"
        assert MARK not in json.dumps(err.details)
    else:
        assert EvalSet.from_dict(built.to_dict()) == built


@SETTINGS
@given(value=hostile)
def test_a_hostile_top_level_value_is_invalid_eval_set(value):
    _assert_invalid(value)


@SETTINGS
@given(value=hostile, key=st.sampled_from(["id", "criterion", "threshold", "config", "kind", "scope"]))
def test_hostile_metric_specs_are_invalid_metric(value, key):
    spec = {"id": "m", "criterion": "exact_response", key: value}
    try:
        (parsed,) = metric_specs([spec])
    except ValidationError as err:
        assert err.reason == "invalid_metric" and MARK not in json.dumps(err.details)
    else:
        assert isinstance(parsed, MetricSpec)


def test_metric_ids_are_unique_and_fixed_scopes_hold():
    _assert_invalid([{"id": "m", "criterion": "exact_response"}] * 2, "invalid_metric")
    _assert_invalid([{"id": "m", "criterion": "llm_judge", "scope": "turn"}], "invalid_metric")
    _assert_invalid([{"id": "m", "criterion": "llm_judge", "kind": "metric"}], "invalid_metric")
    (judge,) = metric_specs([{"id": "j", "criterion": "llm_judge"}])
    assert (judge.kind, judge.scope) == ("judge", "case")
