"""Custom metric functions for the criteria tests, imported by name (``actor_tests.evaluation.e1_metrics:...``)."""

from __future__ import annotations

from typing import Any

from adk_actors.errors import ToolError
from adk_actors.evaluation.model import EvalCase, EvalTurn, SampleTrace, TurnTrace

SECRET_VALUE = "sk-e1-secret-0123456789"
NOT_CALLABLE = 3


def word_count_ratio(turn: EvalTurn, trace: TurnTrace) -> tuple[float, dict[str, Any]]:
    """1.0 when the response has at least as many words as the expected one."""
    expected = len((turn.expected_response or "").split()) or 1
    got = len(trace.response.split())
    return min(1.0, got / expected), {"words": got}


def constant_half(turn: EvalTurn, trace: TurnTrace) -> float:
    return 0.5


def tool_count(case: EvalCase, trace: SampleTrace) -> float:
    """A case metric: the number of tool calls over the whole sample (not bounded to 0..1)."""
    return float(sum(len(t.tool_uses) for t in trace.turns))


def raises(turn: EvalTurn, trace: TurnTrace) -> float:
    raise RuntimeError(f"boom with {SECRET_VALUE}")


def raises_adk(case: EvalCase, trace: SampleTrace) -> float:
    raise ToolError("tool went away", reason="tool_unavailable")


def not_a_number(turn: EvalTurn, trace: TurnTrace) -> Any:
    return "0.9"


def nan(turn: EvalTurn, trace: TurnTrace) -> float:
    return float("nan")


def boolean(turn: EvalTurn, trace: TurnTrace) -> Any:
    return True


def bad_details(turn: EvalTurn, trace: TurnTrace) -> Any:
    return 1.0, {"value": object()}


def huge_details(turn: EvalTurn, trace: TurnTrace) -> Any:
    return 1.0, {"blob": "x" * 10_000}


def secret_details(turn: EvalTurn, trace: TurnTrace) -> Any:
    return 1.0, {"api_key": "abc", "nested": {"auth_token": "t"}, "note": f"seen {SECRET_VALUE}"}
