"""Request-body schema of the Gemini v1beta REST API and a strict, proto-JSON-like normaliser.

:func:`normalize` walks a parsed JSON body against a message description, accepting camelCase and snake_case field
names at every depth, and returns a copy with canonical camelCase keys. Unknown fields are collected and reported as
the real service does (``Invalid JSON payload received. Unknown name "X" at 'a.b[0]': Cannot find field.`` plus a
``google.rpc.BadRequest`` detail with snake_case paths); wrongly typed values raise ``Invalid value at 'path' (TYPE),
value``. Free-form values (``args``, ``response``, JSON schemas) are copied verbatim.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .wire import ApiError, b64decode_any, invalid_argument, parse_duration, parse_timestamp

_PKG = "type.googleapis.com/google.ai.generativelanguage.v1beta."


def snake(name: str) -> str:
    """camelCase → snake_case (``$defs`` stays)."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


@dataclass
class Scalar:
    """A scalar type: ``kind`` is one of string, bool, float, int32, int64, bytes, duration, timestamp, any, struct."""

    kind: str


@dataclass
class Enum:
    """An enum given by name (UPPER_SNAKE) or number."""

    name: str
    values: tuple[str, ...]
    case_insensitive: bool = False


@dataclass
class Repeated:
    """A repeated field."""

    item: Any


@dataclass
class MapOf:
    """A proto map field (string keys)."""

    value: Any


@dataclass
class Message:
    """A message with named fields; ``oneofs`` maps a oneof group name to its member camelCase names."""

    name: str
    fields: dict[str, Any] = field(default_factory=dict)
    oneofs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def lookup(self, key: str) -> str | None:
        """Return the canonical camelCase name for ``key`` (camel or snake spelling), or None."""
        if key in self.fields:
            return key
        if key in self.aliases:
            return self.aliases[key]
        return None

    def finish(self) -> Message:
        """Compute snake_case aliases for every field."""
        for name in self.fields:
            self.aliases.setdefault(snake(name), name)
        return self


STRING = Scalar("string")
BOOL = Scalar("bool")
FLOAT = Scalar("float")
INT32 = Scalar("int32")
INT64 = Scalar("int64")
BYTES = Scalar("bytes")
ANY = Scalar("any")
STRUCT = Scalar("struct")
DURATION = Scalar("duration")
TIMESTAMP = Scalar("timestamp")

TYPES = ("TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL")
TYPE_ENUM = Enum("Type", TYPES, True)
HARM_CATEGORIES = (
    "HARM_CATEGORY_UNSPECIFIED", "HARM_CATEGORY_DEROGATORY", "HARM_CATEGORY_TOXICITY", "HARM_CATEGORY_VIOLENCE",
    "HARM_CATEGORY_SEXUAL", "HARM_CATEGORY_MEDICAL", "HARM_CATEGORY_DANGEROUS", "HARM_CATEGORY_HARASSMENT",
    "HARM_CATEGORY_HATE_SPEECH", "HARM_CATEGORY_SEXUALLY_EXPLICIT", "HARM_CATEGORY_DANGEROUS_CONTENT",
    "HARM_CATEGORY_CIVIC_INTEGRITY", "HARM_CATEGORY_JAILBREAK",
)  # fmt: skip
THRESHOLDS = (
    "HARM_BLOCK_THRESHOLD_UNSPECIFIED", "BLOCK_LOW_AND_ABOVE", "BLOCK_MEDIUM_AND_ABOVE", "BLOCK_ONLY_HIGH",
    "BLOCK_NONE", "OFF",
)  # fmt: skip

SCHEMA = Message(
    "Schema",
    {
        "type": TYPE_ENUM, "format": STRING, "title": STRING, "description": STRING, "nullable": BOOL,
        "enum": Repeated(STRING), "maxItems": INT64, "minItems": INT64, "required": Repeated(STRING),
        "minProperties": INT64, "maxProperties": INT64, "minLength": INT64, "maxLength": INT64, "pattern": STRING,
        "example": ANY, "propertyOrdering": Repeated(STRING), "default": ANY, "minimum": FLOAT, "maximum": FLOAT,
        "additionalProperties": ANY, "$ref": STRING,
    },
)  # fmt: skip
SCHEMA.fields["items"] = SCHEMA
SCHEMA.fields["properties"] = MapOf(SCHEMA)
SCHEMA.fields["anyOf"] = Repeated(SCHEMA)
SCHEMA.fields["$defs"] = MapOf(SCHEMA)
SCHEMA.aliases.update({"ref": "$ref", "defs": "$defs"})
SCHEMA.finish()

