"""The evaluation data model: eval sets (what to ask and what to expect), metric specs (how to score), traces (what
the agent did) and scores. Every value is frozen, JSON-safe through ``to_dict`` / ``from_dict``, and bounded; the
validators here are the only way in from JSON (``EvalSet.from_dict`` and :func:`metric_specs`).

An **eval set** (``schema_version`` 2) holds cases; a **case** holds ordered turns run in one fresh session; a
**turn** holds its user input and, optionally, the expected final response and the expected tool uses (its
*trajectory*). Schema version 1 is the single-turn shorthand (a case is one turn: ``input``, ``expected_response``,
``expected_tool_uses``) and is read into the same model. Loading google-adk's files lives in
:mod:`adk_actors.evaluation.adk_format`.

A **sample** is one independent run of a case (a fresh agent and session); a case may be sampled several times. A
sample's **trace** records, per turn, the final response text, the tool uses in call order, and the error if the turn
failed. A **score** is one metric's verdict on one sample: ``passed``, ``failed``, ``error`` (the metric or judge
itself failed: never a pass) or ``not_evaluated`` (nothing to score: the sample failed before it, or the turn has no
expectation for this criterion).

Errors are :class:`~adk_actors.errors.ValidationError` with reason ``invalid_eval_set`` or ``invalid_metric`` and
details naming the JSON path and the rule, never the content.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from adk_actors.content.canonical import canonical_dumps
from adk_actors.content.json_values import copy_json
from adk_actors.errors import ValidationError

__all__ = [
    "ARG_MATCHES",
    "CRITERIA",
    "MAX_CASES",
    "MAX_ID_CHARS",
    "MAX_INPUT_BYTES",
    "MAX_METRICS",
    "MAX_SET_BYTES",
    "MAX_TOOL_USES",
    "MAX_TURNS",
    "SCORE_STATUSES",
    "TRAJECTORY_CRITERIA",
    "EvalCase",
    "EvalSet",
    "EvalTurn",
    "MetricSpec",
    "SampleTrace",
    "Score",
    "ToolUse",
    "TurnTrace",
    "metric_specs",
]

MAX_CASES: Final = 10_000
MAX_TURNS: Final = 64
"""Turns of one case."""
MAX_TOOL_USES: Final = 256
"""Expected (or recorded) tool uses of one turn."""
MAX_ID_CHARS: Final = 256
MAX_INPUT_BYTES: Final = 256 * 1024
"""One turn's input, expected response or expected tool uses, as canonical JSON."""
MAX_SET_BYTES: Final = 64 * 1024 * 1024
"""A whole eval set, as canonical JSON."""
MAX_METRICS: Final = 64
MAX_DEPTH: Final = 32

CRITERIA: Final = (
    "exact_response",
    "response_match",
    "trajectory_exact",
    "trajectory_in_order",
    "trajectory_any_order",
    "trajectory_subset",
    "llm_judge",
    "custom",
)
"""Built-in criteria: response equality, ROUGE-1 F (``response_match``), four trajectory matchers, the rubric LLM
judge, and ``custom`` (a user function, per turn or per case)."""
TRAJECTORY_CRITERIA: Final = frozenset(c for c in CRITERIA if c.startswith("trajectory_"))
ARG_MATCHES: Final = ("exact", "subset", "ignore")
"""How a trajectory criterion compares tool arguments: equal, expected ⊆ actual (recursively), or names only."""
SCORE_STATUSES: Final = ("passed", "failed", "error", "not_evaluated")

_ID = re.compile(r"[^\x00-\x1f\x7f]+")


def _bad(what: str, path: str, rule: str) -> ValidationError:
    reason = "invalid_metric" if what == "metric" else "invalid_eval_set"
    return ValidationError(f"invalid {what}: {rule}", reason=reason, details={"path": path, "rule": rule})


def _check_id(value: Any, path: str, what: str = "eval set") -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS or not _ID.fullmatch(value):
        raise _bad(what, path, f"an id is a non-empty string of at most {MAX_ID_CHARS} printable characters")
    return value


def _check_keys(data: Mapping[str, Any], allowed: frozenset[str], path: str, what: str = "eval set") -> None:
    unknown = sorted(str(k)[:64] for k in data if k not in allowed)
    if unknown:
        raise _bad(what, f"{path}.{unknown[0]}", "unknown key")


def _json(value: Any, path: str, max_bytes: int, what: str = "eval set") -> Any:
    try:
        copied, _ = copy_json(value, field=path, max_bytes=max_bytes, max_depth=MAX_DEPTH)
    except ValidationError as err:
        raise _bad(what, path, f"a JSON value of at most {max_bytes} bytes ({err.reason})") from None
    return copied


def _mapping(value: Any, path: str, what: str = "eval set") -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _bad(what, path, "an object is expected")
    return value


