"""Semantic request validation beyond the field schema (the rules the real service enforces after parsing)."""

from __future__ import annotations

import re
from typing import Any

from .wire import ApiError

ROLE_MESSAGE = "Please use a valid role: user, model."
CACHE_CONFLICT_MESSAGE = (
    "CachedContent can not be used with GenerateContent request setting system_instruction, tools or tool_config."
    "\n\nProposed fix: move those values to CachedContent from GenerateContent request."
)
_FN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")
FN_NAME_MESSAGE = (
    "Invalid function name. Must start with a letter or an underscore. Must be a-z, A-Z, 0-9, or contain "
    "underscores, dots, colons and dashes, with a maximum length of 128."
)
ALLOWED_MIME = ("text/plain", "application/json", "application/xml", "application/yaml", "text/x.enum")
MIME_MESSAGE = (
    "allowed mimetypes are `text/plain`, `application/json`, `application/xml`, `application/yaml` and `text/x.enum`."
)
_PART_DATA = (
    "text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult",
    "toolCall", "toolResponse",
)  # fmt: skip


class Problems:
    """Collects ``* Request.path: message`` lines and raises them as one 400 INVALID_ARGUMENT."""

    def __init__(self, request_name: str) -> None:
        self.request_name = request_name
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        """Record one problem at a snake_case ``path`` (relative to the request)."""
        self.items.append((path, message))

    def raise_if_any(self) -> None:
        """Raise the collected problems, if any."""
        if not self.items:
            return
        lines = []
        for path, message in self.items:
            full = f"{self.request_name}.{path}" if path else self.request_name
            lines.append(f"* {full}: {message}\n")
        raise ApiError(400, "".join(lines), "INVALID_ARGUMENT")


def check_contents(contents: list[dict[str, Any]], probs: Problems, prefix: str, required: bool = True) -> None:
    """Roles, non-empty parts, the part oneof and function call/response names."""
    if not contents:
        if required:
            probs.add(f"{prefix}contents", "contents is not specified")
        return
    for i, content in enumerate(contents):
        role = content.get("role", "")
        if role not in ("", "user", "model"):
            raise ApiError(400, ROLE_MESSAGE, "INVALID_ARGUMENT")
        parts = content.get("parts") or []
        if not parts:
            probs.add(f"{prefix}contents[{i}].parts", "contents.parts must not be empty.")
            continue
        for j, part in enumerate(parts):
            ppath = f"{prefix}contents[{i}].parts[{j}]"
            if not any(k in part for k in _PART_DATA):
                probs.add(f"{ppath}.data", "required oneof field 'data' must have one initialized field")
            if "functionCall" in part and not part["functionCall"].get("name"):
                probs.add(f"{ppath}.function_call.name", "Name cannot be empty.")
            if "functionResponse" in part and not part["functionResponse"].get("name"):
                probs.add(f"{ppath}.function_response.name", "Name cannot be empty.")


def check_tools(tools: list[dict[str, Any]], probs: Problems, prefix: str) -> None:
    """Function declaration names and parameters/response schema exclusivity."""
    for i, tool in enumerate(tools or []):
        for j, decl in enumerate(tool.get("functionDeclarations") or []):
            dpath = f"{prefix}tools[{i}].function_declarations[{j}]"
            name = decl.get("name", "")
            if not name:
                probs.add(f"{dpath}.name", "Name cannot be empty.")
            elif not _FN_NAME.match(name):
                probs.add(f"{dpath}.name", FN_NAME_MESSAGE)
            if "parameters" in decl and "parametersJsonSchema" in decl:
                probs.add(
                    f"{dpath}.parameters_json_schema",
                    "parameters_json_schema must not be set when parameters is set.",
                )
            if "response" in decl and "responseJsonSchema" in decl:
                probs.add(f"{dpath}.response_json_schema", "response_json_schema must not be set when response is set.")


