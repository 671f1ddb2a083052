"""Reading eval sets: our own format (schema versions 1 and 2) and google-adk's two formats.

google-adk writes an **eval set** (``*.evalset.json``: ``eval_set_id``, ``eval_cases[]`` of ``eval_id`` +
``conversation[]`` invocations + ``session_input``) and, in its older form, a **test file** (``*.test.json``: a list
of rows ``{"query", "expected_tool_use": [{"tool_name", "tool_input"}], "reference"}``, all rows one multi-turn case,
or a list of ``{"name", "data": [rows], "initial_session"}`` cases). Its eval-set models take camelCase aliases
(``evalSetId``, ``userContent``, ``functionCall``...) as well as snake_case names; so does this reader (one spelling
per field: both at once is refused).

:func:`load_adk_eval_set` maps either google-adk form onto :class:`~adk_actors.evaluation.model.EvalSet` with
``source="google-adk"``: case id = ``eval_id``, turn id = ``invocation_id`` (``t1``, ``t2``... when empty),
``expected_response`` = the final response's visible text parts joined with ``"\\n"``, ``expected_tool_uses`` =
the invocation's ``tool_uses`` (or the function calls of its ``invocation_events``), ``initial_state`` =
``session_input.state``. Whatever does not map (rubrics, intermediate responses, tool responses, non-text final
parts, user-simulation scenarios, unknown keys...) is listed, one line per item, in
``EvalSet.metadata["unmapped"]`` (at most :data:`MAX_NOTES` lines): nothing is dropped silently. The whole set then
goes through the same strict, bounded validation as our own format; errors name google-adk's JSON paths.

:func:`load_eval_set` reads a path or a parsed value and picks the format: a mapping with ``schema_version`` is ours,
one with ``eval_set_id``/``evalSetId``/``eval_cases`` is google-adk's, a list is google-adk's older test file.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from adk_actors.content import canonical_dumps, canonical_loads
from adk_actors.content import validate as validate_content
from adk_actors.errors import ContentError, ValidationError
from adk_actors.evaluation.model import MAX_CASES, MAX_DEPTH, MAX_SET_BYTES, MAX_TOOL_USES, MAX_TURNS, EvalSet

__all__ = ["MAX_NOTES", "detect_format", "load_adk_eval_set", "load_eval_set", "read_eval_file"]

MAX_NOTES: Final = 64
"""Lines of ``metadata["unmapped"]``; the last one says how many more were cut."""
_MAX_NOTE_CHARS = 300
_MAX_NAME_CHARS = 4096

_PART_KEYS = (
    "text",
    "thought",
    "thought_signature",
    "inline_data",
    "file_data",
    "function_call",
    "function_response",
    "executable_code",
    "code_execution_result",
    "video_metadata",
    "media_resolution",
    "part_metadata",
    "tool_call",
    "tool_response",
)


def _bad(path: str, rule: str) -> ValidationError:
    return ValidationError(f"invalid eval set: {rule}", reason="invalid_eval_set", details={"path": path, "rule": rule})


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(word.title() for word in rest)


def _printable(key: Any) -> str:
    return re.sub(r"[^\x20-\x7e]", "?", str(key))[:64]


class _Reader:
    """Walks google-adk JSON, collecting what does not map."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.more = 0

    def note(self, path: str, what: str) -> None:
        if len(self.notes) < MAX_NOTES - 1:
            self.notes.append(f"{path}: {what}"[:_MAX_NOTE_CHARS])
        else:
            self.more += 1

    def unmapped(self) -> list[str]:
        return [*self.notes, f"... and {self.more} more"] if self.more else list(self.notes)

    def fields(self, value: Any, path: str, known: Sequence[str], *, camel: bool = True) -> dict[str, Any]:
        """The known fields of an object by snake_case name (camelCase accepted when ``camel``); unknown keys are
        noted and ignored."""
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise _bad(path, "an object is expected")
        names = {name: name for name in known}
        if camel:
            names.update({_camel(name): name for name in known})
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = names.get(key)
            if name is None:
                self.note(f"{path}.{_printable(key)}", "unknown key, ignored")
            elif name in out:
                raise _bad(f"{path}.{name}", "a field is given both in snake_case and in camelCase")
            else:
                out[name] = item
        return out


def _list(value: Any, path: str, limit: int) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise _bad(path, "a list is expected")
    if len(value) > limit:
        raise _bad(path, f"at most {limit} items")
    return list(value)