def _sequence(value: Any, path: str, limit: int, what: str = "eval set") -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise _bad(what, path, "a list is expected")
    if len(value) > limit:
        raise _bad(what, path, f"at most {limit} items")
    return value


# ---- the eval set ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ToolUse:
    """One tool call: the function's name and its arguments (a JSON object)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "args": self.args}

    @classmethod
    def from_dict(cls, data: Any, path: str = "tool_use") -> ToolUse:
        data = _mapping(data, path)
        _check_keys(data, frozenset({"name", "args"}), path)
        name = _check_id(data.get("name"), f"{path}.name")
        args = _json(data.get("args", {}), f"{path}.args", MAX_INPUT_BYTES)
        if not isinstance(args, dict):
            raise _bad("eval set", f"{path}.args", "an object is expected")
        return cls(name=name, args=args)


@dataclass(frozen=True, slots=True)
class EvalTurn:
    """One user turn and what is expected of the agent's answer to it (``None``: no expectation of that kind)."""

    id: str
    input: str | dict[str, Any]
    """The user's message: text, or a content dict (``{"schema_version": 1, "parts": [...]}``)."""
    expected_response: str | None = None
    expected_tool_uses: tuple[ToolUse, ...] | None = None
    """The expected trajectory of this turn, in call order (``()``: no tool may be called)."""
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "input": self.input}
        if self.expected_response is not None:
            out["expected_response"] = self.expected_response
        if self.expected_tool_uses is not None:
            out["expected_tool_uses"] = [t.to_dict() for t in self.expected_tool_uses]
        if self.metadata:
            out["metadata"] = self.metadata
        return out

    @classmethod
    def from_dict(cls, data: Any, path: str) -> EvalTurn:
        data = _mapping(data, path)
        _check_keys(data, frozenset({"id", "input", "expected_response", "expected_tool_uses", "metadata"}), path)
        return cls(
            id=_check_id(data.get("id"), f"{path}.id"),
            input=_turn_input(data.get("input"), f"{path}.input"),
            expected_response=_optional_text(data.get("expected_response"), f"{path}.expected_response"),
            expected_tool_uses=_tool_uses(data.get("expected_tool_uses"), f"{path}.expected_tool_uses"),
            metadata=_metadata(data.get("metadata", {}), f"{path}.metadata"),
        )