BLOB = Message("Blob", {"mimeType": STRING, "data": BYTES}).finish()
FILE_DATA = Message("FileData", {"mimeType": STRING, "fileUri": STRING}).finish()
VIDEO_METADATA = Message("VideoMetadata", {"startOffset": DURATION, "endOffset": DURATION, "fps": FLOAT}).finish()
MEDIA_RES_LEVELS = (
    "MEDIA_RESOLUTION_UNSPECIFIED", "MEDIA_RESOLUTION_LOW", "MEDIA_RESOLUTION_MEDIUM", "MEDIA_RESOLUTION_HIGH",
    "MEDIA_RESOLUTION_ULTRA_HIGH",
)  # fmt: skip
PART_MEDIA_RES = Message("MediaResolution", {"level": Enum("Level", MEDIA_RES_LEVELS), "numTokens": INT32}).finish()
FUNCTION_CALL = Message("FunctionCall", {"id": STRING, "name": STRING, "args": STRUCT}).finish()
FR_PART = Message(
    "FunctionResponsePart", {"inlineData": BLOB, "fileData": FILE_DATA}, {"data": ("inlineData", "fileData")}
).finish()
FUNCTION_RESPONSE = Message(
    "FunctionResponse",
    {
        "id": STRING, "name": STRING, "response": STRUCT, "parts": Repeated(FR_PART), "willContinue": BOOL,
        "scheduling": Enum("Scheduling", ("SCHEDULING_UNSPECIFIED", "SILENT", "WHEN_IDLE", "INTERRUPT")),
    },
).finish()  # fmt: skip
EXECUTABLE_CODE = Message(
    "ExecutableCode", {"language": Enum("Language", ("LANGUAGE_UNSPECIFIED", "PYTHON")), "code": STRING, "id": STRING}
).finish()
OUTCOMES = ("OUTCOME_UNSPECIFIED", "OUTCOME_OK", "OUTCOME_FAILED", "OUTCOME_DEADLINE_EXCEEDED")
CODE_RESULT = Message(
    "CodeExecutionResult", {"outcome": Enum("Outcome", OUTCOMES), "output": STRING, "id": STRING}
).finish()
TOOL_TYPES = (
    "TOOL_TYPE_UNSPECIFIED", "GOOGLE_SEARCH_WEB", "GOOGLE_SEARCH_IMAGE", "URL_CONTEXT", "GOOGLE_MAPS", "FILE_SEARCH",
)  # fmt: skip
TOOL_CALL = Message("ToolCall", {"id": STRING, "toolType": Enum("ToolType", TOOL_TYPES), "args": STRUCT}).finish()
TOOL_RESPONSE = Message(
    "ToolResponse", {"id": STRING, "toolType": Enum("ToolType", TOOL_TYPES), "response": STRUCT}
).finish()
PART_DATA = (
    "text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult",
    "toolCall", "toolResponse",
)  # fmt: skip
PART = Message(
    "Part",
    {
        "text": STRING, "inlineData": BLOB, "fileData": FILE_DATA, "functionCall": FUNCTION_CALL,
        "functionResponse": FUNCTION_RESPONSE, "executableCode": EXECUTABLE_CODE, "codeExecutionResult": CODE_RESULT,
        "toolCall": TOOL_CALL, "toolResponse": TOOL_RESPONSE, "thought": BOOL, "thoughtSignature": BYTES,
        "videoMetadata": VIDEO_METADATA, "mediaResolution": PART_MEDIA_RES, "partMetadata": STRUCT,
        "mediaProcessing": ANY,
    },
    {"data": PART_DATA},
).finish()  # fmt: skip
CONTENT = Message("Content", {"role": STRING, "parts": Repeated(PART)}).finish()

