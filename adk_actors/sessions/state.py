"""Scoped session state: pure functions shared by every session backend.

State keys carry their lifetime in a prefix:

* no prefix — one session (persisted with the session);
* ``user:`` — every session, existing and future, of one app/user (persisted in the user-state row);
* ``app:`` — every session of one app (persisted in the app-state row);
* ``temp:`` — one invocation; held in memory next to the session and never written to a SQL store.

Keys keep their prefix everywhere (in storage and in the merged view), so a merged view is simply the union of
the four scopes and no two scopes can hold the same key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from adk_actors.content.json_values import copy_json
from adk_actors.errors import ValidationError

__all__ = [
    "ABSENT",
    "APP_PREFIX",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "ScopedDelta",
    "apply_delta",
    "check_delta",
    "check_expected_state",
    "merge_state",
    "mismatched_keys",
    "scope_of",
    "split_delta",
]

APP_PREFIX: Final = "app:"
USER_PREFIX: Final = "user:"
TEMP_PREFIX: Final = "temp:"


class _Absent:
    """The expected value of a key that must not be present (see :func:`mismatched_keys`)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self) -> str:
        return "ABSENT"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()
"""Use as an expected value in ``add_event_if_state`` to require that a key is absent."""


def scope_of(key: str) -> str:
    """The scope of a state key: ``"app"``, ``"user"``, ``"temp"`` or ``"session"``."""
    if key.startswith(APP_PREFIX):
        return "app"
    if key.startswith(USER_PREFIX):
        return "user"
    if key.startswith(TEMP_PREFIX):
        return "temp"
    return "session"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopedDelta:
    """A state delta split by scope; each part keeps the full (prefixed) keys."""

    session: dict[str, Any] = field(default_factory=dict)
    """Keys without a prefix."""
    user: dict[str, Any] = field(default_factory=dict)
    """``user:`` keys."""
    app: dict[str, Any] = field(default_factory=dict)
    """``app:`` keys."""
    temp: dict[str, Any] = field(default_factory=dict)
    """``temp:`` keys."""

    @property
    def shared(self) -> bool:
        """Whether the delta touches state shared with other sessions (``user:`` or ``app:``)."""
        return bool(self.user or self.app)

    def __bool__(self) -> bool:
        return bool(self.session or self.user or self.app or self.temp)


def split_delta(delta: Mapping[str, Any] | None) -> ScopedDelta:
    """Validate a state delta and split it by scope.

    Raises:
        ValidationError: reason ``invalid_state`` when the delta is not a mapping of str keys, or
            ``invalid_json`` when a value is not JSON-safe (NaN, Infinity, NUL characters, ...).
    """
    if delta is None:
        return ScopedDelta()
    if not isinstance(delta, Mapping):
        raise ValidationError(
            "a state delta must be a mapping", reason="invalid_state", details={"type": type(delta).__name__}
        )
    try:
        items = dict(delta)
    except Exception:  # a Mapping whose iteration raises is a bad argument, not a reason to crash the store
        raise ValidationError(
            "a state delta must be a mapping", reason="invalid_state", details={"type": type(delta).__name__}
        ) from None
    for key in items:
        if not isinstance(key, str) or not key:
            raise ValidationError(
                "state keys must be non-empty strings", reason="invalid_state", details={"key_type": type(key).__name__}
            )
    # A depth-bounded canonical copy validates (a cycle or a 10k-deep list fails before anything recurses)
    # and leaves the store with a private copy of every value.
    try:
        private = copy_json(items)[0]
    except ValidationError as exc:  # the same details as a canonical check: where, never which key
        raise ValidationError(
            exc.message, reason=exc.reason, details={k: v for k, v in exc.details.items() if k != "field"}
        ) from None
    parts: dict[str, dict[str, Any]] = {"session": {}, "user": {}, "app": {}, "temp": {}}
    for key, value in private.items():
        parts[scope_of(key)][key] = value
    return ScopedDelta(**parts)


def check_delta(delta: Any) -> dict[str, Any]:
    """A validated private copy of a state delta (as :func:`split_delta` checks it), scopes kept together.

    Raises:
        ValidationError: as :func:`split_delta`; also for ``None``.
    """
    if delta is None:
        raise ValidationError("a state delta must be a mapping", reason="invalid_state", details={"type": "NoneType"})
    scoped = split_delta(delta)
    return {**scoped.session, **scoped.user, **scoped.app, **scoped.temp}


def check_expected_state(expected: Any) -> dict[str, Any]:
    """A validated private copy of an expected-state map: str keys, JSON values or :data:`ABSENT`.

    Raises:
        ValidationError: reason ``invalid_state`` for a non-mapping or a bad key, ``invalid_json`` for a value.
    """
    if not isinstance(expected, Mapping):
        raise ValidationError(
            "expected state must be a mapping", reason="invalid_state", details={"type": type(expected).__name__}
        )
    try:
        items = dict(expected)
    except Exception:  # see split_delta
        raise ValidationError(
            "expected state must be a mapping", reason="invalid_state", details={"type": type(expected).__name__}
        ) from None
    for key in items:
        if not isinstance(key, str) or not key:
            raise ValidationError(
                "state keys must be non-empty strings", reason="invalid_state", details={"key_type": type(key).__name__}
            )
    present = check_delta({k: v for k, v in items.items() if v is not ABSENT})
    return {**present, **{k: ABSENT for k, v in items.items() if v is ABSENT}}


def apply_delta(state: Mapping[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``state`` with ``delta`` applied (last write wins; JSON ``null`` is a value)."""
    merged = dict(state)
    merged.update(delta)
    return merged


def merge_state(
    *,
    session: Mapping[str, Any],
    user: Mapping[str, Any],
    app: Mapping[str, Any],
    temp: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The merged view a caller sees as ``Session.state``.

    Each input only holds keys of its own scope, so the union is unambiguous; keys of the wrong scope are
    ignored defensively (a row written by an older version must not leak a key into another scope).
    """
    view: dict[str, Any] = {}
    for source, scope in ((app, "app"), (user, "user"), (session, "session"), (temp or {}, "temp")):
        view.update((k, v) for k, v in source.items() if scope_of(k) == scope)
    return view


def mismatched_keys(state: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """Keys of ``expected`` whose value differs from ``state`` (sorted).

    A key expected to be :data:`ABSENT` matches only when it is missing; any other expected value matches only a
    present key with an equal JSON value (numbers compare by value; booleans are not numbers).
    """
    bad: list[str] = []
    for key, want in expected.items():
        if want is ABSENT:
            if key in state:
                bad.append(key)
        elif key not in state or not _json_equal(state[key], want):
            bad.append(key)
    return sorted(bad)


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b
