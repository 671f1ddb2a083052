"""The versioned content value: an ordered tuple of parts with whole-value limits."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from adk_actors.content.limits import DEFAULT_LIMITS, ContentLimits
from adk_actors.content.parts import (
    PART_CLASSES,
    FileDataPart,
    FunctionCallPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
    part_from_dict,
)
from adk_actors.errors import ContentError

__all__ = ["CONTENT_SCHEMA_VERSION", "Content", "as_content", "new", "validate"]

CONTENT_SCHEMA_VERSION = 1


def _with_part_index(exc: ContentError, index: int) -> ContentError:
    return ContentError(exc.message, reason=exc.reason, details={**exc.details, "part": index})


@dataclass(frozen=True, slots=True, kw_only=True)
class Content:
    """An ordered, validated sequence of parts; the JSON form is ``{"schema_version": 1, "parts": [...]}``."""

    parts: tuple[Part, ...] = ()
    """The parts, in order (a list is accepted and stored as a tuple)."""

    def __post_init__(self) -> None:
        parts = self.parts
        if isinstance(parts, list):
            parts = tuple(parts)
        if not isinstance(parts, tuple):
            raise ContentError(
                "content parts must be a sequence",
                reason="invalid_content",
                details={"field": "parts", "type": type(parts).__name__},
            )
        for index, part in enumerate(parts):
            if not isinstance(part, PART_CLASSES):
                raise ContentError(
                    "not a content part", reason="invalid_part", details={"part": index, "type": type(part).__name__}
                )
        object.__setattr__(self, "parts", parts)
        self._check_totals(DEFAULT_LIMITS)

    def _check_totals(self, limits: ContentLimits) -> None:
        if len(self.parts) > limits.max_parts:
            raise ContentError(
                "too many parts",
                reason="limit_exceeded",
                details={"field": "parts", "limit": "max_parts", "max": limits.max_parts, "size": len(self.parts)},
            )
        total = sum(p.size for p in self.parts if isinstance(p, InlineDataPart))
        if total > limits.max_inline_total_bytes:
            raise ContentError(
                "too much inline data",
                reason="limit_exceeded",
                details={
                    "field": "parts",
                    "limit": "max_inline_total_bytes",
                    "max": limits.max_inline_total_bytes,
                    "size": total,
                },
            )

    def check(self, limits: ContentLimits | None = None) -> Content:
        """Validate against (possibly lowered) ``limits`` and return ``self``.

        Raises:
            ContentError: reason ``limit_exceeded`` (``details`` name the limit and the part index).
        """
        active = limits or DEFAULT_LIMITS
        self._check_totals(active)
        for index, part in enumerate(self.parts):
            try:
                part.check(active)
            except ContentError as exc:
                raise _with_part_index(exc, index) from None
        return self

    @classmethod
    def from_text(cls, value: str) -> Content:
        """Content holding one visible text part.

        Raises:
            ContentError: reason ``invalid_part`` or ``limit_exceeded``.
        """
        return cls(parts=(TextPart(text=value),))

    @classmethod
    def from_dict(cls, data: Any, *, limits: ContentLimits | None = None) -> Content:
        """Decode the JSON form strictly (unknown keys, unknown part types and wrong types rejected).

        Raises:
            ContentError: with a precise reason; ``details`` carry only structure (field, part index, limit).
        """
        if not isinstance(data, dict):
            raise ContentError("content must be a map", reason="invalid_content", details={"type": type(data).__name__})
        if set(data) != {"schema_version", "parts"}:
            missing = sorted({"schema_version", "parts"} - set(data))
            raise ContentError(
                "content must have exactly schema_version and parts",
                reason="invalid_content",
                details={"missing": missing, "unknown": len(set(data) - {"schema_version", "parts"})},
            )
        version = data["schema_version"]
        if version != CONTENT_SCHEMA_VERSION or isinstance(version, bool) or not isinstance(version, int):
            raise ContentError(
                "unsupported content schema version",
                reason="unsupported_schema_version",
                details={"supported": CONTENT_SCHEMA_VERSION},
            )
        raw_parts = data["parts"]
        if not isinstance(raw_parts, list):
            raise ContentError(
                "content parts must be a list",
                reason="invalid_content",
                details={"field": "parts", "type": type(raw_parts).__name__},
            )
        active = limits or DEFAULT_LIMITS
        if len(raw_parts) > active.max_parts:
            raise ContentError(
                "too many parts",
                reason="limit_exceeded",
                details={"field": "parts", "limit": "max_parts", "max": active.max_parts, "size": len(raw_parts)},
            )
        parts: list[Part] = []
        for index, raw in enumerate(raw_parts):
            try:
                parts.append(part_from_dict(raw, limits=active))
            except ContentError as exc:
                raise _with_part_index(exc, index) from None
        value = cls(parts=tuple(parts))
        value._check_totals(active)
        return value

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"schema_version": 1, "parts": [...]}`` (a fresh, JSON-safe copy)."""
        return {"schema_version": CONTENT_SCHEMA_VERSION, "parts": [p.to_dict() for p in self.parts]}

    def visible_text(self) -> str:
        """Concatenate the text of every non-thought text part (``""`` when there is none)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart) and not p.thought)

    def text_only(self) -> str | None:
        """The visible text when every part is a text part (thoughts ignored), else ``None``.

        This is what keeps a text-only answer a plain ``str`` at the API.
        """
        if all(isinstance(p, TextPart) for p in self.parts):
            return self.visible_text()
        return None

    def simplified(self) -> str | Content:
        """The visible text when the content is text-only, else ``self`` (the API's return shape)."""
        only = self.text_only()
        return self if only is None else only

    def function_calls(self) -> tuple[FunctionCallPart, ...]:
        """The function-call parts, in order."""
        return tuple(p for p in self.parts if isinstance(p, FunctionCallPart))

    def function_responses(self) -> tuple[FunctionResponsePart, ...]:
        """The function-response parts, in order."""
        return tuple(p for p in self.parts if isinstance(p, FunctionResponsePart))

    def has_media(self) -> bool:
        """Whether any part is inline data or a file reference."""
        return any(isinstance(p, InlineDataPart | FileDataPart) for p in self.parts)


def new(parts: Iterable[Part], *, limits: ContentLimits | None = None) -> Content:
    """Build content from parts, validated against ``limits``.

    Raises:
        ContentError: reason ``invalid_part`` or ``limit_exceeded``.
    """
    if isinstance(parts, str | bytes | dict):
        raise ContentError(
            "content parts must be a sequence of parts",
            reason="invalid_content",
            details={"type": type(parts).__name__},
        )
    try:
        items = tuple(parts)
    except TypeError:
        raise ContentError(
            "content parts must be a sequence of parts",
            reason="invalid_content",
            details={"type": type(parts).__name__},
        ) from None
    return Content(parts=items).check(limits)


def validate(value: Any, *, limits: ContentLimits | None = None) -> Content:
    """Validate a ``str``, a content map or a :class:`Content` and return a :class:`Content`.

    Raises:
        ContentError: with a precise reason tag; never echoing the rejected value.
    """
    if isinstance(value, Content):
        return value.check(limits)
    if isinstance(value, str):
        return Content.from_text(value).check(limits)
    if isinstance(value, dict):
        return Content.from_dict(value, limits=limits)
    raise ContentError("not content", reason="invalid_content", details={"type": type(value).__name__})


def as_content(
    value: str | dict[str, Any] | Content | Part | Sequence[Part], *, limits: ContentLimits | None = None
) -> Content:
    """Coerce a ``str``, content map, :class:`Content`, single part or sequence of parts to :class:`Content`.

    Raises:
        ContentError: with a precise reason tag.
    """
    if isinstance(value, PART_CLASSES):
        return new((value,), limits=limits)  # type: ignore[arg-type]
    if isinstance(value, list | tuple):
        return new(value, limits=limits)
    return validate(value, limits=limits)