def _turn_input(value: Any, path: str) -> str | dict[str, Any]:
    if isinstance(value, str):
        if not value or len(value.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
            raise _bad("eval set", path, f"a non-empty text of at most {MAX_INPUT_BYTES} bytes")
        return value
    content = _json(_mapping(value, path), path, MAX_INPUT_BYTES)
    parts = content.get("parts")
    if not isinstance(parts, list) or not parts:
        raise _bad("eval set", path, "a content input needs a non-empty parts list")
    return dict(content)


def _optional_text(value: Any, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
        raise _bad("eval set", path, f"a text of at most {MAX_INPUT_BYTES} bytes")
    return value


def _tool_uses(value: Any, path: str) -> tuple[ToolUse, ...] | None:
    if value is None:
        return None
    items = _sequence(value, path, MAX_TOOL_USES)
    return tuple(ToolUse.from_dict(item, f"{path}[{i}]") for i, item in enumerate(items))


def _metadata(value: Any, path: str) -> dict[str, Any]:
    copied = _json(_mapping(value, path), path, MAX_INPUT_BYTES)
    return dict(copied)


@dataclass(frozen=True, slots=True)
class EvalCase:
    """Ordered turns run in one fresh session (per sample), with an optional initial session state."""

    id: str
    turns: tuple[EvalTurn, ...]
    initial_state: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "turns": [t.to_dict() for t in self.turns]}
        if self.initial_state:
            out["initial_state"] = self.initial_state
        if self.metadata:
            out["metadata"] = self.metadata
        return out

    @classmethod
    def from_dict(cls, data: Any, path: str) -> EvalCase:
        data = _mapping(data, path)
        _check_keys(data, frozenset({"id", "turns", "initial_state", "metadata"}), path)
        turns = _sequence(data.get("turns"), f"{path}.turns", MAX_TURNS)
        if not turns:
            raise _bad("eval set", f"{path}.turns", "a case needs at least one turn")
        parsed = tuple(EvalTurn.from_dict(t, f"{path}.turns[{i}]") for i, t in enumerate(turns))
        _unique([t.id for t in parsed], f"{path}.turns")
        return cls(
            id=_check_id(data.get("id"), f"{path}.id"),
            turns=parsed,
            initial_state=_metadata(data.get("initial_state", {}), f"{path}.initial_state"),
            metadata=_metadata(data.get("metadata", {}), f"{path}.metadata"),
        )


def _unique(ids: list[str], path: str) -> None:
    seen: set[str] = set()
    for i, ident in enumerate(ids):
        if ident in seen:
            raise _bad("eval set", f"{path}[{i}].id", "ids must be unique")
        seen.add(ident)


_SET_KEYS = frozenset({"schema_version", "id", "version", "description", "cases", "metadata"})
_V1_CASE_KEYS = frozenset({"id", "input", "expected_response", "expected_tool_uses", "metadata", "initial_state"})


@dataclass(frozen=True, slots=True)
class EvalSet:
    """A versioned eval set (see the module docstring). ``source`` says which format it was read from."""

    id: str
    cases: tuple[EvalCase, ...]
    version: str = "1"
    description: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    source: Literal["adk_actors/v1", "adk_actors/v2", "google-adk"] = "adk_actors/v2"

    def to_dict(self) -> dict[str, Any]:
        """The set in schema version 2 (whatever it was read from)."""
        out: dict[str, Any] = {
            "schema_version": 2,
            "id": self.id,
            "version": self.version,
            "cases": [c.to_dict() for c in self.cases],
        }
        if self.description:
            out["description"] = self.description
        if self.metadata:
            out["metadata"] = self.metadata
        return out

    def fingerprint(self) -> str:
        """``sha256:<hex>`` of the set's canonical JSON (schema version 2): results name the exact set they ran."""
        return "sha256:" + hashlib.sha256(canonical_dumps(self.to_dict()).encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: Any) -> EvalSet:
        """Validate an eval set of schema version 1 or 2 (strict: unknown keys, duplicate ids and every bound are
        refused).

        Raises:
            ValidationError: reason ``invalid_eval_set``, details ``path`` and ``rule``.
        """
        data = _mapping(data, "$")
        version = data.get("schema_version")
        if version not in (1, 2) or isinstance(version, bool):
            raise _bad("eval set", "$.schema_version", "schema_version must be 1 or 2")
        _check_keys(data, _SET_KEYS, "$")
        try:
            canonical_dumps(data, max_depth=MAX_DEPTH + 8)
        except ValidationError:
            raise _bad("eval set", "$", "the set is not JSON-safe") from None
        cases_in = _sequence(data.get("cases"), "$.cases", MAX_CASES)
        if not cases_in:
            raise _bad("eval set", "$.cases", "a set needs at least one case")
        if version == 1:
            cases = tuple(_v1_case(c, f"$.cases[{i}]") for i, c in enumerate(cases_in))
        else:
            cases = tuple(EvalCase.from_dict(c, f"$.cases[{i}]") for i, c in enumerate(cases_in))
        _unique([c.id for c in cases], "$.cases")
        description = data.get("description", "")
        if not isinstance(description, str) or len(description) > 4096:
            raise _bad("eval set", "$.description", "a text of at most 4096 characters")
        built = cls(
            id=_check_id(data.get("id"), "$.id"),
            version=_check_id(str(data.get("version", "1")) if data.get("version") is not None else "1", "$.version"),
            cases=cases,
            description=description,
            metadata=_metadata(data.get("metadata", {}), "$.metadata"),
            source="adk_actors/v1" if version == 1 else "adk_actors/v2",
        )
        size = len(canonical_dumps(built.to_dict()).encode())
        if size > MAX_SET_BYTES:
            raise _bad("eval set", "$", f"a set of at most {MAX_SET_BYTES} bytes")
        return built


def _v1_case(data: Any, path: str) -> EvalCase:
    data = _mapping(data, path)
    _check_keys(data, _V1_CASE_KEYS, path)
    ident = _check_id(data.get("id"), f"{path}.id")
    turn = EvalTurn.from_dict(
        {k: v for k, v in data.items() if k in ("input", "expected_response", "expected_tool_uses")} | {"id": ident},
        path,
    )
    return EvalCase(
        id=ident,
        turns=(turn,),
        initial_state=_metadata(data.get("initial_state", {}), f"{path}.initial_state"),
        metadata=_metadata(data.get("metadata", {}), f"{path}.metadata"),
    )


# ---- metrics --------------------------------------------------------------------------------------------------------
_METRIC_KEYS = frozenset({"id", "criterion", "threshold", "config", "kind", "scope"})
_CRITERION_SCOPE = {
    "exact_response": "turn",
    "response_match": "turn",
    "trajectory_exact": "turn",
    "trajectory_in_order": "turn",
    "trajectory_any_order": "turn",
    "trajectory_subset": "turn",
    "llm_judge": "case",
}


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """How one metric scores a sample.

    * ``criterion``: one of :data:`CRITERIA`.
    * ``threshold``: the score at or above which the metric passes (0..1 for the built-ins).
    * ``config``: the criterion's settings (validated by :mod:`adk_actors.evaluation.criteria`), e.g.
      ``{"normalization": "exact"|"strip"|"casefold"}``, ``{"args": "exact"|"subset"|"ignore"}``, the judge's
      rubric, a custom function's importable name.
    * ``kind``: ``metric`` or ``judge`` (``llm_judge``, or a custom function declared a judge): recorded, scored alike.
    * ``scope``: ``turn`` (scored per turn, the sample's score is the mean over the turns it applies to) or ``case``
      (scored once on the whole sample).
    """

    id: str
    criterion: str
    threshold: float = 1.0
    config: dict[str, Any] = field(default_factory=dict)
    kind: Literal["metric", "judge"] = "metric"
    scope: Literal["turn", "case"] = "turn"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "criterion": self.criterion,
            "threshold": self.threshold,
            "config": self.config,
            "kind": self.kind,
            "scope": self.scope,
        }

    @classmethod
    def from_dict(cls, data: Any, path: str = "$") -> MetricSpec:
        data = _mapping(data, path, "metric")
        _check_keys(data, _METRIC_KEYS, path, "metric")
        criterion = data.get("criterion")
        if criterion not in CRITERIA:
            raise _bad("metric", f"{path}.criterion", f"one of {', '.join(CRITERIA)}")
        threshold = data.get("threshold", 1.0)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not math.isfinite(threshold):
            raise _bad("metric", f"{path}.threshold", "a finite number")
        kind = data.get("kind", "judge" if criterion == "llm_judge" else "metric")
        if kind not in ("metric", "judge") or (criterion == "llm_judge" and kind != "judge"):
            raise _bad("metric", f"{path}.kind", "metric or judge (llm_judge is a judge)")
        scope = data.get("scope", _CRITERION_SCOPE.get(str(criterion), "turn"))
        fixed = _CRITERION_SCOPE.get(str(criterion))
        if scope not in ("turn", "case") or (fixed is not None and scope != fixed):
            raise _bad("metric", f"{path}.scope", f"turn or case ({criterion} is scored per {fixed or 'either'})")
        config = _json(_mapping(data.get("config", {}), f"{path}.config", "metric"), f"{path}.config", 65536, "metric")
        return cls(
            id=_check_id(data.get("id"), f"{path}.id", "metric"),
            criterion=str(criterion),
            threshold=float(threshold),
            config=dict(config),
            kind=kind,
            scope=scope,
        )


