"""The rubric LLM judge (criterion ``llm_judge``, scope ``case``): a model scores a whole sample against a rubric.

Config (``MetricSpec.config``):

* ``rubric_id``, ``rubric_version`` (ids, required) and ``rubric`` (the instructions, required): recorded in every
  successful score, so results say which rubric judged them;
* ``model_config``: a provider config as agents take it (``provider``, ``model``, ``base_url``, ``retry``,
  ``generation_config``...; default ``{"provider": "gemini"}``). The API key comes from the environment
  (``GEMINI_API_KEY``), never from the metric: an ``api_key`` here is refused, and so are the keys the judge sets
  itself (``instructions``, ``global_instruction``, ``response_mime_type``, ``response_schema``,
  ``response_json_schema``, ``request_timeout``, tools);
* ``timeout_ms`` (default 30000, per attempt), ``max_retries`` (0..5, default 2), ``max_rationale_chars`` (0..10000,
  default 1000).

The judge asks for structured JSON (response schema ``{"score": number 0..1, "rationale": string}``) through
:func:`adk_actors.models.api.generate_response`, with the case's turns (inputs, expectations, the agent's responses,
tool names and errors) in the prompt. Its answer is parsed strictly: not JSON, not an object, a missing or extra
field, a wrong type or a score outside [0, 1] is retried up to ``max_retries`` times, like a provider error; after the
last attempt the score is ``error`` / ``judge_failed`` with details ``{"type": <tag>, "attempts": n}`` — never a pass,
never the provider's message, never a credential. A success's details are ``{"judge_schema": 1, "rubric_id",
"rubric_version", "model", "rationale", "attempts"}`` (the rationale bounded and scrubbed of configured secrets).

The rationale is evaluation content: it may summarise the case's data, so reports holding it deserve the data's
protection. An app or a test can replace the provider with a callable (``score_sample(..., judge=fn)``): it gets the
request dict (``judge_schema``, ``metric_id``, ``rubric_id``, ``rubric_version``, ``model_config``, ``instructions``,
``prompt``, ``response_schema``, ``timeout_ms``, ``attempt``) and returns the verdict as a mapping or as JSON text,
which is parsed as strictly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from adk_actors.errors import AdkError, ConfigError, ValidationError
from adk_actors.evaluation.model import MAX_ID_CHARS, EvalCase, MetricSpec, SampleTrace, Score
from adk_actors.models import api
from adk_actors.secrets import scrub_text

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "JUDGE_SCHEMA",
    "MAX_RETRIES",
    "VERDICT_SCHEMA",
    "JudgeConfig",
    "VerdictError",
    "judge_config",
    "judge_request",
    "parse_verdict",
    "provider_judge",
    "run_judge",
]

JUDGE_SCHEMA: Final = 1
DEFAULT_TIMEOUT_MS: Final = 30_000
MAX_RETRIES: Final = 5
MAX_RUBRIC_CHARS: Final = 16_384
MAX_ANSWER_CHARS: Final = 65_536
"""A longer answer is refused unparsed (``answer_too_large``)."""
PROMPT_BUDGET_CHARS: Final = 200_000
"""The case's texts share this budget in the prompt (each text cut to its share)."""
VERDICT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "rationale": {"type": "string"},
    },
    "required": ["score", "rationale"],
}
_CONFIG_KEYS = frozenset(
    {"rubric_id", "rubric_version", "rubric", "model_config", "timeout_ms", "max_retries", "max_rationale_chars"}
)
_JUDGE_OWNED = frozenset(
    {
        "instructions",
        "global_instruction",
        "response_mime_type",
        "response_schema",
        "response_json_schema",
        "request_timeout",
        "builtin_tools",
        "tool_config",
        "cached_content",
    }
)
_NO_RETRY = frozenset({"missing_api_key", "invalid_api_key", "unauthenticated", "permission_denied"})
_INSTRUCTIONS = (
    "You are an evaluation judge. Read the rubric and the conversation between a user and an AI agent, then score "
    "how well the agent's behaviour meets the rubric, from 0 (not at all) to 1 (fully). Reply with one JSON object "
    'and nothing else: {"score": <number from 0 to 1>, "rationale": <one short paragraph>}.'
)


