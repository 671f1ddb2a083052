"""The AdkError tree: reason tags, JSON-safe details, pickling of every class, the docstring drawing."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

import adk_actors.errors as errors
from adk_actors.errors import AdkError, error_from_dict, json_safe


def all_error_classes() -> list[type[AdkError]]:
    found, stack = [], [AdkError]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return sorted(set(found), key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_round_trips_through_pickle_with_keyword_only_arguments(cls: type[AdkError]) -> None:
    err = cls("something failed", reason="custom_reason", details={"agent": "a", "limit": 3})
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert (back.reason, back.message, back.details) == ("custom_reason", "something failed",
                                                         {"agent": "a", "limit": 3})
    assert back == err
    default = pickle.loads(pickle.dumps(cls()))
    assert default.reason == cls.default_reason


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_is_drawn_in_the_module_docstring(cls: type[AdkError]) -> None:
    assert cls.__name__ in (errors.__doc__ or "")


def test_details_are_json_safe_and_never_carry_object_reprs() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "SECRET-REPR"

    err = AdkError("x", details={"obj": Opaque(), "nan": float("nan"), "nested": {"t": (1, 2)}})
    text = json.dumps(err.details, allow_nan=False)
    assert "SECRET-REPR" not in text
    assert err.details == {"obj": "<Opaque>", "nan": "nan", "nested": {"t": [1, 2]}}


def test_error_dict_round_trip_keeps_type_and_reason() -> None:
    err = errors.SessionNotFound("no session", details={"session_id": "s1"})
    back = error_from_dict(json.loads(json.dumps(err.to_dict())))
    assert isinstance(back, errors.SessionNotFound)
    assert back.reason == "not_found" and back.details == {"session_id": "s1"}
    unknown = error_from_dict({"type": "NoSuchClass", "reason": "weird"})
    assert type(unknown) is AdkError and unknown.reason == "weird"


def test_subclass_relationships_follow_the_tree() -> None:
    assert issubclass(errors.RateLimited, errors.ProviderHttpError)
    assert issubclass(errors.ProviderHttpError, errors.ProviderError)
    assert issubclass(errors.AskTimeout, errors.RuntimeFailure)
    assert issubclass(errors.SessionNotFound, errors.SessionError)
    assert errors.SessionNotFound().reason == "not_found"
    assert errors.RunNotFound().reason == "not_found"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20)


@given(json_values)
def test_json_safe_output_always_serialises_strictly(value: object) -> None:
    json.dumps(json_safe(value), allow_nan=False)
