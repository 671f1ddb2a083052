"""Reading google-adk's eval sets (``.evalset.json``, snake_case and camelCase) and older test files
(``.test.json``), and picking the format of any eval set."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from google.genai import types as genai
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_actors.errors import ValidationError
from adk_actors.evaluation.adk_format import MAX_NOTES, detect_format, load_adk_eval_set, load_eval_set
from adk_actors.evaluation.model import EvalSet, ToolUse

DATA = Path(__file__).parent / "data"
MARK = "Zq9-hostile-marker"


def _load(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def test_the_google_adk_eval_set_file_maps_case_by_case():
    built = load_eval_set(DATA / "weather.evalset.json")
    assert (built.id, built.source, built.version) == ("weather_agent_set", "google-adk", "1")
    assert built.description.startswith("Weather lookups")
    assert built.metadata["name"] == "Weather agent regression set"
    tokyo, two_cities, small_talk = built.cases
    (turn,) = tokyo.turns
    assert (turn.id, turn.input, turn.expected_response) == (
        "e-7c1f-0001",
        "What is the weather in Tokyo?",
        "The weather in Tokyo is sunny.",
    )
    assert turn.expected_tool_uses == (ToolUse("get_weather", {"city": "Tokyo"}),)
    assert tokyo.metadata == {"session_input": {"app_name": "weather_app", "user_id": "user"}}
    assert two_cities.initial_state == {"preferred_unit": "celsius"}
    assert [t.id for t in two_cities.turns] == ["e-7c1f-0002", "e-7c1f-0003"]
    assert [u.name for u in two_cities.turns[1].expected_tool_uses or ()] == ["get_weather", "convert_units"]
    # An empty invocation_id becomes t<i>; an empty intermediate_data expects no tool call (google-adk's reading).
    assert small_talk.turns[0].id == "t1" and small_talk.turns[0].expected_tool_uses == ()


def test_what_does_not_map_is_listed_in_metadata_unmapped():
    notes = load_eval_set(DATA / "weather.evalset.json").metadata["unmapped"]
    assert notes == [
        "$.eval_cases[0].conversation[0].intermediate_data.tool_responses: not compared (1 items)",
        "$.eval_cases[1].rubrics: not mapped",
        "$.eval_cases[1].conversation[1].intermediate_data.intermediate_responses: not compared (1 items)",
    ]


def test_camel_case_keys_events_media_and_thoughts_map_like_snake_case():
    built = load_eval_set(DATA / "weather_camel.evalset.json")
    (case,) = built.cases
    (turn,) = case.turns
    assert turn.input == {
        "schema_version": 1,
        "parts": [
            {"type": "text", "text": "What weather does this photo show?"},
            {"type": "inline_data", "mime_type": "image/png", "data": "iVBORw0KGgo="},
        ],
    }
    assert turn.expected_response == "The photo shows a clear sky."  # the thought part is not the answer
    assert turn.expected_tool_uses == (ToolUse("describe_image", {"detail": "high"}),)
    assert case.initial_state == {"city": "Lyon"}
    assert case.metadata == {"session_input": {"app_name": "weather_app", "user_id": "u-42"}}
    assert "unmapped" not in built.metadata


def test_the_older_test_file_is_one_multi_turn_case_named_after_the_file():
    built = load_eval_set(DATA / "weather.test.json")
    assert (built.id, built.source) == ("weather", "google-adk")
    (case,) = built.cases
    assert case.id == "weather" and [t.id for t in case.turns] == ["t1", "t2"]
    assert case.turns[0].expected_tool_uses == (ToolUse("get_weather", {"city": "Tokyo"}),)
    assert case.turns[1].expected_tool_uses == ()
    assert case.turns[1].expected_response == "I can look up the weather for any city."
    with_session = load_adk_eval_set(
        _load("weather.test.json"), set_id="legacy", initial_session={"state": {"u": 1}, "app_name": "a"}
    )
    assert with_session.id == "legacy" and with_session.cases[0].initial_state == {"u": 1}


def test_the_older_named_case_list_keeps_case_names_and_sessions():
    rows = _load("weather.test.json")
    data = [
        {"name": "first", "data": rows[:1], "initial_session": {"state": {"k": "v"}, "app_name": "a", "user_id": "u"}},
        {"name": "second", "data": rows[1:]},
    ]
    built = load_adk_eval_set(data, set_id="named")
    assert [c.id for c in built.cases] == ["first", "second"]
    assert built.cases[0].initial_state == {"k": "v"}


def test_files_written_by_google_genai_models_load_in_both_spellings():
    """The content and function calls of an eval set, built with google-genai's own models and dumped as google-adk
    dumps them (field names, or camelCase aliases), read the same."""
    question = genai.Content(role="user", parts=[genai.Part.from_text(text="Weather in Rome?")])
    answer = genai.Content(role="model", parts=[genai.Part.from_text(text="Rome: warm.")])
    call = genai.FunctionCall(name="get_weather", args={"city": "Rome", "days": [1, 2]}, id="x1")
    sets = []
    for by_alias in (False, True):
        dump: Any = lambda value, by_alias=by_alias: value.model_dump(mode="json", exclude_none=True, by_alias=by_alias)  # noqa: E731
        invocation = {"invocation_id": "i1", "user_content": dump(question), "final_response": dump(answer)}
        invocation["intermediate_data"] = {"tool_uses": [dump(call)]}
        sets.append(
            load_eval_set({"eval_set_id": "genai", "eval_cases": [{"eval_id": "c", "conversation": [invocation]}]})
        )
    assert sets[0] == sets[1]
    (turn,) = sets[0].cases[0].turns
    assert (turn.input, turn.expected_response) == ("Weather in Rome?", "Rome: warm.")
    assert turn.expected_tool_uses == (ToolUse("get_weather", {"city": "Rome", "days": [1, 2]}),)


def test_the_hand_written_files_are_valid_google_genai_content():
    data = _load("weather.evalset.json")
    for case in data["eval_cases"]:
        for invocation in case["conversation"]:
            genai.Content.model_validate(invocation["user_content"])
            genai.Content.model_validate(invocation["final_response"])
            for use in invocation["intermediate_data"].get("tool_uses", []):
                genai.FunctionCall.model_validate(use)


def test_format_detection():
    assert detect_format({"schema_version": 2}) == "adk_actors"
    assert detect_format({"evalSetId": "x"}) == "google-adk"
    assert detect_format([]) == "google-adk-test"
    ours = load_eval_set({"schema_version": 1, "id": "s", "cases": [{"id": "c", "input": "hi"}]})
    assert ours.source == "adk_actors/v1"
    with pytest.raises(ValidationError) as info:
        load_eval_set({"something": "else"})
    assert info.value.reason == "invalid_eval_set"
    with pytest.raises(ValidationError):
        load_adk_eval_set({"schema_version": 2, "id": "s", "cases": []})


def _base() -> dict[str, Any]:
    return _load("weather.evalset.json")


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d.pop("eval_set_id"), "$.eval_set_id"),
        (lambda d: d.update(eval_cases=[]), "$.eval_cases"),
        (lambda d: d.update(evalCases=d["eval_cases"]), "$.eval_cases"),
        (lambda d: d["eval_cases"][1].update(eval_id="tokyo_forecast"), "$.eval_cases[1].eval_id"),
        (lambda d: d["eval_cases"][0].pop("conversation"), "$.eval_cases[0].conversation"),
        (lambda d: d["eval_cases"][0]["conversation"][0].pop("user_content"), "$.eval_cases[0].conversation[0]"),
        (
            lambda d: d["eval_cases"][0]["conversation"][0]["user_content"].update(parts=[{"text": ""}]),
            "$.eval_cases[0].conversation[0].user_content",
        ),
        (
            lambda d: d["eval_cases"][0]["conversation"][0]["intermediate_data"]["tool_uses"][0].update(args=[1]),
            "$.eval_cases[0].conversation[0].intermediate_data.tool_uses[0].args",
        ),
        (
            lambda d: d["eval_cases"][0]["conversation"][0]["intermediate_data"]["tool_uses"][0].update(name=""),
            "$.eval_cases[0].conversation[0].intermediate_data.tool_uses[0].name",
        ),
        (
            lambda d: d["eval_cases"][1]["conversation"][1].update(invocation_id="e-7c1f-0002"),
            "$.eval_cases[1].conversation",
        ),
        (lambda d: d["eval_cases"][0]["session_input"].update(state=[1]), "$.eval_cases[0].session_input.state"),
        (
            lambda d: d["eval_cases"][0]["conversation"][0]["user_content"]["parts"][0].update(inline_data={}),
            "$.eval_cases[0].conversation[0].user_content.parts[0]",
        ),
    ],
)
def test_broken_google_adk_sets_name_google_adks_path(mutate, path):
    data = _base()
    mutate(data)
    with pytest.raises(ValidationError) as info:
        load_adk_eval_set(data)
    assert info.value.reason == "invalid_eval_set"
    assert str(info.value.details["path"]).startswith(path), info.value.details


def test_user_simulation_cases_are_skipped_with_a_note_and_unknown_keys_are_listed():
    data = _base()
    data["eval_cases"][2] = {"eval_id": "simulated", "conversation_scenario": {"starting_prompt": "hi"}}
    data["eval_cases"][0]["brandNewField"] = 1
    built = load_adk_eval_set(data)
    assert [c.id for c in built.cases] == ["tokyo_forecast", "two_cities_in_a_row"]
    notes = built.metadata["unmapped"]
    assert "$.eval_cases[2]: a conversation_scenario (user simulation) case cannot run here, skipped" in notes
    assert "$.eval_cases[0].brandNewField: unknown key, ignored" in notes


def test_notes_are_bounded():
    data = _base()
    data["eval_cases"][0].update({f"k{i}": i for i in range(500)})
    notes = load_adk_eval_set(data).metadata["unmapped"]
    assert len(notes) == MAX_NOTES and notes[-1].startswith("... and ")


def test_a_file_that_is_not_json_or_too_deep_is_invalid(tmp_path):
    bad = tmp_path / "bad.evalset.json"
    bad.write_text("{not json")
    with pytest.raises(ValidationError) as info:
        load_eval_set(bad)
    assert info.value.reason == "invalid_eval_set"
    bad.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(ValidationError):
        load_eval_set(bad)
    with pytest.raises(ValidationError):
        load_eval_set(tmp_path / "missing.json")


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        out.append((*prefix, key))
        out.extend(_paths(item, (*prefix, key)))
    return out


hostile = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10) | st.just(MARK),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
) | st.sampled_from([float("nan"), "\ud800", {1: 2}, object(), "x" * 300_000])


@settings(database=None, max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hostile_values_anywhere_in_a_google_adk_set_are_invalid_eval_set_or_mapped(data):
    for name in ("weather.evalset.json", "weather_camel.evalset.json", "weather.test.json"):
        base = _load(name)
        path = data.draw(st.sampled_from(_paths(base)))
        mutated = copy.deepcopy(base)
        target = mutated
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = data.draw(hostile)
        try:
            built = load_adk_eval_set(mutated)
        except ValidationError as err:
            assert err.reason == "invalid_eval_set" and MARK not in json.dumps(err.details)
        else:
            assert isinstance(built, EvalSet) and built.source == "google-adk"
