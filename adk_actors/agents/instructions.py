"""Instruction templates: ``{key}``, ``{user:key}``, ``{app:key}``, ``{temp:key}`` filled from an invocation's
scoped state.

Placeholders are checked when the agent is spawned: a secret-like key (``{api_key}``, ``{user:token}``) is
rejected. ``{artifact.NAME}`` is filled with the text of the latest version of the session's artifact ``NAME``
(read in a worker through the Runner's ``artifact_svc``; a text or JSON MIME type, UTF-8); without an artifact
service the turn fails with ``no_artifact_service``, for a missing artifact with ``missing_artifact`` and for a
binary one with ``artifact_not_text``. Text that is not a placeholder (JSON examples such as ``{"a": 1}``) is
left alone. Rendering replaces each placeholder with the state value (strings as they are, other values as
canonical JSON); a missing key fails the turn with ``missing_state_key`` naming the key, never a value.

Dynamic providers (the reference's ``{dynamic, Module, Function}``): ``instructions`` / ``global_instruction`` may
be a function ``provider(scope) -> str`` (an importable function goes by name, a closure by value). It runs in a
worker for every turn with a bounded, read-only scope ``{"agent", "app_name", "user_id", "session_id", "state"}``
(secret-named state keys redacted); its text is used as it is. A provider that raises fails the turn with
``instruction_provider_failed`` (``details["type"]`` is the exception class); a non-``str`` or oversized answer with
``invalid_instruction``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from adk_actors.content.canonical import canonical_dumps
from adk_actors.errors import AgentError, ConfigError
from adk_actors.secrets import is_secret_key

__all__ = [
    "MAX_RENDERED_CHARS",
    "artifact_names",
    "check_template",
    "render_template",
    "resolve_instructions",
    "template_keys",
]

_PLACEHOLDER = re.compile(r"\{((?:(?:user|app|temp):)?[A-Za-z_][A-Za-z0-9_]*|artifact\.[^{}\s]+)\}")
MAX_RENDERED_CHARS = 1_000_000
"""Upper bound of one rendered instruction (a state value cannot blow up a prompt without limit)."""


def template_keys(text: str) -> list[str]:
    """The placeholder keys in ``text``, in order (``artifact.*`` included)."""
    return [m.group(1) for m in _PLACEHOLDER.finditer(text)]


def check_template(text: Any, field_name: str) -> None:
    """Check a static instruction template at spawn time.

    Raises:
        ConfigError: ``invalid_value`` (not a str), ``secret_state_key`` or ``invalid_artifact_placeholder``, with
            ``details["key"]`` naming the config key.
    """
    if text is None:
        return
    if not isinstance(text, str):
        raise ConfigError("instructions are str templates", reason="invalid_value", details={"key": field_name})
    for key in template_keys(text):
        if key.startswith("artifact."):
            from adk_actors.errors import ValidationError

            try:
                _check_artifact_name(key[len("artifact.") :])
            except ValidationError:
                raise ConfigError(
                    "an artifact placeholder names an invalid artifact",
                    reason="invalid_artifact_placeholder",
                    details={"key": field_name},
                ) from None
            continue
        if is_secret_key(key.partition(":")[2] or key):
            raise ConfigError(
                "instruction placeholders cannot read secret-like state keys",
                reason="secret_state_key",
                details={"key": field_name},
            )


def _check_artifact_name(name: str) -> None:
    from adk_actors.artifacts.base import check_artifact_name

    check_artifact_name(name)


def artifact_names(*templates: Any) -> tuple[str, ...]:
    """The artifact names the ``{artifact.NAME}`` placeholders of ``templates`` (``str`` ones) read, in order."""
    names: list[str] = []
    for text in templates:
        if isinstance(text, str):
            for key in template_keys(text):
                if key.startswith("artifact.") and key[len("artifact.") :] not in names:
                    names.append(key[len("artifact.") :])
    return tuple(names)


_TEXT_TYPES = ("application/json",)


def _artifact_texts(access: Any, names: tuple[str, ...]) -> dict[str, Any]:
    from adk_actors.errors import AdkError

    texts: dict[str, str] = {}
    for name in names:
        try:
            artifact = access.load("session", name, None)
        except AdkError as err:
            reason = "missing_artifact" if err.reason == "artifact_not_found" else err.reason
            return {"error": reason, "key": "artifact." + name[:128]}
        if not (artifact.mime_type.startswith("text/") or artifact.mime_type in _TEXT_TYPES):
            return {"error": "artifact_not_text", "key": "artifact." + name[:128]}
        try:
            texts["artifact." + name] = artifact.data.decode("utf-8")
        except UnicodeDecodeError:
            return {"error": "artifact_not_text", "key": "artifact." + name[:128]}
    return {"artifacts": texts}


def _preload(memory: tuple[Any, str, dict[str, Any]]) -> dict[str, Any]:
    """The Runner's memory preload: ``{"memory": block}`` (``""`` without hits), or an error when it failed and
    the Runner says ``on_error: fail``."""
    from adk_actors.errors import AdkError
    from adk_actors.memory.access import preload_block

    access, query, spec = memory
    try:
        hits = access.search(query, limit=spec["limit"], filter=spec["filter"], max_hit_bytes=spec["max_hit_bytes"])
    except AdkError as err:
        if spec["on_error"] == "skip":
            return {"memory": ""}
        return {"error": "memory_retrieval_failed", "type": err.reason[:128]}
    return {"memory": preload_block(hits, spec["max_total_bytes"])}


def resolve_instructions(
    local: Any,
    global_: Any,
    scope: dict[str, Any],
    artifacts: Any = None,
    names: tuple[str, ...] = (),
    memory: tuple[Any, str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run the dynamic instruction providers of one turn, read the artifacts its placeholders name and run the
    Runner's memory preload (in a worker).

    Returns:
        ``{"instructions": str, "global_instruction": str, "artifacts": {"artifact.NAME": text}, "memory": block}``
        (only the keys that apply), or ``{"error": reason, "key": ..., "type": ...}``.
    """
    out: dict[str, Any] = {}
    if memory is not None:
        preloaded = _preload(memory)
        if "error" in preloaded:
            return preloaded
        out.update(preloaded)
    if names:
        read = _artifact_texts(artifacts, names)
        if "error" in read:
            return read
        out.update(read)
    for key, ref in (("instructions", local), ("global_instruction", global_)):
        if ref is None:
            continue
        try:
            text = ref.resolve()(dict(scope))
        except Exception as exc:
            return {"error": "instruction_provider_failed", "key": key, "type": type(exc).__name__[:128]}
        if not isinstance(text, str) or len(text) > MAX_RENDERED_CHARS:
            return {"error": "invalid_instruction", "key": key}
        out[key] = text
    return out


def render_template(text: str, state: Mapping[str, Any]) -> str:
    """Fill ``text``'s placeholders from ``state``.

    Raises:
        AgentError: ``missing_state_key`` (``details["key"]`` names it) or ``instruction_too_large``.
    """

    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in state:
            raise AgentError(
                "the instruction reads a state key the invocation does not have",
                reason="missing_state_key",
                details={"key": key[:256]},
            )
        item = state[key]
        return item if isinstance(item, str) else canonical_dumps(item)

    rendered = _PLACEHOLDER.sub(value, text)
    if len(rendered) > MAX_RENDERED_CHARS:
        raise AgentError(
            "the rendered instruction is too large",
            reason="instruction_too_large",
            details={"max_chars": MAX_RENDERED_CHARS},
        )
    return rendered
