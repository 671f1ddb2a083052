"""Content limits: the reference defaults, which are also ceilings an application may only lower."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from adk_actors.errors import ContentError

__all__ = ["CEILINGS", "DEFAULT_LIMITS", "ContentLimits", "MiB"]

MiB = 1024 * 1024

CEILINGS: dict[str, int] = {
    "max_parts": 64,
    "max_text_part_bytes": 1 * MiB,
    "max_inline_part_bytes": 10 * MiB,
    "max_inline_total_bytes": 15 * MiB,
    "max_uri_bytes": 4 * 1024,
    "max_function_payload_bytes": 1 * MiB,
}
"""The defaults double as ceilings so configuration can tighten, but never disable, the safety boundary."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentLimits:
    """Validation limits for content values; every field may be lowered, none raised past its ceiling."""

    max_parts: int = CEILINGS["max_parts"]
    """Parts per content value."""
    max_text_part_bytes: int = CEILINGS["max_text_part_bytes"]
    """UTF-8 bytes per text part."""
    max_inline_part_bytes: int = CEILINGS["max_inline_part_bytes"]
    """Decoded bytes per inline-data part."""
    max_inline_total_bytes: int = CEILINGS["max_inline_total_bytes"]
    """Decoded inline bytes summed over one content value."""
    max_uri_bytes: int = CEILINGS["max_uri_bytes"]
    """Bytes per file-data URI."""
    max_function_payload_bytes: int = CEILINGS["max_function_payload_bytes"]
    """Canonical JSON bytes of one function call's args or one function response."""

    def __post_init__(self) -> None:
        for name, ceiling in CEILINGS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ContentError(
                    "content limits must be positive integers",
                    reason="invalid_limit",
                    details={"limit": name, "type": type(value).__name__},
                )
            if value > ceiling:
                raise ContentError(
                    "content limits may be lowered, not raised",
                    reason="limit_above_ceiling",
                    details={"limit": name, "ceiling": ceiling},
                )

    def lowered(self, **changes: Any) -> ContentLimits:
        """Return a copy with some limits changed.

        Raises:
            ContentError: reason ``invalid_limit`` (unknown name, non-positive or non-int value) or
                ``limit_above_ceiling``.
        """
        unknown = sorted(set(changes) - set(CEILINGS))
        if unknown:
            raise ContentError("unknown content limit", reason="invalid_limit", details={"count": len(unknown)})
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Any) -> ContentLimits:
        """Build limits from a JSON-safe map of limit names to integers (unknown keys rejected).

        Raises:
            ContentError: reason ``invalid_limit`` or ``limit_above_ceiling``.
        """
        if not isinstance(data, dict):
            raise ContentError(
                "content limits must be a map", reason="invalid_limit", details={"type": type(data).__name__}
            )
        return DEFAULT_LIMITS.lowered(**{str(k): v for k, v in data.items()})

    def to_dict(self) -> dict[str, int]:
        """The limits as a JSON-safe map."""
        return {name: getattr(self, name) for name in CEILINGS}


DEFAULT_LIMITS = ContentLimits()