FUNCTION_DECLARATION = Message(
    "FunctionDeclaration",
    {
        "name": STRING, "description": STRING, "parameters": SCHEMA, "parametersJsonSchema": ANY,
        "response": SCHEMA, "responseJsonSchema": ANY,
        "behavior": Enum("Behavior", ("UNSPECIFIED", "BLOCKING", "NON_BLOCKING")),
    },
).finish()  # fmt: skip
INTERVAL = Message("Interval", {"startTime": TIMESTAMP, "endTime": TIMESTAMP}).finish()
GOOGLE_SEARCH = Message("GoogleSearch", {"timeRangeFilter": INTERVAL, "searchTypes": ANY}).finish()
EMPTY = Message("Empty").finish()
TOOL = Message(
    "Tool",
    {
        "functionDeclarations": Repeated(FUNCTION_DECLARATION), "googleSearch": GOOGLE_SEARCH,
        "codeExecution": EMPTY, "urlContext": EMPTY, "googleSearchRetrieval": ANY, "googleMaps": ANY,
        "fileSearch": ANY, "computerUse": ANY, "mcpServers": ANY,
    },
).finish()  # fmt: skip
FC_MODES = ("MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED")
FUNCTION_CALLING_CONFIG = Message(
    "FunctionCallingConfig", {"mode": Enum("Mode", FC_MODES), "allowedFunctionNames": Repeated(STRING)}
).finish()
TOOL_CONFIG = Message(
    "ToolConfig",
    {
        "functionCallingConfig": FUNCTION_CALLING_CONFIG,
        "retrievalConfig": ANY,
        "includeServerSideToolInvocations": BOOL,
    },
).finish()
SAFETY_SETTING = Message(
    "SafetySetting", {"category": Enum("HarmCategory", HARM_CATEGORIES), "threshold": Enum("Threshold", THRESHOLDS)}
).finish()
THINKING_LEVELS = ("THINKING_LEVEL_UNSPECIFIED", "MINIMAL", "LOW", "MEDIUM", "HIGH", "XHIGH")
THINKING_CONFIG = Message(
    "ThinkingConfig",
    {"includeThoughts": BOOL, "thinkingBudget": INT32, "thinkingLevel": Enum("ThinkingLevel", THINKING_LEVELS)},
).finish()
GENERATION_CONFIG = Message(
    "GenerationConfig",
    {
        "stopSequences": Repeated(STRING), "responseMimeType": STRING, "responseSchema": SCHEMA,
        "responseJsonSchema": ANY, "candidateCount": INT32, "maxOutputTokens": INT32, "temperature": FLOAT,
        "topP": FLOAT, "topK": INT32, "seed": INT32, "presencePenalty": FLOAT, "frequencyPenalty": FLOAT,
        "responseLogprobs": BOOL, "logprobs": INT32, "enableEnhancedCivicAnswers": BOOL,
        "responseModalities": Repeated(Enum("Modality", ("MODALITY_UNSPECIFIED", "TEXT", "IMAGE", "AUDIO"))),
        "speechConfig": ANY, "thinkingConfig": THINKING_CONFIG, "imageConfig": ANY,
        "mediaResolution": Enum("MediaResolution", MEDIA_RES_LEVELS[:4]), "audioTranscriptionConfig": ANY,
    },
).finish()  # fmt: skip
GENERATE_REQUEST = Message(
    "GenerateContentRequest",
    {
        "model": STRING, "contents": Repeated(CONTENT), "systemInstruction": CONTENT, "tools": Repeated(TOOL),
        "toolConfig": TOOL_CONFIG, "safetySettings": Repeated(SAFETY_SETTING), "generationConfig": GENERATION_CONFIG,
        "cachedContent": STRING, "serviceTier": Enum("ServiceTier", ("unspecified", "standard", "flex", "priority")),
        "store": BOOL, "continuationToken": BYTES, "labels": MapOf(STRING),
    },
).finish()  # fmt: skip
COUNT_TOKENS_REQUEST = Message(
    "CountTokensRequest", {"model": STRING, "contents": Repeated(CONTENT), "generateContentRequest": GENERATE_REQUEST}
).finish()
CACHED_CONTENT = Message(
    "CachedContent",
    {
        "name": STRING, "model": STRING, "displayName": STRING, "ttl": DURATION, "expireTime": TIMESTAMP,
        "contents": Repeated(CONTENT), "systemInstruction": CONTENT, "tools": Repeated(TOOL),
        "toolConfig": TOOL_CONFIG, "createTime": TIMESTAMP, "updateTime": TIMESTAMP, "usageMetadata": ANY,
    },
    {"expiration": ("ttl", "expireTime")},
).finish()  # fmt: skip