def metric_specs(value: Any) -> tuple[MetricSpec, ...]:
    """Validate a list of metric specs (``MetricSpec`` values or their dicts): at most :data:`MAX_METRICS`, ids
    unique. An empty list is allowed here; the evaluator decides what no criteria means.

    Raises:
        ValidationError: reason ``invalid_metric``.
    """
    items = _sequence(value, "$", MAX_METRICS, "metric")
    specs = tuple(
        item if isinstance(item, MetricSpec) else MetricSpec.from_dict(item, f"$[{i}]") for i, item in enumerate(items)
    )
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        if spec.id in seen:
            raise _bad("metric", f"$[{i}].id", "ids must be unique")
        seen.add(spec.id)
    return specs


# ---- traces and scores ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TurnTrace:
    """What the agent did in one turn: its final response text, its tool uses in call order, or its error
    (``{"reason", "type"}``: structural only)."""

    turn_id: str
    response: str = ""
    tool_uses: tuple[ToolUse, ...] = ()
    error: dict[str, str] | None = None
    duration_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "turn_id": self.turn_id,
            "response": self.response,
            "tool_uses": [t.to_dict() for t in self.tool_uses],
            "duration_ms": round(self.duration_ms, 3),
        }
        if self.error is not None:
            out["error"] = dict(self.error)
        return out


@dataclass(frozen=True, slots=True)
class SampleTrace:
    """One sample of one case: its turns as far as they ran, and the error that stopped it (if any)."""

    case_id: str
    sample: int
    turns: tuple[TurnTrace, ...] = ()
    error: dict[str, str] | None = None
    duration_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class Score:
    """One metric's verdict on one sample (or one turn of it, inside ``details["turns"]``).

    ``score`` is ``None`` unless the metric scored (``passed`` / ``failed``); ``reason`` is a tag for ``error`` and
    ``not_evaluated`` (``no_expectation``, ``sample_failed``, ``judge_failed``, ``metric_failed`` ...); ``details``
    is small, bounded and structural (a trajectory diff of names, a judge's bounded rationale)."""

    metric_id: str
    status: Literal["passed", "failed", "error", "not_evaluated"]
    score: float | None = None
    threshold: float = 1.0
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric_id": self.metric_id, "status": self.status, "threshold": self.threshold}
        if self.score is not None:
            out["score"] = round(self.score, 6)
        if self.reason is not None:
            out["reason"] = self.reason
        if self.details:
            out["details"] = self.details
        return out