def _text(value: Any, path: str, *, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > _MAX_NAME_CHARS:
        raise _bad(path, f"a text of at most {_MAX_NAME_CHARS} characters")
    return value


def _state(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _bad(path, "an object is expected")
    return dict(value)


# ---- google-adk genai Content --------------------------------------------------------------------------------------
def _parts(reader: _Reader, content: Any, path: str) -> list[tuple[str, dict[str, Any]]]:
    """A genai Content's parts as ``(kind, fields)``; kind is the part's one payload field."""
    fields = reader.fields(content, path, ("role", "parts"))
    out = []
    for i, raw in enumerate(_list(fields.get("parts"), f"{path}.parts", 4096)):
        part_path = f"{path}.parts[{i}]"
        part = reader.fields(raw, part_path, _PART_KEYS)
        kinds = [k for k in _PART_KEYS if k not in ("thought", "thought_signature") and part.get(k) is not None]
        if len(kinds) > 1:
            raise _bad(part_path, "a part holds one of text, inline_data, file_data, function_call ...")
        kind = kinds[0] if kinds else "empty"
        if part.get("thought") is True:
            kind = "thought"
        out.append((kind, part))
    return out


def _user_input(reader: _Reader, content: Any, path: str) -> str | dict[str, Any]:
    kept: list[dict[str, Any]] = []
    for i, (kind, part) in enumerate(_parts(reader, content, path)):
        part_path = f"{path}.parts[{i}]"
        if kind == "text":
            kept.append({"type": "text", "text": _text_part(part["text"], f"{part_path}.text")})
        elif kind == "inline_data":
            blob = reader.fields(part["inline_data"], f"{part_path}.inline_data", ("mime_type", "data", "display_name"))
            kept.append({"type": "inline_data", "mime_type": blob.get("mime_type"), "data": blob.get("data")})
        elif kind == "file_data" and isinstance(part["file_data"], Mapping):
            ref = reader.fields(part["file_data"], f"{part_path}.file_data", ("file_uri", "mime_type", "display_name"))
            if ref.get("mime_type") is None:
                reader.note(f"{part_path}.file_data", "a file part without mime_type cannot be sent, dropped")
                continue
            kept.append({"type": "file_data", "mime_type": ref.get("mime_type"), "uri": ref.get("file_uri")})
        else:
            reader.note(part_path, f"a {kind} part in user content is not sent, dropped")
    if not kept:
        raise _bad(f"{path}.parts", "user content needs at least one text, inline_data or file_data part")
    if len(kept) == 1 and kept[0]["type"] == "text":
        return str(kept[0]["text"])
    content_dict = {"schema_version": 1, "parts": kept}
    try:
        validate_content(content_dict)
    except ContentError as err:
        raise _bad(path, f"valid content ({err.reason})") from None
    return content_dict


def _text_part(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _bad(path, "a text is expected")
    return value


def _final_text(reader: _Reader, content: Any, path: str) -> str | None:
    if content is None:
        return None
    texts: list[str] = []
    for i, (kind, part) in enumerate(_parts(reader, content, path)):
        if kind == "text":
            texts.append(_text_part(part["text"], f"{path}.parts[{i}].text"))
        elif kind != "thought":
            reader.note(f"{path}.parts[{i}]", f"a {kind} part of the final response is not compared")
    if not texts:
        reader.note(path, "the final response has no text part: no response expectation")
        return None
    return "\n".join(texts)


def _function_call(reader: _Reader, value: Any, path: str) -> dict[str, Any]:
    call = reader.fields(value, path, ("id", "name", "args", "partial_args", "will_continue"))
    if call.get("partial_args") is not None:
        reader.note(f"{path}.partial_args", "streamed partial arguments are not compared")
    args = call.get("args")
    return {"name": call.get("name"), "args": {} if args is None else args}


def _tool_uses(reader: _Reader, data: Any, path: str) -> list[dict[str, Any]]:
    """The expected trajectory of one invocation (google-adk compares a missing one as no tool calls)."""
    if data is None:
        return []
    if isinstance(data, Mapping) and ("invocation_events" in data or "invocationEvents" in data):
        fields = reader.fields(data, path, ("invocation_events",))
        calls: list[dict[str, Any]] = []
        events = _list(fields.get("invocation_events"), f"{path}.invocation_events", 4096)
        for i, raw in enumerate(events):
            event_path = f"{path}.invocation_events[{i}]"
            event = reader.fields(
                raw, event_path, ("author", "content", "grounding_metadata", "usage_metadata", "model_version")
            )
            if event.get("content") is None:
                continue
            for j, (kind, part) in enumerate(_parts(reader, event["content"], f"{event_path}.content")):
                part_path = f"{event_path}.content.parts[{j}]"
                if kind == "function_call":
                    calls.append(_function_call(reader, part["function_call"], f"{part_path}.function_call"))
                elif kind not in ("function_response", "thought"):
                    reader.note(part_path, f"an intermediate {kind} part is not compared")
        if len(calls) > MAX_TOOL_USES:
            raise _bad(f"{path}.invocation_events", f"at most {MAX_TOOL_USES} function calls")
        return calls
    fields = reader.fields(data, path, ("tool_uses", "tool_responses", "intermediate_responses"))
    for name in ("tool_responses", "intermediate_responses"):
        items = fields.get(name)
        if items:
            reader.note(f"{path}.{name}", f"not compared ({len(items) if isinstance(items, list) else 1} items)")
    uses = _list(fields.get("tool_uses"), f"{path}.tool_uses", MAX_TOOL_USES)
    return [_function_call(reader, use, f"{path}.tool_uses[{i}]") for i, use in enumerate(uses)]


# ---- the two google-adk formats ------------------------------------------------------------------------------------
_INVOCATION_FIELDS = (
    "invocation_id",
    "user_content",
    "final_response",
    "intermediate_data",
    "creation_timestamp",
    "rubrics",
    "app_details",
    "inference_call_count",
    "duration",
)
_CASE_FIELDS = (
    "eval_id",
    "conversation",
    "conversation_scenario",
    "session_input",
    "creation_timestamp",
    "rubrics",
    "final_session_state",
)


def _invocation(reader: _Reader, raw: Any, path: str, index: int) -> dict[str, Any]:
    inv = reader.fields(raw, path, _INVOCATION_FIELDS)
    for name in ("rubrics", "app_details"):
        if inv.get(name):
            reader.note(f"{path}.{name}", "not mapped")
    ident = inv.get("invocation_id") or f"t{index + 1}"
    if "user_content" not in inv:
        raise _bad(f"{path}.user_content", "an invocation needs user_content")
    turn: dict[str, Any] = {
        "id": ident,
        "input": _user_input(reader, inv["user_content"], f"{path}.user_content"),
        "expected_tool_uses": _tool_uses(reader, inv.get("intermediate_data"), f"{path}.intermediate_data"),
    }
    expected = _final_text(reader, inv.get("final_response"), f"{path}.final_response")
    if expected is not None:
        turn["expected_response"] = expected
    return turn


def _session_input(reader: _Reader, raw: Any, path: str, case: dict[str, Any]) -> None:
    if raw is None:
        return
    session = reader.fields(raw, path, ("app_name", "user_id", "session_id", "state"))
    if session.get("session_id") is not None:
        reader.note(f"{path}.session_id", "not applied: every sample runs in a fresh session")
    case["initial_state"] = _state(session.get("state"), f"{path}.state")
    names = {k: _text(session.get(k), f"{path}.{k}") for k in ("app_name", "user_id")}
    if any(names.values()):
        case["metadata"] = {"session_input": {k: v for k, v in names.items() if v}}


def _eval_set(reader: _Reader, data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The v2 dict of a google-adk eval set and, per case, its JSON path (for error paths)."""
    top = reader.fields(data, "$", ("eval_set_id", "name", "description", "eval_cases", "creation_timestamp"))
    cases, case_paths = [], []
    for i, raw in enumerate(_list(top.get("eval_cases"), "$.eval_cases", MAX_CASES)):
        path = f"$.eval_cases[{i}]"
        fields = reader.fields(raw, path, _CASE_FIELDS)
        if fields.get("conversation") is None:
            if fields.get("conversation_scenario") is not None:
                reader.note(path, "a conversation_scenario (user simulation) case cannot run here, skipped")
                continue
            raise _bad(f"{path}.conversation", "a case needs a conversation")
        if fields.get("conversation_scenario") is not None:
            raise _bad(path, "exactly one of conversation and conversation_scenario")
        for name in ("rubrics", "final_session_state"):
            if fields.get(name):
                reader.note(f"{path}.{name}", "not mapped")
        turns = _list(fields["conversation"], f"{path}.conversation", MAX_TURNS)
        case: dict[str, Any] = {
            "id": fields.get("eval_id"),
            "turns": [_invocation(reader, t, f"{path}.conversation[{j}]", j) for j, t in enumerate(turns)],
        }
        _session_input(reader, fields.get("session_input"), f"{path}.session_input", case)
        cases.append(case)
        case_paths.append(path)
    out: dict[str, Any] = {"schema_version": 2, "id": top.get("eval_set_id"), "version": "1", "cases": cases}
    description = _text(top.get("description"), "$.description")
    if description:
        out["description"] = description
    set_name = _text(top.get("name"), "$.name")
    if set_name:
        out["metadata"] = {"name": set_name}
    return out, case_paths


_ROW_FIELDS = ("query", "reference", "expected_tool_use", "expected_intermediate_agent_responses")


def _legacy_turns(reader: _Reader, rows: Any, path: str) -> list[dict[str, Any]]:
    turns = []
    for j, raw in enumerate(_list(rows, path, MAX_TURNS)):
        row_path = f"{path}[{j}]"
        row = reader.fields(raw, row_path, _ROW_FIELDS, camel=False)
        if not isinstance(row.get("query"), str):
            raise _bad(f"{row_path}.query", "a row needs a query text")
        if row.get("expected_intermediate_agent_responses"):
            reader.note(f"{row_path}.expected_intermediate_agent_responses", "not compared")
        uses = []
        for k, use in enumerate(_list(row.get("expected_tool_use"), f"{row_path}.expected_tool_use", MAX_TOOL_USES)):
            old = reader.fields(use, f"{row_path}.expected_tool_use[{k}]", ("tool_name", "tool_input"), camel=False)
            uses.append(
                {"name": old.get("tool_name"), "args": {} if old.get("tool_input") is None else old["tool_input"]}
            )
        turn: dict[str, Any] = {"id": f"t{j + 1}", "input": row["query"], "expected_tool_uses": uses}
        if row.get("reference") is not None:
            turn["expected_response"] = row["reference"]
        turns.append(turn)
    return turns


def _legacy(
    reader: _Reader, data: Sequence[Any], set_id: str, initial_session: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[str]]:
    """The v2 dict of a google-adk test file: rows (one case named after the set) or ``{name, data}`` cases."""
    if len(data) > MAX_CASES:
        raise _bad("$", f"at most {MAX_CASES} items")
    named = bool(data) and all(isinstance(item, Mapping) and "data" in item for item in data)
    cases, case_paths = [], []
    if named:
        for i, raw in enumerate(data):
            path = f"$[{i}]"
            fields = reader.fields(raw, path, ("name", "data", "initial_session"), camel=False)
            case: dict[str, Any] = {
                "id": fields.get("name"),
                "turns": _legacy_turns(reader, fields["data"], path + ".data"),
            }
            _session_input(reader, fields.get("initial_session") or None, f"{path}.initial_session", case)
            cases.append(case)
            case_paths.append(path)
    else:
        case = {"id": set_id, "turns": _legacy_turns(reader, data, "$")}
        _session_input(reader, initial_session or None, "initial_session", case)
        cases.append(case)
        case_paths.append("$")
    return {"schema_version": 2, "id": set_id, "version": "1", "cases": cases}, case_paths


# ---- error paths: our v2 paths back to google-adk's ----------------------------------------------------------------
_V2_PATH = re.compile(r"^\$\.cases\[(\d+)\](?:\.turns\[(\d+)\])?(.*)$")


def _adk_path(path: str, case_paths: Sequence[str], legacy: bool) -> str:
    match = _V2_PATH.match(path)
    if not match:
        top = {"$.id": "$", "$.cases": "$"} if legacy else {"$.id": "$.eval_set_id", "$.cases": "$.eval_cases"}
        return top.get(path, path)
    case_i, turn_i, rest = int(match.group(1)), match.group(2), match.group(3)
    base = case_paths[case_i] if case_i < len(case_paths) else f"$.eval_cases[{case_i}]"
    if turn_i is None:
        if legacy:
            return base + {".id": ".name", ".initial_state": ".initial_session.state"}.get(rest, rest)
        return base + {".id": ".eval_id", ".turns": ".conversation", ".initial_state": ".session_input.state"}.get(
            rest, rest
        )
    if legacy:
        row = f"{base}[{turn_i}]" if base == "$" else f"{base}.data[{turn_i}]"
        for ours, theirs in (
            (".input", ".query"),
            (".expected_response", ".reference"),
            (".expected_tool_uses", ".expected_tool_use"),
            (".name", ".tool_name"),
            (".args", ".tool_input"),
        ):
            rest = rest.replace(ours, theirs)
        return row + rest
    turn = f"{base}.conversation[{turn_i}]"
    for ours, theirs in (
        (".id", ".invocation_id"),
        (".input", ".user_content"),
        (".expected_response", ".final_response"),
        (".expected_tool_uses", ".intermediate_data.tool_uses"),
    ):
        if rest.startswith(ours):
            return turn + theirs + rest[len(ours) :]
    return turn + rest


# ---- entry points --------------------------------------------------------------------------------------------------
def read_eval_file(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file of at most :data:`~adk_actors.evaluation.model.MAX_SET_BYTES` bytes, strictly parsed.

    Raises:
        ValidationError: reason ``invalid_eval_set`` (unreadable, too large, not JSON).
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SET_BYTES + 1)
    except OSError:
        raise _bad("$", "a readable file") from None
    if len(raw) > MAX_SET_BYTES:
        raise _bad("$", f"a file of at most {MAX_SET_BYTES} bytes")
    try:
        return canonical_loads(raw)
    except ValidationError as err:
        raise _bad("$", f"a JSON document ({err.reason})") from None


def detect_format(data: Any) -> str:
    """``"adk_actors"`` (ours, v1 or v2), ``"google-adk"`` (an eval set) or ``"google-adk-test"`` (the older test
    file).

    Raises:
        ValidationError: reason ``invalid_eval_set`` when it is none of them.
    """
    if isinstance(data, list | tuple):
        return "google-adk-test"
    if isinstance(data, Mapping):
        if "schema_version" in data:
            return "adk_actors"
        if any(k in data for k in ("eval_set_id", "evalSetId", "eval_cases", "evalCases")):
            return "google-adk"
    raise _bad("$", "an eval set: ours (schema_version 1 or 2) or google-adk's (eval_set_id, eval_cases)")


def _stem(path: str | os.PathLike[str]) -> str:
    name = Path(path).name
    for suffix in (".evalset.json", ".test.json", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)] or name
    return name


def load_adk_eval_set(
    data: Mapping[str, Any] | Sequence[Any] | str | os.PathLike[str],
    *,
    set_id: str | None = None,
    initial_session: Mapping[str, Any] | None = None,
) -> EvalSet:
    """Read a google-adk eval set or test file (a path or the parsed JSON) into an :class:`EvalSet`.

    Args:
        data: the file's path, or its parsed JSON (a mapping for an eval set, a list for a test file).
        set_id: the id of a test file's set (and of its single case): default the file's name without
            ``.test.json``, else ``"google-adk-test"``. Ignored for eval sets, which carry ``eval_set_id``.
        initial_session: a test file's initial session (``{"state", "app_name", "user_id"}``), as google-adk
            takes it from a separate ``initial.session.json``.

    Returns:
        The set with ``source="google-adk"``; ``metadata["unmapped"]`` lists what could not be mapped.

    Raises:
        ValidationError: reason ``invalid_eval_set``, details ``path`` (google-adk's JSON path) and ``rule``.
    """
    default_id = set_id
    if isinstance(data, str | os.PathLike):
        default_id = default_id or _stem(data)
        data = read_eval_file(data)
    kind = detect_format(data)
    if kind == "adk_actors":
        raise _bad("$", "a google-adk eval set (this one has schema_version: use load_eval_set)")
    try:
        canonical_dumps(data, max_depth=MAX_DEPTH + 8)
    except ValidationError:
        raise _bad("$", "the set is not JSON-safe") from None
    reader = _Reader()
    legacy = kind == "google-adk-test"
    if legacy:
        v2, case_paths = _legacy(reader, data, default_id or "google-adk-test", initial_session)  # type: ignore[arg-type]
    else:
        if initial_session:
            raise _bad("initial_session", "an eval set carries its own session_input")
        v2, case_paths = _eval_set(reader, data)  # type: ignore[arg-type]
    notes = reader.unmapped()
    if notes:
        v2["metadata"] = {**v2.get("metadata", {}), "unmapped": notes}
    try:
        built = EvalSet.from_dict(v2)
    except ValidationError as err:
        path = _adk_path(str(err.details.get("path", "$")), case_paths, legacy)
        raise _bad(path, str(err.details.get("rule", "invalid"))) from None
    return dataclasses.replace(built, source="google-adk")


def load_eval_set(data: Mapping[str, Any] | Sequence[Any] | str | os.PathLike[str]) -> EvalSet:
    """Read an eval set in any supported format (see :func:`detect_format`) from a path or a parsed value.

    Raises:
        ValidationError: reason ``invalid_eval_set``.
    """
    if isinstance(data, str | os.PathLike):
        path = data
        data = read_eval_file(path)
        if detect_format(data) != "adk_actors":
            return load_adk_eval_set(data, set_id=_stem(path))
    if detect_format(data) == "adk_actors":
        return EvalSet.from_dict(data)
    return load_adk_eval_set(data)
