"""Scenario scripts: rule compilation, matching against a request context, and answer templates.

See the package docstring (and ``docs/EMULATOR.md``) for the format.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WHEN_KEYS = frozenset(
    {
        "user_text_contains", "user_text_equals", "user_text_regex", "has_function_response",
        "function_response_name", "tool_declared", "google_search", "json_mode", "model", "system_text_contains",
        "stream", "include_thoughts", "code_execution",
    }
)  # fmt: skip
RESPOND_KEYS = frozenset(
    {
        "text", "function_calls", "thought", "grounding", "json", "finish_reason", "delay_ms", "fault", "times",
        "chunks", "block_reason", "function_call_ids", "code_execution", "final_chunk", "grounding_chunks",
    }
)  # fmt: skip
FAULT_KINDS = frozenset({"truncate_sse", "drop_connection", "midstream_error"})
SCRIPT_KEYS = frozenset({"rules", "latency_ms", "models", "description"})

DEFAULT_SCRIPT_PATH = Path(__file__).with_name("scripts") / "default.json"


class ScriptError(ValueError):
    """Raised for an invalid scenario script."""


@dataclass
class Context:
    """Facts about one generateContent request that rules match on and templates read."""

    model: str = ""
    stream: bool = False
    user_text: str = ""
    system_text: str = ""
    declared_tools: list[str] = field(default_factory=list)
    google_search: bool = False
    code_execution: bool = False
    json_mode: bool = False
    include_thoughts: bool = False
    function_responses: list[dict[str, Any]] = field(default_factory=list)
    call_args: list[dict[str, Any]] = field(default_factory=list)

    @property
    def has_function_response(self) -> bool:
        """True when the latest content answers function calls."""
        return bool(self.function_responses)


@dataclass
class Rule:
    """A compiled rule."""

    index: int
    key: str
    when: dict[str, Any]
    respond: dict[str, Any]
    times: int | None
    regex: re.Pattern[str] | None = None
    uses: int = 0


@dataclass
class Match:
    """A matched rule plus the template variables gathered while matching."""

    rule: Rule
    variables: dict[str, Any]


def load_script(script: dict[str, Any] | str | Path | None) -> dict[str, Any]:
    """Load a script: None → the built-in default, a dict as is, or a path to a JSON file."""
    if script is None:
        script = DEFAULT_SCRIPT_PATH
    if isinstance(script, str | Path):
        try:
            data = json.loads(Path(script).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ScriptError(f"cannot load script {script}: {exc}") from exc
        return data
    if not isinstance(script, dict):
        raise ScriptError("script must be None, a dict or a path")
    return copy.deepcopy(script)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def compile_rules(script: dict[str, Any]) -> list[Rule]:
    """Validate and compile the rules of a script (raises :class:`ScriptError`)."""
    unknown = set(script) - SCRIPT_KEYS
    if unknown:
        raise ScriptError(f"unknown script keys: {sorted(unknown)}")
    rules_raw = script.get("rules", [])
    if not isinstance(rules_raw, list):
        raise ScriptError("'rules' must be a list")
    rules: list[Rule] = []
    for i, raw in enumerate(rules_raw):
        if not isinstance(raw, dict) or "respond" not in raw:
            raise ScriptError(f"rule {i}: must be an object with 'respond'")
        extra = set(raw) - {"when", "respond", "times", "id"}
        if extra:
            raise ScriptError(f"rule {i}: unknown keys {sorted(extra)}")
        when = raw.get("when") or {}
        respond = raw["respond"]
        if not isinstance(when, dict) or not isinstance(respond, dict):
            raise ScriptError(f"rule {i}: 'when' and 'respond' must be objects")
        bad = set(when) - WHEN_KEYS
        if bad:
            raise ScriptError(f"rule {i}: unknown 'when' keys {sorted(bad)}")
        bad = set(respond) - RESPOND_KEYS
        if bad:
            raise ScriptError(f"rule {i}: unknown 'respond' keys {sorted(bad)}")
        fault = respond.get("fault")
        if fault is not None:
            if not isinstance(fault, dict) or ("status" not in fault and "kind" not in fault):
                raise ScriptError(f"rule {i}: fault needs 'status' or 'kind'")
            if "kind" in fault and fault["kind"] not in FAULT_KINDS:
                raise ScriptError(f"rule {i}: fault kind must be one of {sorted(FAULT_KINDS)}")
        if respond.get("final_chunk") not in (None, "empty_text", "finish_only"):
            raise ScriptError(f"rule {i}: final_chunk must be 'empty_text' or 'finish_only'")
        spread = respond.get("grounding_chunks")
        if spread is not None and (not isinstance(spread, int) or isinstance(spread, bool) or spread < 1):
            raise ScriptError(f"rule {i}: grounding_chunks must be a positive integer")
        for fc in respond.get("function_calls") or []:
            if not isinstance(fc, dict) or "name" not in fc:
                raise ScriptError(f"rule {i}: each function call needs a 'name'")
        times = raw.get("times", respond.get("times"))
        if times is not None and (not isinstance(times, int) or times < 0):
            raise ScriptError(f"rule {i}: 'times' must be a non-negative integer")
        regex = None
        if "user_text_regex" in when:
            try:
                regex = re.compile(when["user_text_regex"])
            except re.error as exc:
                raise ScriptError(f"rule {i}: bad regex: {exc}") from exc
        rules.append(Rule(i, str(raw.get("id", i)), when, respond, times, regex))
    return rules


class Scenario:
    """A thread-safe compiled script with per-rule hit counters."""

    def __init__(self, script: dict[str, Any] | str | Path | None) -> None:
        data = load_script(script)
        self.data = data
        self.rules = compile_rules(data)
        self.latency_ms = int(data.get("latency_ms", 0) or 0)
        self.models = [str(m) for m in data.get("models", [])]
        self._lock = threading.Lock()

    def match(self, ctx: Context) -> Match | None:
        """Return the first rule matching ``ctx`` (consuming one of its ``times``), or None."""
        with self._lock:
            for rule in self.rules:
                if rule.times is not None and rule.uses >= rule.times:
                    continue
                variables = _match(rule, ctx)
                if variables is not None:
                    rule.uses += 1
                    return Match(rule, variables)
        return None

    def hits(self) -> dict[str, int]:
        """Matches per rule (keyed by the rule's ``id`` or its index)."""
        with self._lock:
            return {r.key: r.uses for r in self.rules}


def _match(rule: Rule, ctx: Context) -> dict[str, Any] | None:
    w = rule.when
    variables: dict[str, Any] = {}
    text = ctx.user_text
    if "user_text_contains" in w and not any(s.lower() in text.lower() for s in _as_list(w["user_text_contains"])):
        return None
    if "user_text_equals" in w and text.strip() != str(w["user_text_equals"]).strip():
        return None
    if rule.regex is not None:
        m = rule.regex.search(text)
        if m is None:
            return None
        variables["match"] = {str(k): v for k, v in enumerate([m.group(0), *m.groups()])}
        variables["match"].update(m.groupdict())
    if "has_function_response" in w and bool(w["has_function_response"]) != ctx.has_function_response:
        return None
    if "function_response_name" in w:
        names = [fr.get("name", "") for fr in ctx.function_responses]
        if not any(fnmatch.fnmatchcase(n, p) for n in names for p in _as_list(w["function_response_name"])):
            return None
    if "tool_declared" in w:
        for i, raw_pattern in enumerate(_as_list(w["tool_declared"])):
            # A pattern may name a regex capture, e.g. "{match.tool}": the tool the user asked for by name.
            pattern = render(str(raw_pattern), variables) if "{" in str(raw_pattern) else str(raw_pattern)
            found = next((n for n in ctx.declared_tools if fnmatch.fnmatchcase(n, pattern)), None)
            if found is None:
                return None
            variables.setdefault("tool", found)
            variables[f"tool{i}"] = found
    for key, actual in (
        ("google_search", ctx.google_search),
        ("json_mode", ctx.json_mode),
        ("stream", ctx.stream),
        ("include_thoughts", ctx.include_thoughts),
        ("code_execution", ctx.code_execution),
    ):
        if key in w and bool(w[key]) != actual:
            return None
    if "model" in w and not fnmatch.fnmatchcase(ctx.model, str(w["model"])):
        return None
    if "system_text_contains" in w and str(w["system_text_contains"]).lower() not in ctx.system_text.lower():
        return None
    return variables


# ------------------------------------------------------------------------------------------------------------ templates

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\}")
_MISSING = object()


