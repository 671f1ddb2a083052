"""Secrets: a redacting holder, secret-key detection, and pruning of maps that leave a trust boundary.

API keys, tokens and credentials never appear in events, sessions, logs, status or error details. Values are
held in :class:`Secret` (whose ``repr``/``str`` are redacted and which refuses to pickle its value into logs), and
any mapping that leaves a trust boundary goes through :func:`prune_secrets`.

Files a node writes hold the same private data (events, logs), so they are made private too:
:func:`private_dir` and :func:`private_opener` create directories 0700 and files 0600 whatever the process umask,
and the node's own processes run under :data:`PRIVATE_UMASK`.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "PRIVATE_UMASK",
    "REDACTED",
    "SECRET_ENV_VARS",
    "Secret",
    "is_secret_key",
    "known_secret_values",
    "private_dir",
    "private_file",
    "private_opener",
    "prune_secrets",
    "register_env_secrets",
    "register_secret",
    "scrub_event_text",
    "scrub_text",
]

REDACTED = "[REDACTED]"

# Key names that hold credentials. Matched case-insensitively against the whole key, after normalising
# separators, so "x-goog-api-key", "apiKey", "API_KEY" and "client_secret" all count.
_SECRET_KEY_RE = re.compile(
    r"(^|_)(api_?key|x_goog_api_key|key|token|access_token|refresh_token|id_token|secret|client_secret|password|"
    r"passwd|authorization|auth|credential|credentials|cookie|set_cookie|private_key|session_key|bearer)($|_)"
)


def _normalise_key(key: str) -> str:
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key)
    return re.sub(r"[^a-z0-9]+", "_", snake.lower()).strip("_")


def is_secret_key(key: str) -> bool:
    """Whether a mapping key names a credential (``api_key``, ``apiKey``, ``x-goog-api-key``, ``token``...)."""
    if type(key) is not str:
        return _is_secret_key(str(key))
    return _is_secret_key(key)


@functools.lru_cache(maxsize=8192)
def _is_secret_key(key: str) -> bool:
    # Keys repeat (every event, context and log record has the same few): the answer is cached per key, bounded.
    norm = _normalise_key(key)
    if norm in {"key_count", "keys", "token_count", "total_tokens", "max_tokens", "max_output_tokens"}:
        return False
    if norm.endswith("_token_count") or norm.endswith("_tokens") or norm.endswith("token_count"):
        return False
    return bool(_SECRET_KEY_RE.search(norm))


class Secret:
    """A secret value whose ``repr`` and ``str`` are redacted.

    Use :meth:`reveal` at the single place the value is needed (an HTTP header). Registering the value lets the
    log scrubber remove it from free text too.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError("a Secret needs a non-empty str")
        self._value = value
        register_secret(value)

    def reveal(self) -> str:
        """The raw value. Call only where it is sent to its owner (never into a log, event or error)."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> tuple[Any, ...]:
        # Secrets may travel between our own processes (settings to an actor); the redacted repr still holds.
        return (Secret, (self._value,))


_known: set[str] = set()
_known_lock = threading.Lock()


def register_secret(value: str) -> None:
    """Remember a secret value so :func:`scrub_text` removes it from free text (values shorter than 6 are ignored)."""
    if isinstance(value, str) and len(value) >= 6:
        with _known_lock:
            _known.add(value)


SECRET_ENV_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "ADK_GEMINI_API_KEY", "ADK_DEV_TOKEN", "ADK_DEV_LIVE_PRINCIPAL")
"""Environment variables whose values are configured secrets, wherever they are read."""


def register_env_secrets() -> None:
    """Register the values of :data:`SECRET_ENV_VARS` present in this process's environment."""
    for name in SECRET_ENV_VARS:
        value = os.environ.get(name)
        if value:
            register_secret(value)


def known_secret_values() -> list[str]:
    with _known_lock:
        return sorted(_known, key=len, reverse=True)


def scrub_text(text: str, extra: Iterable[str] = ()) -> str:
    """Replace every registered (and every ``extra``) secret value occurring in ``text`` with ``[REDACTED]``."""
    for value in [*known_secret_values(), *extra]:
        if value and value in text:
            text = text.replace(value, REDACTED)
    return text


def scrub_event_text(data: dict[str, Any]) -> dict[str, Any]:
    """Replace configured secret values in the text parts of an event dict, in place (returns ``data``).

    A key pasted into a chat would otherwise be stored verbatim and replayed to the model on every later turn.
    Values only, never patterns: user text that merely looks like a credential is the user's to keep.
    """
    content = data.get("content")
    if not isinstance(content, dict):
        return data
    register_env_secrets()
    for part in content.get("parts") or ():
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            part["text"] = scrub_text(part["text"])
    return data


def prune_secrets(value: Any) -> Any:
    """Return a copy of ``value`` with every secret-named key's value replaced by ``[REDACTED]``.

    Recurses through dicts, lists and tuples; ``Secret`` objects anywhere become ``[REDACTED]``; strings have
    registered secret values scrubbed.
    """
    if isinstance(value, Secret):
        return REDACTED
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and is_secret_key(k) and v not in (None, "") else prune_secrets(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [prune_secrets(v) for v in value]
    if isinstance(value, tuple):
        return tuple(prune_secrets(v) for v in value)
    if isinstance(value, str):
        return scrub_text(value)
    return value


PRIVATE_UMASK = 0o077
"""The umask of a node's processes: what they create is readable by the node's user only."""


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and its missing parents with mode 0700; an existing directory is left as it is.

    Only levels created here are restricted: a data dir pointed at an existing shared directory (``/tmp``) must not
    have its mode changed under other users.
    """
    target = Path(path)
    missing: list[Path] = []
    probe = target
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for level in reversed(missing):
        try:
            level.mkdir(mode=0o700)
        except FileExistsError:  # made by a concurrent starter: then it is theirs to have made private
            continue
    return target


def private_opener(path: str, flags: int) -> int:
    """An ``opener`` for :func:`open` that creates the file with mode 0600 (an existing file keeps its mode)."""
    return os.open(path, flags, 0o600)


def private_file(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` empty with mode 0600 unless it exists; its missing directories are made with
    :func:`private_dir`."""
    target = Path(path)
    private_dir(target.parent)
    os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o600))
    return target


MAX_PRINCIPAL_BYTES = 4096


def principal_digest(principal: str) -> str:
    """The SHA-256 hex digest that stands for an opaque ``principal`` in long-lived state (never the principal).

    Raises:
        ValidationError: ``invalid_principal`` — not a non-empty string of at most 4 KiB (UTF-8).
    """
    import hashlib

    from adk_actors.errors import ValidationError

    if isinstance(principal, Secret):
        principal = principal.reveal()
    if (
        not isinstance(principal, str)
        or not principal
        or len(principal.encode("utf-8", "surrogatepass")) > MAX_PRINCIPAL_BYTES
    ):
        raise ValidationError(
            "a principal is a non-empty string of at most 4 KiB", reason="invalid_principal", details={}
        )
    return hashlib.sha256(principal.encode("utf-8", "surrogatepass")).hexdigest()