_TYPE_NAMES = {
    "string": "TYPE_STRING", "bool": "TYPE_BOOL", "float": "TYPE_FLOAT", "int32": "TYPE_INT32", "int64": "TYPE_INT64",
    "bytes": "TYPE_BYTES", "duration": "type.googleapis.com/google.protobuf.Duration",
    "timestamp": "type.googleapis.com/google.protobuf.Timestamp",
    "struct": "type.googleapis.com/google.protobuf.Struct",
}  # fmt: skip


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _render(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _bad_value(path: str, type_name: str, value: Any, extra: str = "") -> ApiError:
    msg = f"Invalid value at '{path}' ({type_name}), {extra or _render(value)}"
    return invalid_argument(msg, field=path)


class _Walker:
    def __init__(self) -> None:
        self.unknown: list[tuple[str, str]] = []

    def message(self, value: Any, msg: Message, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _bad_value(path, _PKG + msg.name, value)
        out: dict[str, Any] = {}
        oneof_set: dict[str, str] = {}
        for key, sub in value.items():
            canon = msg.lookup(key)
            if canon is None:
                self.unknown.append((key, path))
                continue
            if sub is None:
                continue  # proto JSON: null means "not set"
            for group, members in msg.oneofs.items():
                if canon in members:
                    if group in oneof_set:
                        raise invalid_argument(
                            f"Invalid JSON payload received. Oneof field '{group}' is already set. Cannot set '{key}'",
                            field=path,
                        )
                    oneof_set[group] = canon
            out[canon] = self.value(sub, msg.fields[canon], _join(path, snake(canon).lstrip("$")))
        return out

    def value(self, value: Any, typ: Any, path: str) -> Any:
        if isinstance(typ, Message):
            return self.message(value, typ, path)
        if isinstance(typ, Repeated):
            if not isinstance(value, list):  # the service accepts a single value for a repeated field
                return [self.value(value, typ.item, path)]
            return [self.value(v, typ.item, f"{path}[{i}]") for i, v in enumerate(value)]
        if isinstance(typ, MapOf):
            if not isinstance(value, dict):
                raise _bad_value(path, _PKG + "Map", value)
            return {k: self.value(v, typ.value, f"{path}[{i}].value") for i, (k, v) in enumerate(value.items())}
        if isinstance(typ, Enum):
            return _enum(value, typ, path)
        return _scalar(value, typ.kind, path)


def _enum(value: Any, typ: Enum, path: str) -> str:
    if isinstance(value, bool):
        raise _bad_value(path, _PKG + typ.name, value)
    if isinstance(value, int | float) and value == int(value) and 0 <= int(value) < len(typ.values):
        return typ.values[int(value)]
    if isinstance(value, str):
        if value in typ.values:
            return value
        if typ.case_insensitive and value.upper() in typ.values:
            return value.upper()
    raise _bad_value(path, _PKG + typ.name, value)


def _scalar(value: Any, kind: str, path: str) -> Any:
    tname = _TYPE_NAMES.get(kind, kind)
    if kind in ("any",):
        return value
    if kind == "struct":
        if not isinstance(value, dict):
            raise _bad_value(path, tname, value)
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise _bad_value(path, tname, value)
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise _bad_value(path, tname, value)
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise _bad_value(path, tname, value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise _bad_value(path, tname, value) from None
        return value
    if kind in ("int32", "int64"):
        if isinstance(value, bool):
            raise _bad_value(path, tname, value)
        if isinstance(value, str):
            if not re.fullmatch(r"-?\d+", value.strip()):
                raise _bad_value(path, tname, value)
            return int(value)
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")) or value != int(value):
                raise _bad_value(path, tname, value)
            return int(value)
        if not isinstance(value, int):
            raise _bad_value(path, tname, value)
        return value
    if kind == "bytes":
        if not isinstance(value, str):
            raise _bad_value(path, tname, value)
        try:
            b64decode_any(value)
        except ValueError:
            raise _bad_value(path, tname, value, f"Base64 decoding failed for {_render(value)}") from None
        return value
    if kind == "duration":
        try:
            parse_duration(value)
        except ValueError:
            raise _bad_value(path, tname, value) from None
        return value
    if kind == "timestamp":
        try:
            parse_timestamp(value)
        except ValueError:
            raise _bad_value(path, tname, value) from None
        return value
    raise AssertionError(kind)  # pragma: no cover


def normalize(body: Any, msg: Message) -> dict[str, Any]:
    """Validate ``body`` against ``msg`` and return it with canonical camelCase keys (raises :class:`ApiError`)."""
    walker = _Walker()
    out = walker.message(body, msg, "")
    if walker.unknown:
        lines: list[str] = []
        violations: list[dict[str, str]] = []
        for name, path in walker.unknown:
            if path:
                line = f"Invalid JSON payload received. Unknown name {_render(name)} at '{path}': Cannot find field."
                violations.append({"field": path, "description": line})
            else:
                line = f"Invalid JSON payload received. Unknown name {_render(name)}: Cannot find field."
                violations.append({"description": line})
            lines.append(line)
        raise invalid_argument("\n".join(lines), violations=violations)
    return out
