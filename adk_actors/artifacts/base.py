"""The artifact-service contract: scopes, names, version values and the checks every adapter shares.

An artifact is a sequence of immutable binary versions under a logical name inside one exact scope (an app, a
user of an app, or one session of a user). Versions count 1, 2, 3... per scope and name and are never reused, not
even after a delete. The pure checks here (:func:`check_artifact_name`, :func:`check_metadata`, the list paging)
are what both adapters call, so they refuse exactly the same inputs.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from adk_actors.content.parts import check_mime_type
from adk_actors.errors import ConfigError, StorageError, ValidationError

__all__ = [
    "DEFAULT_MAX_ARTIFACT_BYTES",
    "DEFAULT_MAX_SCAN_ENTRIES",
    "DEFAULT_MIME_TYPE",
    "MAX_LIST_LIMIT",
    "MAX_METADATA_ENTRIES",
    "MAX_METADATA_KEY_CHARS",
    "MAX_METADATA_VALUE_CHARS",
    "MAX_NAME_CHARS",
    "MAX_NAME_SEGMENTS",
    "MAX_SCOPE_ID_CHARS",
    "Artifact",
    "ArtifactScope",
    "ArtifactVersion",
    "BaseArtifactService",
    "BytesLike",
    "Capacities",
    "Clock",
    "MetadataValue",
    "ScopeLevel",
    "check_artifact_name",
    "check_data",
    "check_limit",
    "check_metadata",
    "check_put",
    "check_scope",
    "check_version",
    "digest_of",
    "not_found",
    "page_names",
    "verified_artifact",
]

ScopeLevel: TypeAlias = Literal["app", "user", "session"]
MetadataValue: TypeAlias = str | int | float | bool | None
BytesLike: TypeAlias = bytes | bytearray | memoryview
"""What ``put`` stores (copied to ``bytes`` first)."""
Clock: TypeAlias = Callable[[], float]
"""Wall-clock seconds since the epoch (``time.time``); injected so tests can pin ``created_at``."""

DEFAULT_MAX_ARTIFACT_BYTES = 16 * 1024 * 1024
"""Default bound on the bytes of one artifact version (16 MiB)."""
DEFAULT_MAX_SCAN_ENTRIES = 30000
"""Default ``max_scan_entries``: the lifetime capacities derive from it (see :class:`Capacities`)."""
DEFAULT_MIME_TYPE = "application/octet-stream"
MAX_NAME_CHARS = 256
MAX_NAME_SEGMENTS = 16
MAX_SCOPE_ID_CHARS = 256
MAX_LIST_LIMIT = 1000
"""Largest ``limit`` of one :meth:`BaseArtifactService.list_names` page."""
MAX_METADATA_ENTRIES = 32
MAX_METADATA_KEY_CHARS = 128
MAX_METADATA_VALUE_CHARS = 1024
_INT_LIMIT = 1 << 63


def _scope_error(field_name: str, rule: str) -> ValidationError:
    return ValidationError(
        "invalid artifact scope", reason="invalid_artifact_scope", details={"field": field_name, "rule": rule}
    )


def _check_scope_id(value: Any, field_name: str) -> str:
    if not isinstance(value, str):
        raise _scope_error(field_name, "not_a_string")
    if not value:
        raise _scope_error(field_name, "empty")
    if len(value) > MAX_SCOPE_ID_CHARS:
        raise _scope_error(field_name, "too_long")
    # isprintable() also refuses NUL, other controls, lone surrogates and invisible format characters.
    if not value.isprintable():
        raise _scope_error(field_name, "not_printable")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactScope:
    """Where an artifact lives: an app, a user of an app, or one session of a user.

    Build one with :meth:`app`, :meth:`user` or :meth:`session`; scopes are exact (a session-scoped artifact is
    not visible from its user's scope, nor the other way round).
    """

    level: ScopeLevel
    """``"app"``, ``"user"`` or ``"session"``."""
    app_name: str
    """The application."""
    user_id: str | None = None
    """The user (set for the user and session levels only)."""
    session_id: str | None = None
    """The session (set for the session level only)."""

    def __post_init__(self) -> None:
        if self.level not in ("app", "user", "session"):
            raise _scope_error("level", "unknown_level")
        _check_scope_id(self.app_name, "app_name")
        if self.level == "app":
            if self.user_id is not None or self.session_id is not None:
                raise _scope_error("user_id", "not_allowed_at_level")
            return
        _check_scope_id(self.user_id, "user_id")
        if self.level == "user":
            if self.session_id is not None:
                raise _scope_error("session_id", "not_allowed_at_level")
            return
        _check_scope_id(self.session_id, "session_id")

    @classmethod
    def app(cls, app_name: str) -> ArtifactScope:
        """The scope of a whole application.

        Raises:
            ValidationError: reason ``invalid_artifact_scope``.
        """
        return cls(level="app", app_name=app_name)

    @classmethod
    def user(cls, app_name: str, user_id: str) -> ArtifactScope:
        """The scope of one user of an application.

        Raises:
            ValidationError: reason ``invalid_artifact_scope``.
        """
        return cls(level="user", app_name=app_name, user_id=user_id)

    @classmethod
    def session(cls, app_name: str, user_id: str, session_id: str) -> ArtifactScope:
        """The scope of one session of a user.

        Raises:
            ValidationError: reason ``invalid_artifact_scope``.
        """
        return cls(level="session", app_name=app_name, user_id=user_id, session_id=session_id)

    @property
    def key(self) -> tuple[str, ...]:
        """The scope as a tuple (``(level, app, [user, [session]])``): its identity in a store."""
        parts = [self.level, self.app_name]
        if self.user_id is not None:
            parts.append(self.user_id)
        if self.session_id is not None:
            parts.append(self.session_id)
        return tuple(parts)

    @classmethod
    def from_key(cls, key: Sequence[Any]) -> ArtifactScope:
        """The scope whose :attr:`key` is ``key``.

        Raises:
            ValidationError: reason ``invalid_artifact_scope``.
        """
        if not isinstance(key, list | tuple) or not 2 <= len(key) <= 4:
            raise _scope_error("key", "malformed")
        level, *ids = key
        expected = {"app": 1, "user": 2, "session": 3}.get(level) if isinstance(level, str) else None
        if expected is None or len(ids) != expected:
            raise _scope_error("key", "malformed")
        return cls(
            level=level,
            app_name=ids[0],
            user_id=ids[1] if len(ids) > 1 else None,
            session_id=ids[2] if len(ids) > 2 else None,
        )

    def describe(self) -> dict[str, str]:
        """The scope as JSON-safe error details."""
        out = {"level": self.level, "app_name": self.app_name}
        if self.user_id is not None:
            out["user_id"] = self.user_id
        if self.session_id is not None:
            out["session_id"] = self.session_id
        return out


def _name_error(rule: str) -> ValidationError:
    return ValidationError("invalid artifact name", reason="invalid_artifact_name", details={"rule": rule})


def check_artifact_name(name: Any) -> str:
    """Return ``name`` if it is a valid artifact name.

    A name is 1 to 256 printable characters in NFC form, made of at most 16 ``/``-separated segments, none of
    them empty, ``.`` or ``..``; no backslash, control or invisible format characters. Names are logical labels:
    adapters never use them as paths, the rules only keep them unambiguous wherever they are shown or exported.

    Raises:
        ValidationError: reason ``invalid_artifact_name`` (``details["rule"]`` says which rule failed).
    """
    if not isinstance(name, str):
        raise _name_error("not_a_string")
    if not name:
        raise _name_error("empty")
    if len(name) > MAX_NAME_CHARS:
        raise _name_error("too_long")
    if not name.isprintable():
        raise _name_error("not_printable")
    if "\\" in name:
        raise _name_error("backslash")
    # Canonical equivalents (a precomposed letter and its decomposed spelling) would otherwise be two names that
    # look the same; refusing non-NFC names keeps one spelling per visible name.
    if unicodedata.normalize("NFC", name) != name:
        raise _name_error("not_nfc")
    if name.startswith("/"):
        raise _name_error("absolute")
    segments = name.split("/")
    if len(segments) > MAX_NAME_SEGMENTS:
        raise _name_error("too_many_segments")
    for segment in segments:
        if not segment:
            raise _name_error("empty_segment")
        if segment in (".", ".."):
            raise _name_error("dot_segment")
    return name


def check_version(version: Any) -> int:
    """Return ``version`` if it is a version number (an int ≥ 1, not a bool).

    Raises:
        ValidationError: reason ``invalid_artifact_version``.
    """
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version < _INT_LIMIT:
        raise ValidationError(
            "an artifact version is an int >= 1", reason="invalid_artifact_version", details={"field": "version"}
        )
    return version


def _metadata_error(rule: str, key: str | None = None) -> ValidationError:
    details: dict[str, Any] = {"rule": rule, "max_entries": MAX_METADATA_ENTRIES}
    if key is not None:
        details["key"] = key[:MAX_METADATA_KEY_CHARS]
    return ValidationError("invalid artifact metadata", reason="invalid_artifact_metadata", details=details)


def _check_metadata_value(key: str, value: Any) -> MetadataValue:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -_INT_LIMIT <= value < _INT_LIMIT:
            raise _metadata_error("int_out_of_range", key)
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _metadata_error("float_not_finite", key)
        return value
    if isinstance(value, str):
        if len(value) > MAX_METADATA_VALUE_CHARS:
            raise _metadata_error("value_too_long", key)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _metadata_error("value_not_utf8", key) from None
        return value
    raise _metadata_error("value_not_scalar", key)


def check_metadata(metadata: Any) -> dict[str, MetadataValue]:
    """A copy of ``metadata`` if it is flat and bounded, ``{}`` for ``None``.

    Flat: string keys (1 to 128 printable characters) to ``str`` (≤ 1024 characters), ``int`` (64-bit), finite
    ``float``, ``bool`` or ``None``; at most 32 entries.

    Raises:
        ValidationError: reason ``invalid_artifact_metadata``.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise _metadata_error("not_a_mapping")
    if len(metadata) > MAX_METADATA_ENTRIES:
        raise _metadata_error("too_many_entries")
    out: dict[str, MetadataValue] = {}
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise _metadata_error("key_not_a_string")
        if not key or len(key) > MAX_METADATA_KEY_CHARS or not key.isprintable():
            raise _metadata_error("invalid_key")
        out[key] = _check_metadata_value(key, value)
    return out


def check_data(data: Any, max_bytes: int) -> bytes:
    """``data`` as ``bytes`` if it is bytes-like and at most ``max_bytes`` long.

    Raises:
        ValidationError: reason ``invalid_artifact_data`` (not bytes-like) or ``artifact_too_large``.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValidationError(
            "artifact data is bytes", reason="invalid_artifact_data", details={"type": type(data).__name__}
        )
    raw = bytes(data)
    if len(raw) > max_bytes:
        raise ValidationError(
            "the artifact is larger than the service admits",
            reason="artifact_too_large",
            details={"size": len(raw), "max_bytes": max_bytes},
        )
    return raw


def digest_of(data: bytes) -> str:
    """The ``"sha256:<hex>"`` digest of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Capacities:
    """The options every adapter shares, and the lifetime capacities derived from ``max_scan_entries``.

    A scoped name admits at most ``max_scan_entries // 3`` versions in its lifetime; a scope at most
    ``max_scan_entries // 2`` names and a service (a filesystem root) at most as many scopes. Deleting does not
    give any of them back: version numbers, names and scopes are never reused.
    """

    max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES
    """Bound on the bytes of one version."""
    max_scan_entries: int = DEFAULT_MAX_SCAN_ENTRIES
    """Bound on the entries one listing or scan may visit (at least 3)."""

    def __post_init__(self) -> None:
        for option, value, minimum in (
            ("max_artifact_bytes", self.max_artifact_bytes, 0),
            ("max_scan_entries", self.max_scan_entries, 3),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < _INT_LIMIT:
                raise ConfigError(
                    f"{option} is an int >= {minimum}",
                    reason="invalid_value",
                    details={"option": option, "min": minimum},
                )

    @property
    def max_versions_per_name(self) -> int:
        return self.max_scan_entries // 3

    @property
    def max_names_per_scope(self) -> int:
        return self.max_scan_entries // 2

    @property
    def max_scopes(self) -> int:
        return self.max_scan_entries // 2

    def version_capacity_error(self, scope: ArtifactScope, name: str) -> StorageError:
        return StorageError(
            "this artifact name has used all its lifetime versions; rotate to a new name",
            reason="artifact_version_capacity_reached",
            details={"scope": scope.describe(), "name": name, "max_versions": self.max_versions_per_name},
        )

    def name_capacity_error(self, scope: ArtifactScope) -> StorageError:
        return StorageError(
            "this scope has used all its lifetime artifact names; rotate to a new scope",
            reason="artifact_name_capacity_reached",
            details={"scope": scope.describe(), "max_names": self.max_names_per_scope},
        )

    def scope_capacity_error(self) -> StorageError:
        return StorageError(
            "this artifact store has used all its lifetime scopes; rotate to a new store",
            reason="artifact_scope_capacity_reached",
            details={"max_scopes": self.max_scopes},
        )


def not_found(scope: ArtifactScope, name: str, version: int | None) -> StorageError:
    """The one answer for a missing artifact (a version in another scope gets the same)."""
    return StorageError(
        "no such artifact",
        reason="artifact_not_found",
        details={"scope": scope.describe(), "name": name, "version": version},
    )


def check_scope(scope: Any) -> ArtifactScope:
    """Return ``scope`` if it is an :class:`ArtifactScope`.

    Raises:
        ValidationError: reason ``invalid_artifact_scope``.
    """
    if not isinstance(scope, ArtifactScope):
        raise _scope_error("scope", "not_an_artifact_scope")
    return scope


def check_limit(limit: Any) -> int:
    """Return ``limit`` if it is a page size from 1 to :data:`MAX_LIST_LIMIT`.

    Raises:
        ValidationError: reason ``invalid_limit``.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise ValidationError(
            "limit is an int from 1 to the page bound", reason="invalid_limit", details={"max": MAX_LIST_LIMIT}
        )
    return limit


def page_names(names: Sequence[str], limit: Any, cursor: Any) -> tuple[list[str], str | None]:
    """One page of ``names`` in code-point order after ``cursor`` (exclusive), and the next page's cursor.

    Raises:
        ValidationError: reason ``invalid_limit`` or ``invalid_cursor``.
    """
    size = check_limit(limit)
    if cursor is not None:
        try:
            check_artifact_name(cursor)
        except ValidationError:
            raise ValidationError(
                "a cursor is the last name of the previous page", reason="invalid_cursor", details={}
            ) from None
    ordered = sorted(n for n in names if cursor is None or n > cursor)
    page = ordered[:size]
    return page, (page[-1] if len(ordered) > size else None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactVersion:
    """One stored version of an artifact, without its bytes."""

    scope: ArtifactScope
    """The exact scope it lives in."""
    name: str
    """Its logical name."""
    version: int
    """1, 2, 3... per scope and name; never reused."""
    digest: str
    """``"sha256:<hex>"`` of the bytes."""
    size: int
    """Byte count."""
    mime_type: str
    """Lowercase ``type/subtype``."""
    metadata: dict[str, MetadataValue] = field(default_factory=dict)
    """Flat, bounded metadata given to ``put`` (see :func:`check_metadata`)."""
    created_at: float
    """Wall-clock seconds since the epoch when the version was stored."""

    def info(self) -> ArtifactVersion:
        """This version's description without any bytes (itself for an :class:`ArtifactVersion`)."""
        return ArtifactVersion(
            scope=self.scope,
            name=self.name,
            version=self.version,
            digest=self.digest,
            size=self.size,
            mime_type=self.mime_type,
            metadata=dict(self.metadata),
            created_at=self.created_at,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Artifact(ArtifactVersion):
    """One stored version with its bytes (what ``get`` returns)."""

    data: bytes = field(repr=False)
    """The bytes, verified against ``size`` and ``digest``."""


def verified_artifact(info: ArtifactVersion, data: bytes, **where: Any) -> Artifact:
    """``info``'s version with its stored ``data``, after checking the bytes against the recorded size and digest
    (every adapter's ``get``).

    Raises:
        StorageError: reason ``artifact_corrupt``, ``details["rule"]`` ``size_mismatch`` or ``digest_mismatch``
            (plus ``where``: structural details the adapter adds).
    """
    rule = "size_mismatch" if len(data) != info.size else "digest_mismatch" if digest_of(data) != info.digest else ""
    if rule:
        raise StorageError(
            "stored artifact data failed verification", reason="artifact_corrupt", details={"rule": rule, **where}
        )
    return Artifact(
        scope=info.scope,
        name=info.name,
        version=info.version,
        digest=info.digest,
        size=info.size,
        mime_type=info.mime_type,
        metadata=info.metadata,
        created_at=info.created_at,
        data=data,
    )


def check_put(
    scope: Any, name: Any, data: Any, mime_type: Any, metadata: Any, max_bytes: int
) -> tuple[bytes, dict[str, MetadataValue]]:
    """Validate the arguments of a ``put`` (scope, name, bytes up to ``max_bytes``, MIME type, metadata): the bytes
    and the checked metadata.

    Raises:
        ValidationError: as :func:`check_scope`, :func:`check_artifact_name`, :func:`check_data`,
            :func:`check_mime_type`, :func:`check_metadata`.
    """
    check_scope(scope)
    check_artifact_name(name)
    raw = check_data(data, max_bytes)
    check_mime_type(mime_type)
    return raw, check_metadata(metadata)


@runtime_checkable
class BaseArtifactService(Protocol):
    """Immutable, versioned binary artifacts under exact scopes.

    Every method validates its arguments first (``ValidationError``, see :func:`check_artifact_name`); a missing
    artifact is ``StorageError(reason="artifact_not_found")``, whatever scope it might exist in.
    """

    def put(
        self,
        scope: ArtifactScope,
        name: str,
        data: BytesLike,
        *,
        mime_type: str = DEFAULT_MIME_TYPE,
        metadata: Mapping[str, MetadataValue] | None = None,
    ) -> ArtifactVersion:
        """Store ``data`` as the next version of ``name`` in ``scope``.

        Raises:
            ValidationError: ``invalid_artifact_name``, ``invalid_artifact_scope``, ``invalid_artifact_data``,
                ``artifact_too_large``, ``invalid_artifact_metadata``; ``ContentError`` ``invalid_mime_type``.
            StorageError: ``artifact_version_capacity_reached``, ``artifact_name_capacity_reached``,
                ``artifact_scope_capacity_reached``, or the store failed.
        """
        ...

    def get(self, scope: ArtifactScope, name: str, version: int | None = None) -> Artifact:
        """A version with its bytes: ``version``, or the latest when ``None``.

        Raises:
            ValidationError: invalid arguments.
            StorageError: ``artifact_not_found``; ``artifact_corrupt`` when stored data fails verification.
        """
        ...

    def list_names(
        self, scope: ArtifactScope, *, limit: int = 100, cursor: str | None = None
    ) -> tuple[list[str], str | None]:
        """A page of the names with at least one version, in code-point order, and the next page's cursor.

        Raises:
            ValidationError: invalid scope, ``invalid_limit`` (1 to :data:`MAX_LIST_LIMIT`), ``invalid_cursor``.
        """
        ...

    def list_versions(self, scope: ArtifactScope, name: str) -> list[ArtifactVersion]:
        """The stored (not deleted) versions of ``name``, oldest first; ``[]`` when there are none."""
        ...

    def delete(self, scope: ArtifactScope, name: str, version: int | None = None) -> int:
        """Delete one version, or every version when ``None``; returns how many were deleted.

        Deleted version numbers are never given out again.
        """
        ...