def template_vars(ctx: Context, extra: dict[str, Any]) -> dict[str, Any]:
    """Variables available to templates (see the package docstring)."""
    fr = ctx.function_responses[0] if ctx.function_responses else {}
    response = fr.get("response", {}) if fr else {}
    variables: dict[str, Any] = {
        "user_text": ctx.user_text,
        "system_text": ctx.system_text,
        "model": ctx.model,
        "name": fr.get("name", "") if fr else "",
        "args": ctx.call_args[0] if ctx.call_args else {},
        "response": response,
        "response_text": flatten(response),
        "responses": [f.get("response", {}) for f in ctx.function_responses],
        "tools": ctx.declared_tools,
    }
    variables.update(extra)
    return variables


def flatten(value: Any) -> str:
    """Human-readable rendering of a function result: unwraps single-key dicts such as ``{"result": ...}``."""
    while isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    if isinstance(value, dict):
        return ", ".join(f"{k}: {flatten(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(flatten(v) for v in value)
    return "" if value is None else str(value)


def _lookup(variables: dict[str, Any], dotted: str) -> Any:
    parts = dotted.split(".")
    cur: Any = variables
    for i, part in enumerate(parts):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
            continue
        if isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
            continue
        # {response.x} also finds x inside a single-key wrapper such as {"result": {...}} or {"output": {...}}
        if i > 0 and isinstance(cur, dict) and len(cur) == 1:
            inner = next(iter(cur.values()))
            if isinstance(inner, dict) and part in inner:
                cur = inner[part]
                continue
        return _MISSING
    return cur


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def render(template: str, variables: dict[str, Any]) -> str:
    """Substitute ``{dotted.name}`` placeholders; ``{{``/``}}`` are literal braces; unknown names stay as written."""

    def sub(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok == "{{":
            return "{"
        if tok == "}}":
            return "}"
        value = _lookup(variables, m.group(1))
        return tok if value is _MISSING else _render(value)

    return _PLACEHOLDER.sub(sub, template)


def render_value(value: Any, variables: dict[str, Any]) -> Any:
    """Render templates inside strings of a JSON value; a string that is exactly one placeholder keeps its type."""
    if isinstance(value, str):
        m = _PLACEHOLDER.fullmatch(value)
        if m and m.group(1):
            found = _lookup(variables, m.group(1))
            if found is not _MISSING:
                return copy.deepcopy(found)
        return render(value, variables)
    if isinstance(value, dict):
        return {k: render_value(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, variables) for v in value]
    return value