def check_generation_config(cfg: dict[str, Any], probs: Problems, prefix: str) -> None:
    """Mutually exclusive generation options and the response mime type."""
    if not cfg:
        return
    mime = cfg.get("responseMimeType")
    if mime is not None and mime not in ALLOWED_MIME:
        probs.add(f"{prefix}generation_config.response_mime_type", MIME_MESSAGE)
    if "responseSchema" in cfg and "responseJsonSchema" in cfg:
        probs.add(
            f"{prefix}generation_config.response_json_schema",
            "response_json_schema must not be set when response_schema is set.",
        )
    thinking = cfg.get("thinkingConfig") or {}
    if "thinkingLevel" in thinking and "thinkingBudget" in thinking:
        probs.add(
            f"{prefix}generation_config.thinking_config",
            "thinking_level and thinking_budget cannot be set at the same time.",
        )


def check_generate_request(req: dict[str, Any], request_name: str = "GenerateContentRequest", prefix: str = "") -> None:
    """All semantic checks of a normalised GenerateContentRequest (except caches and signatures)."""
    if req.get("cachedContent") and any(k in req for k in ("systemInstruction", "tools", "toolConfig")):
        raise ApiError(400, CACHE_CONFLICT_MESSAGE, "INVALID_ARGUMENT")
    probs = Problems(request_name)
    check_contents(req.get("contents") or [], probs, prefix)
    if "systemInstruction" in req:
        sys_parts = req["systemInstruction"].get("parts") or []
        for j, part in enumerate(sys_parts):
            if not any(k in part for k in _PART_DATA):
                probs.add(
                    f"{prefix}system_instruction.parts[{j}].data",
                    "required oneof field 'data' must have one initialized field",
                )
    check_tools(req.get("tools") or [], probs, prefix)
    check_generation_config(req.get("generationConfig") or {}, probs, prefix)
    probs.raise_if_any()


def check_cache_create(req: dict[str, Any]) -> None:
    """Semantic checks of a CreateCachedContent body."""
    probs = Problems("CreateCachedContentRequest")
    model = req.get("model")
    if not model:
        probs.add("cached_content.model", "model is not specified")
    elif not (model.startswith("models/") or model.startswith("tunedModels/")):
        probs.add("cached_content.model", "model must be in the format models/{model}")
    check_contents(req.get("contents") or [], probs, "cached_content.", required=False)
    check_tools(req.get("tools") or [], probs, "cached_content.")
    probs.raise_if_any()


FR_COUNT_MESSAGE = (
    "Please ensure that the number of function response parts is equal to the number of function call parts of the "
    "function call turn."
)


def check_unverified(req: dict[str, Any]) -> None:
    """Opt-in (``strict=True``) rules whose enforcement by the real service is unverified (messages assumed)."""
    cfg = req.get("generationConfig") or {}
    probs = Problems("GenerateContentRequest")
    if ("responseSchema" in cfg or "responseJsonSchema" in cfg) and cfg.get("responseMimeType") not in (
        "application/json",
        "text/x.enum",
    ):
        probs.add(
            "generation_config.response_mime_type",
            "response_mime_type must be application/json or text/x.enum when a response schema is set.",
        )
    fcc = (req.get("toolConfig") or {}).get("functionCallingConfig") or {}
    if fcc.get("allowedFunctionNames") and fcc.get("mode") not in ("ANY", "VALIDATED"):
        probs.add(
            "tool_config.function_calling_config.allowed_function_names",
            "allowed_function_names may only be set when mode is ANY or VALIDATED.",
        )
    probs.raise_if_any()
    contents = req.get("contents") or []
    for i, content in enumerate(contents):
        parts = content.get("parts") or []
        responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
        if not responses or i == 0 or contents[i - 1].get("role") != "model":
            continue
        calls = [p["functionCall"] for p in contents[i - 1].get("parts") or [] if "functionCall" in p]
        if len(calls) != len(responses):
            raise ApiError(400, FR_COUNT_MESSAGE, "INVALID_ARGUMENT")
        ids = {c.get("id") for c in calls if c.get("id")}
        for j, fr in enumerate(responses):
            if ids and fr.get("id") not in ids:
                probs.add(
                    f"contents[{i}].parts[{j}].function_response.id",
                    f"function response id {fr.get('id', '')!r} does not match a function call of the previous turn.",
                )
    probs.raise_if_any()
