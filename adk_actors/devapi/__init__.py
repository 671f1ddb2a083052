"""The developer operations behind ``/dev/v1``, the console and the ``adk inspect``/``session``/``resume`` commands.

One module (:mod:`~adk_actors.devapi.ops`) holds each operation once — its validation, its bounds and its errors —
as methods of :class:`DevOps` over the facade (an ``ActorSystemHandle``). The HTTP routes
(:mod:`adk_actors.web.dev`) and the CLI both call them, so the API and the commands answer the same input with the
same reason. It needs no web library.
"""

from __future__ import annotations

from adk_actors.devapi.ops import (
    DEFAULT_APP,
    DEFAULT_PAGE,
    MAX_AGENTS,
    MAX_DELTA_KEYS,
    MAX_INPUT_BYTES,
    MAX_PAGE,
    MAX_SESSION_EVENTS,
    DevOps,
    event_json,
    item_json,
    outcome_json,
)

__all__ = [
    "DEFAULT_APP",
    "DEFAULT_PAGE",
    "MAX_AGENTS",
    "MAX_DELTA_KEYS",
    "MAX_INPUT_BYTES",
    "MAX_PAGE",
    "MAX_SESSION_EVENTS",
    "DevOps",
    "event_json",
    "item_json",
    "outcome_json",
]
