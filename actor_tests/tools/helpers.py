"""Module-level tools for the tool tests (module-level so they pickle)."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from typing import Any, Literal, NotRequired, TypedDict

from adk_actors.errors import ToolError
from adk_actors.tools import ToolContext


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


@dataclasses.dataclass
class Point:
    x: int
    y: float = 0.0


class Filters(TypedDict):
    owner: str
    labels: NotRequired[list[str]]


def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
    """Get the weather for a city.

    Args:
        city: The city name,
            as the user wrote it.
        unit (str): Temperature unit.

    Returns:
        The forecast.
    """
    return {"city": city, "unit": unit, "forecast": "sunny"}


async def slow_double(n: int) -> int:
    """Double a number, asynchronously."""
    await asyncio.sleep(0)
    return n * 2


def remember(key: str, value: str, tool_context: ToolContext) -> str:
    """Store a value in session state."""
    tool_context.actions.set_state(key, value)
    return f"stored {tool_context.get_state(key)}"


def explode(reason: str) -> None:
    """Always fails."""
    if reason == "adk":
        raise ToolError("secret detail sk-1234567890", reason="quota_exhausted")
    raise RuntimeError("secret detail sk-1234567890")


def leak() -> dict[str, Any]:
    """Returns something with a credential in it."""
    return {"api_key": "sk-abcdef123456", "ok": True}


def publish(target: str, dry_run: bool = False) -> str:
    """Publish a release."""
    return f"published {target}"


def needs_publish_confirmation(args: dict[str, Any], context: ToolContext) -> Any:
    if args.get("dry_run"):
        return False
    return {"required": True, "hint": f"Publish {args['target']}"}


def typed(p: Point, u: Unit, f: Filters, tags: set[str], pair: tuple[int, str], maybe: int | None = None) -> dict:
    """Echo typed values."""
    return {
        "p": dataclasses.asdict(p),
        "u": u.value,
        "f": dict(f),
        "tags": sorted(tags),
        "pair": list(pair),
        "types": [type(p).__name__, type(u).__name__, type(tags).__name__, type(pair).__name__, type(p.y).__name__],
        "maybe": maybe,
    }
