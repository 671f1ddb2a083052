"""Content dicts ↔ Gemini wire parts, and the ``GenerateContentRequest`` body.

Outgoing JSON is camelCase only with standard-alphabet base64; incoming JSON is read in either spelling
(camelCase or the proto snake_case the service also accepts) and either base64 alphabet. Thought signatures are
opaque bytes: they are normalised to standard base64 and otherwise echoed untouched.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from typing import Any

from adk_actors.content import Content, check_json_safe, validate
from adk_actors.errors import ConfigError, ContentError, ProviderError, ValidationError
from adk_actors.models.gemini.config import GeminiConfig

__all__ = [
    "CONTENT_SCHEMA_VERSION",
    "b64_bytes",
    "build_request",
    "content_to_wire",
    "normalise_b64",
    "part_from_wire",
    "part_to_wire",
    "prefix_members",
    "system_parts_of",
    "tools_to_wire",
    "validated_content",
]

CONTENT_SCHEMA_VERSION = 1
_FUNCTION_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")
_DECLARATION_KEYS = {
    "name": "name",
    "description": "description",
    "parameters": "parameters",
    "parametersJsonSchema": "parametersJsonSchema",
    "parameters_json_schema": "parametersJsonSchema",
    "response": "response",
    "responseJsonSchema": "responseJsonSchema",
    "response_json_schema": "responseJsonSchema",
}
_ROLES = ("user", "model", "system")


def b64_bytes(value: str) -> bytes:
    """Decode standard or URL-safe base64, padded or not.

    Raises:
        ValueError: not base64.
    """
    if not isinstance(value, str):
        raise ValueError("base64 value must be a string")
    text = value.strip().replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("invalid base64") from exc


def normalise_b64(value: str) -> str:
    """Re-encode base64 of either alphabet as padded standard base64.

    Raises:
        ValueError: not base64.
    """
    return base64.b64encode(b64_bytes(value)).decode("ascii")


def _bad(path: str, problem: str) -> ContentError:
    return ContentError(f"{path}: {problem}", reason="invalid_content", details={"path": path, "problem": problem})


def _b64_field(part: Mapping[str, Any], key: str, path: str) -> str:
    try:
        return normalise_b64(part[key])
    except ValueError:
        raise _bad(f"{path}.{key}", "not base64") from None


def _str_field(part: Mapping[str, Any], key: str, path: str, *, optional: bool = False) -> str | None:
    value = part.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or (not value and key != "text"):
        raise _bad(f"{path}.{key}", "expected a non-empty string" if key != "text" else "expected a string")
    return value


def _object_field(part: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    value = part.get(key, {})
    if not isinstance(value, Mapping):
        raise _bad(f"{path}.{key}", "expected a JSON object")
    return dict(value)


def part_to_wire(part: Mapping[str, Any], path: str = "part") -> dict[str, Any]:
    """One content part → one Gemini wire ``Part`` (camelCase, standard base64).

    Raises:
        ContentError: reason ``invalid_content`` with ``details["path"]``.
    """
    if not isinstance(part, Mapping):
        raise _bad(path, "expected a part object")
    kind = part.get("type")
    wire: dict[str, Any]
    if kind == "text":
        wire = {"text": _str_field(part, "text", path)}
        if part.get("thought"):
            wire["thought"] = True
    elif kind == "inline_data":
        wire = {"inlineData": {"mimeType": _str_field(part, "mime_type", path), "data": _b64_field(part, "data", path)}}
    elif kind == "file_data":
        file_data: dict[str, Any] = {}
        mime = _str_field(part, "mime_type", path, optional=True)
        if mime is not None:
            file_data["mimeType"] = mime
        file_data["fileUri"] = _str_field(part, "uri", path)
        wire = {"fileData": file_data}
    elif kind == "function_call":
        call: dict[str, Any] = {"name": _str_field(part, "name", path), "args": _object_field(part, "args", path)}
        call_id = _str_field(part, "id", path, optional=True)
        if call_id is not None:
            call = {"id": call_id, **call}
        wire = {"functionCall": call}
    elif kind == "function_response":
        response: dict[str, Any] = {
            "name": _str_field(part, "name", path),
            "response": _object_field(part, "response", path),
        }
        response_id = _str_field(part, "id", path, optional=True)
        if response_id is not None:
            response = {"id": response_id, **response}
        wire = {"functionResponse": response}
    else:
        raise _bad(f"{path}.type", f"unknown part type {kind!r}")
    if part.get("thought_signature") is not None:
        wire["thoughtSignature"] = _b64_field(part, "thought_signature", path)
    return wire


def _content_dict(value: Any, path: str) -> dict[str, Any]:
    """Accept ``str``, a content dict, or an object with ``to_dict()`` (the content package's values)."""
    if isinstance(value, str):
        return {"schema_version": CONTENT_SCHEMA_VERSION, "parts": [{"type": "text", "text": value}]}
    if not isinstance(value, Mapping) and callable(getattr(value, "to_dict", None)):
        value = value.to_dict()
    if not isinstance(value, Mapping) or not isinstance(value.get("parts"), list | tuple):
        raise _bad(path, "expected a string or a content object with parts")
    if value.get("schema_version", CONTENT_SCHEMA_VERSION) != CONTENT_SCHEMA_VERSION:
        raise _bad(f"{path}.schema_version", "unsupported content schema version")
    return dict(value)


def validated_content(value: Any, path: str = "content") -> dict[str, Any]:
    """Validate a history entry's content with the content model and return its JSON form.

    Accepts ``str``, a content dict, a :class:`~adk_actors.content.Content` or an object with ``to_dict()``.
    Everything the content model rejects is rejected here (``file://`` or credentialed URIs, MIME types with
    parameters or capitals, oversize inline data or text, unknown keys...), plus NUL characters anywhere.

    Raises:
        ContentError: the content model's reason (``invalid_uri``, ``invalid_mime_type``, ``limit_exceeded``,
            ``invalid_part``, ``unknown_key``...), ``invalid_content`` (not content / unsupported schema version) or
            ``invalid_json`` (a NUL character); ``details["path"]`` names the entry.
    """
    if isinstance(value, Content):
        checked = value
    else:
        raw = _content_dict(value, path) if not isinstance(value, str) else value
        if isinstance(raw, dict):
            raw = {
                **raw,
                "schema_version": raw.get("schema_version", CONTENT_SCHEMA_VERSION),
                "parts": list(raw["parts"]),
            }
        try:
            checked = validate(raw)
        except ContentError as exc:
            raise ContentError(exc.message, reason=exc.reason, details={**exc.details, "path": path}) from None
    out = checked.to_dict()
    try:
        check_json_safe(out, "$")
    except ValidationError as exc:
        raise ContentError(
            "content holds a NUL character",
            reason="invalid_json",
            details={"path": path, "where": exc.details.get("path")},
        ) from None
    return out


def content_to_wire(content: Any, role: str, path: str = "content") -> dict[str, Any]:
    """A content value (``str`` or content dict) → a wire ``Content`` with ``role``.

    Raises:
        ContentError: reason ``invalid_content``.
    """
    parts = _content_dict(content, path)["parts"]
    return {"role": role, "parts": [part_to_wire(p, f"{path}.parts[{i}]") for i, p in enumerate(parts)]}


def part_from_wire(wire: Mapping[str, Any]) -> dict[str, Any]:
    """One Gemini wire ``Part`` (either spelling) → one content part.

    Raises:
        ProviderError: reason ``unexpected_function_response`` (function responses belong to the user side) or
            ``unsupported_response_part`` (a part kind the content model does not hold), ``malformed_response``.
    """
    if not isinstance(wire, Mapping):
        raise ProviderError("a response part is not an object", reason="malformed_response")

    def get(camel: str, snake: str) -> Any:
        return wire[camel] if camel in wire else wire.get(snake)

    part: dict[str, Any]
    inline, file_data, call = (
        get("inlineData", "inline_data"),
        get("fileData", "file_data"),
        get("functionCall", "function_call"),
    )
    try:
        if "text" in wire:
            if not isinstance(wire["text"], str):
                raise ValueError("text")
            part = {"type": "text", "text": wire["text"]}
            if wire.get("thought") is True:
                part["thought"] = True
        elif isinstance(inline, Mapping):
            mime = inline.get("mimeType", inline.get("mime_type"))
            if not isinstance(mime, str):
                raise ValueError("inlineData.mimeType")
            part = {"type": "inline_data", "mime_type": mime, "data": normalise_b64(inline.get("data", ""))}
        elif isinstance(file_data, Mapping):
            uri = file_data.get("fileUri", file_data.get("file_uri"))
            if not isinstance(uri, str):
                raise ValueError("fileData.fileUri")
            part = {"type": "file_data", "uri": uri}
            mime = file_data.get("mimeType", file_data.get("mime_type"))
            if isinstance(mime, str):
                part = {"type": "file_data", "mime_type": mime, "uri": uri}
        elif isinstance(call, Mapping):
            name, args = call.get("name"), call.get("args", {})
            if not isinstance(name, str) or not isinstance(args, Mapping):
                raise ValueError("functionCall")
            part = {"type": "function_call", "name": name, "args": dict(args)}
            if isinstance(call.get("id"), str) and call["id"]:
                part["id"] = call["id"]
        elif "functionResponse" in wire or "function_response" in wire:
            raise ProviderError("the model returned a function_response part", reason="unexpected_function_response")
        else:
            raise ProviderError(
                "the model returned a part kind the content model does not hold",
                reason="unsupported_response_part",
                details={"keys": sorted(k for k in wire if isinstance(k, str))},
            )
        signature = get("thoughtSignature", "thought_signature")
        if signature is not None:
            part["thought_signature"] = normalise_b64(signature)
    except ValueError as exc:
        raise ProviderError(
            "a response part is malformed", reason="malformed_response", details={"field": str(exc)}
        ) from None
    return part


def tools_to_wire(tools: Sequence[Any], builtin_tools: Sequence[str]) -> list[dict[str, Any]]:
    """Function declarations and built-ins → ``tools``: one ``functionDeclarations`` and one ``googleSearch``.

    Raises:
        ConfigError: ``unknown_key`` for an unknown declaration key, ``invalid_value`` for a bad declaration,
            ``duplicate_tool`` for a name declared twice.
    """
    declarations: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        if not isinstance(tool, Mapping):
            raise ConfigError(
                f"{path} must be a function declaration object",
                reason="invalid_value",
                details={"key": path, "expected": "a function declaration object"},
            )
        decl: dict[str, Any] = {}
        for key, value in tool.items():
            if key not in _DECLARATION_KEYS:
                raise ConfigError(f"unknown key {path}.{key}", reason="unknown_key", details={"key": f"{path}.{key}"})
            decl[_DECLARATION_KEYS[key]] = value
        name = decl.get("name")
        if not isinstance(name, str) or not _FUNCTION_NAME_RE.match(name):
            raise ConfigError(
                f"{path}.name is not a valid function name",
                reason="invalid_value",
                details={"key": f"{path}.name", "expected": "[A-Za-z_][A-Za-z0-9_.:-]*, <= 128 chars"},
            )
        if name in seen:
            raise ConfigError(
                f"function {name!r} is declared twice",
                reason="duplicate_tool",
                details={"key": f"{path}.name", "name": name},
            )
        seen.add(name)
        for a, b in (("parameters", "parametersJsonSchema"), ("response", "responseJsonSchema")):
            if a in decl and b in decl:
                raise ConfigError(
                    f"{path}: {a} and {b} are mutually exclusive",
                    reason="conflicting_keys",
                    details={"keys": [f"{path}.{a}", f"{path}.{b}"]},
                )
        for key in ("parameters", "parametersJsonSchema", "response", "responseJsonSchema"):
            if key in decl and not isinstance(decl[key], Mapping):
                raise ConfigError(
                    f"{path}.{key} must be a schema object",
                    reason="invalid_value",
                    details={"key": f"{path}.{key}", "expected": "a schema object"},
                )
        if "description" in decl and not isinstance(decl["description"], str):
            raise ConfigError(
                f"{path}.description must be a string",
                reason="invalid_value",
                details={"key": f"{path}.description", "expected": "a string"},
            )
        declarations.append(decl)
    wire: list[dict[str, Any]] = []
    if declarations:
        wire.append({"functionDeclarations": declarations})
    if "google_search" in builtin_tools:
        wire.append({"googleSearch": {}})
    return wire


def prefix_members(cfg: GeminiConfig, system_parts: list[dict[str, Any]], tools: Sequence[Any]) -> dict[str, Any]:
    """The stable prefix members of a request: ``systemInstruction``, ``tools``, ``toolConfig`` (those present).

    Raises:
        ConfigError: a malformed tool declaration.
    """
    members: dict[str, Any] = {}
    if system_parts:
        members["systemInstruction"] = {"role": "user", "parts": system_parts}
    wire_tools = tools_to_wire(tools, cfg.builtin_tools)
    if wire_tools:
        members["tools"] = wire_tools
    if cfg.tool_config_wire:
        members["toolConfig"] = cfg.tool_config_wire
    return members


def system_parts_of(cfg: GeminiConfig, history: Sequence[Any]) -> list[dict[str, Any]]:
    """The ``systemInstruction`` parts of a request: the config's instructions, then ``system`` history entries.

    Raises:
        ContentError: a malformed ``system`` entry.
    """
    parts: list[dict[str, Any]] = [{"text": text} for text in cfg.system_instruction]
    for i, entry in enumerate(history):
        if isinstance(entry, Mapping) and entry.get("role") == "system" and "content" in entry:
            path = f"history[{i}].content"
            wire = content_to_wire(validated_content(entry["content"], path), "system", path)
            if any(set(p) - {"text"} for p in wire["parts"]):
                raise _bad(path, "system entries may hold text parts only")
            parts.extend(wire["parts"])
    return parts


def build_request(cfg: GeminiConfig, history: Sequence[Any], tools: Sequence[Any] = ()) -> dict[str, Any]:
    """The ``GenerateContentRequest`` body for ``history`` under ``cfg``.

    ``history`` entries are ``{"role": "user"|"model"|"system", "content": str | content dict}``; ``system``
    entries join the config's instructions in ``systemInstruction``.

    Every entry's content is validated with :func:`adk_actors.content.validate` first (see
    :func:`validated_content`), so nothing the content model rejects is ever sent.

    Raises:
        ContentError: a malformed history entry or part (reason ``invalid_content``, ``invalid_role``,
            ``empty_history``, or the content model's own reason such as ``invalid_uri``, ``invalid_mime_type``,
            ``limit_exceeded``, ``invalid_json``).
        ConfigError: a malformed tool declaration.
    """
    if isinstance(history, str | Mapping) or not isinstance(history, Sequence):
        raise ContentError(
            "history must be a list of {role, content}", reason="invalid_content", details={"path": "history"}
        )
    contents: list[dict[str, Any]] = []
    system_parts: list[dict[str, Any]] = [{"text": text} for text in cfg.system_instruction]
    for i, entry in enumerate(history):
        path = f"history[{i}]"
        if not isinstance(entry, Mapping) or "content" not in entry:
            raise _bad(path, "expected {role, content}")
        role = entry.get("role", "user")
        if role not in _ROLES:
            raise ContentError(
                f"{path}.role must be user, model or system",
                reason="invalid_role",
                details={"path": f"{path}.role", "role": str(role)[:64]},
            )
        wire = content_to_wire(validated_content(entry["content"], f"{path}.content"), role, f"{path}.content")
        if role == "system":
            if any(set(p) - {"text"} for p in wire["parts"]):
                raise _bad(f"{path}.content", "system entries may hold text parts only")
            system_parts.extend(wire["parts"])
        elif wire["parts"]:
            contents.append(wire)
    if not contents:
        raise ContentError(
            "the request has no user or model content", reason="empty_history", details={"path": "history"}
        )
    body: dict[str, Any] = {"contents": contents}
    if cfg.cached_content is not None:  # the cache holds the prefix; the service refuses it sent again
        body["cachedContent"] = cfg.cached_content
    else:
        body.update(prefix_members(cfg, system_parts, tools))
    if cfg.safety_settings_wire:
        body["safetySettings"] = [dict(s) for s in cfg.safety_settings_wire]
    if cfg.generation_config_wire:
        body["generationConfig"] = cfg.generation_config_wire
    return body