def _bad(path: str, rule: str) -> ValidationError:
    return ValidationError(
        f"invalid judge config: {rule}", reason="invalid_metric", details={"path": path, "rule": rule}
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeConfig:
    """A validated ``llm_judge`` config (see the module docstring)."""

    rubric_id: str
    rubric_version: str
    rubric: str
    model_config: dict[str, Any] = field(default_factory=lambda: {"provider": "gemini"})
    timeout_ms: float = DEFAULT_TIMEOUT_MS
    max_retries: int = 2
    max_rationale_chars: int = 1000

    @property
    def model(self) -> str:
        """The requested model id (the provider's default when the config names none)."""
        named = self.model_config.get("model")
        if isinstance(named, str) and named:
            return named[:MAX_ID_CHARS]
        if self.model_config.get("provider", "gemini") == "gemini":
            from adk_actors.models.gemini.config import DEFAULT_MODEL

            return DEFAULT_MODEL
        return ""


def _id(config: Mapping[str, Any], key: str) -> str:
    value = config.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS or not value.isprintable():
        raise _bad(f"$.config.{key}", f"a non-empty printable id of at most {MAX_ID_CHARS} characters")
    return value


def _int(config: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(f"$.config.{key}", f"an integer from {low} to {high}")
    return value


def _model_config(value: Any) -> dict[str, Any]:
    if value is None:
        return {"provider": "gemini"}
    if not isinstance(value, Mapping):
        raise _bad("$.config.model_config", "an object is expected")
    config = dict(value)
    if "api_key" in config:
        raise _bad("$.config.model_config.api_key", "credentials come from the environment, never from a metric")
    generation = config.get("generation_config")
    owned = sorted(_JUDGE_OWNED & set(config))
    if isinstance(generation, Mapping):
        owned += sorted(f"generation_config.{k}" for k in _JUDGE_OWNED & set(generation))
    if owned:
        raise _bad(f"$.config.model_config.{owned[0]}", "the judge sets this itself")
    if not isinstance(config.get("provider", "gemini"), str):
        raise _bad("$.config.model_config.provider", "a registered provider name")
    try:
        api.validate_config(config)
    except ConfigError as err:
        key = str(err.details.get("key", "")) if isinstance(err.details.get("key"), str) else ""
        raise _bad(
            f"$.config.model_config{'.' + key if key else ''}", f"a valid provider config ({err.reason})"
        ) from None
    return config


def judge_config(config: Mapping[str, Any]) -> JudgeConfig:
    """Validate an ``llm_judge`` config (no HTTP, no API key needed).

    Raises:
        ValidationError: reason ``invalid_metric``, details ``path`` and ``rule``.
    """
    unknown = sorted(str(k)[:64] for k in config if k not in _CONFIG_KEYS)
    if unknown:
        raise _bad(f"$.config.{unknown[0]}", "unknown key")
    rubric = config.get("rubric")
    if not isinstance(rubric, str) or not rubric.strip() or len(rubric) > MAX_RUBRIC_CHARS:
        raise _bad("$.config.rubric", f"a non-empty text of at most {MAX_RUBRIC_CHARS} characters")
    timeout = config.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 1 <= timeout <= 600_000:
        raise _bad("$.config.timeout_ms", "a number of milliseconds from 1 to 600000")
    return JudgeConfig(
        rubric_id=_id(config, "rubric_id"),
        rubric_version=_id(config, "rubric_version"),
        rubric=rubric,
        model_config=_model_config(config.get("model_config")),
        timeout_ms=float(timeout),
        max_retries=_int(config, "max_retries", 2, 0, MAX_RETRIES),
        max_rationale_chars=_int(config, "max_rationale_chars", 1000, 0, 10_000),
    )


# ---- the request ---------------------------------------------------------------------------------------------------
def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more characters]"


def _input_text(value: str | dict[str, Any]) -> str:
    if isinstance(value, str):
        return value
    parts = value.get("parts", [])
    texts = [p.get("text", "") for p in parts if isinstance(p, Mapping) and p.get("type") == "text"]
    others = len(parts) - len(texts)
    return "\n".join(texts) + (f"\n[{others} non-text parts]" if others else "")


def judge_request(
    cfg: JudgeConfig, spec: MetricSpec, case: EvalCase, trace: SampleTrace, attempt: int
) -> dict[str, Any]:
    """The request for one attempt: what an injected judge gets, and what the provider judge sends."""
    traces = {t.turn_id: t for t in trace.turns}
    share = max(200, PROMPT_BUDGET_CHARS // (3 * max(1, len(case.turns))))
    turns = []
    for turn in case.turns:
        entry: dict[str, Any] = {"id": turn.id, "user": _cut(_input_text(turn.input), share)}
        if turn.expected_response is not None:
            entry["expected_response"] = _cut(turn.expected_response, share)
        if turn.expected_tool_uses is not None:
            entry["expected_tool_calls"] = [t.name for t in turn.expected_tool_uses]
        actual = traces.get(turn.id)
        if actual is None:
            entry["agent_error"] = "the turn did not run"
        else:
            entry["agent_response"] = _cut(actual.response, share)
            entry["agent_tool_calls"] = [t.name for t in actual.tool_uses]
            if actual.error is not None:
                entry["agent_error"] = str(actual.error.get("reason", "error"))[:64]
        turns.append(entry)
    prompt = (
        f"Rubric {cfg.rubric_id} (version {cfg.rubric_version}):\n{cfg.rubric}\n\n"
        f"The conversation, turn by turn, as JSON:\n{json.dumps({'turns': turns}, ensure_ascii=False, indent=1)}"
    )
    return {
        "judge_schema": JUDGE_SCHEMA,
        "metric_id": spec.id,
        "rubric_id": cfg.rubric_id,
        "rubric_version": cfg.rubric_version,
        "model_config": dict(cfg.model_config),
        "instructions": _INSTRUCTIONS,
        "prompt": prompt,
        "response_schema": VERDICT_SCHEMA,
        "timeout_ms": cfg.timeout_ms,
        "attempt": attempt,
    }


def provider_judge(request: Mapping[str, Any]) -> str:
    """Ask the configured provider (JSON mode, the verdict schema, the per-attempt timeout); the answer's text.

    Raises:
        ConfigError, ContentError, ProviderError: from the provider.
    """
    config = {
        **request["model_config"],
        "instructions": request["instructions"],
        "response_mime_type": "application/json",
        "response_schema": request["response_schema"],
        "request_timeout": request["timeout_ms"],
    }
    return api.generate_response(config, [{"role": "user", "content": request["prompt"]}]).text


# ---- the verdict ---------------------------------------------------------------------------------------------------
class VerdictError(Exception):
    """The judge's answer broke the verdict's rules (``tag`` says which; never its content)."""

    def __init__(self, tag: str) -> None:
        super().__init__(tag)
        self.tag = tag


def _reject_constant(_name: str) -> Any:
    raise VerdictError("malformed_json")


def parse_verdict(answer: Any) -> tuple[float, str]:
    """``(score, rationale)`` from a judge's answer: JSON text or an already parsed mapping, exactly
    ``{"score": number in [0, 1], "rationale": string}``.

    Raises:
        VerdictError: tag ``answer_too_large``, ``malformed_json``, ``missing_field``, ``unexpected_field``,
            ``invalid_type`` or ``score_out_of_range``.
    """
    if isinstance(answer, str):
        if len(answer) > MAX_ANSWER_CHARS:
            raise VerdictError("answer_too_large")
        try:
            answer = json.loads(answer, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            raise VerdictError("malformed_json") from None
    if not isinstance(answer, Mapping):
        raise VerdictError("malformed_json")
    if "score" not in answer or "rationale" not in answer:
        raise VerdictError("missing_field")
    if set(answer) - {"score", "rationale"}:
        raise VerdictError("unexpected_field")
    score, rationale = answer["score"], answer["rationale"]
    if isinstance(score, bool) or not isinstance(score, int | float) or not isinstance(rationale, str):
        raise VerdictError("invalid_type")
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise VerdictError("score_out_of_range")
    return float(score), rationale


def _failure_tag(exc: BaseException) -> str:
    if isinstance(exc, VerdictError):
        return exc.tag
    if isinstance(exc, AdkError):
        return exc.reason
    return type(exc).__name__[:64]


def run_judge(
    spec: MetricSpec,
    cfg: JudgeConfig,
    case: EvalCase,
    trace: SampleTrace,
    judge: Callable[[dict[str, Any]], Any] | None = None,
) -> Score:
    """Judge one sample: up to ``1 + max_retries`` attempts; never raises (a failure is the score's ``error``)."""
    ask = judge if judge is not None else provider_judge
    tag = "judge_failed"
    attempts = 0
    for attempt in range(1, cfg.max_retries + 2):
        attempts = attempt
        try:
            score, rationale = parse_verdict(ask(judge_request(cfg, spec, case, trace, attempt)))
        except Exception as exc:  # a judge's failure is the score's status, never the caller's crash
            tag = _failure_tag(exc)
            if isinstance(exc, ConfigError) or tag in _NO_RETRY:
                break
            continue
        details = {
            "judge_schema": JUDGE_SCHEMA,
            "rubric_id": cfg.rubric_id,
            "rubric_version": cfg.rubric_version,
            "model": cfg.model,
            "rationale": scrub_text(rationale)[: cfg.max_rationale_chars],
            "attempts": attempts,
        }
        status: Literal["passed", "failed"] = "passed" if score >= spec.threshold else "failed"
        return Score(spec.id, status, score=score, threshold=spec.threshold, details=details)
    return Score(
        spec.id,
        "error",
        threshold=spec.threshold,
        reason="judge_failed",
        details={"type": tag, "attempts": attempts},
    )
