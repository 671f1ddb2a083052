"""The credential store: secrets scoped by app and user, encrypted at rest, handed out only as :class:`Secret`.

::

    keys = CredentialKeys.from_env()                       # ADK_CREDENTIAL_KEYS (or ADK_CREDENTIAL_KEY_FILE)
    store = SqlCredentialStore("sqlite:///creds.db", keys=keys)
    ref = store.put(CredentialScope(app="crm", user="u1"), "orders-api", "s3cr3t-token")
    store.get(ref).reveal()                                # only where it is sent to its owner

A credential is identified by a :class:`CredentialRef` (app, user, name): a plain value that may travel in events,
pauses and tool contexts because it carries no secret. Values are encrypted with Fernet (AES-128-CBC + HMAC-SHA256,
from ``cryptography``) before they reach the database; the key comes from the environment or a key file, never from
settings. Several keys may be configured: the first encrypts, all decrypt, and :meth:`SqlCredentialStore.rotate`
re-encrypts every row with the first (key rotation: add the new key first, rotate, then drop the old one).
Nothing here logs, and errors are structural: a wrong key is ``credential_undecryptable``, never the ciphertext.
:class:`InMemoryCredentialStore` has the same interface for tests (values kept encrypted too).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import BigInteger, Column, Connection, MetaData, String, Table, Text, delete, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from adk_actors.errors import ConfigError, StorageError, ValidationError
from adk_actors.secrets import Secret
from adk_actors.storage.sql import SqlStore, schema_version_table

__all__ = [
    "KEYS_ENV",
    "KEY_FILE_ENV",
    "CredentialKeys",
    "CredentialRef",
    "CredentialScope",
    "InMemoryCredentialStore",
    "SqlCredentialStore",
]

KEYS_ENV: Final = "ADK_CREDENTIAL_KEYS"
"""Comma-separated Fernet keys (URL-safe base64 of 32 bytes); the first encrypts."""
KEY_FILE_ENV: Final = "ADK_CREDENTIAL_KEY_FILE"
"""A file holding the keys, one per line (mode 0600 or stricter)."""
MAX_VALUE_BYTES: Final = 64 * 1024
_NAME_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")


def _name(value: Any, key: str) -> str:
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise ValidationError(
            f"{key} must be 1-128 characters of [A-Za-z0-9_.:@-]", reason="invalid_value", details={"key": key}
        )
    return value


@dataclass(frozen=True, slots=True)
class CredentialScope:
    """Whose credentials: an app and a user (``user=""`` for the app's own credentials)."""

    app: str
    user: str = ""

    def __post_init__(self) -> None:
        _name(self.app, "app")
        if self.user:
            _name(self.user, "user")


@dataclass(frozen=True, slots=True)
class CredentialRef:
    """A stored credential's identity (no secret in it)."""

    app: str
    user: str
    name: str

    @property
    def scope(self) -> CredentialScope:
        return CredentialScope(self.app, self.user)


class CredentialKeys:
    """The encryption keys (their repr never shows them). The first key encrypts; every key decrypts."""

    __slots__ = ("_fernet", "_primary", "count")

    def __init__(self, keys: Iterable[str | bytes]) -> None:
        raw = [k.encode() if isinstance(k, str) else k for k in keys]
        if not raw:
            raise ConfigError("no credential key configured", reason="missing_credential_key")
        try:
            fernets = [Fernet(k.strip()) for k in raw]
        except (ValueError, TypeError):
            raise ConfigError(
                "a credential key is not a Fernet key (URL-safe base64 of 32 bytes)", reason="invalid_credential_key"
            ) from None
        self._primary = fernets[0]
        self._fernet = MultiFernet(fernets)
        self.count = len(fernets)

    @staticmethod
    def generate() -> str:
        """A new random key (store it where the node reads it, never in settings or code)."""
        return Fernet.generate_key().decode()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CredentialKeys:
        """Keys from :data:`KEYS_ENV`, else from the file named by :data:`KEY_FILE_ENV`.

        Raises:
            ConfigError: ``missing_credential_key``, ``invalid_credential_key``, ``key_file_unreadable`` or
                ``key_file_too_open`` (readable by group or others).
        """
        env = os.environ if environ is None else environ
        listed = env.get(KEYS_ENV, "")
        if listed.strip():
            return cls(k for k in listed.split(",") if k.strip())
        path = env.get(KEY_FILE_ENV, "")
        if not path:
            raise ConfigError(
                f"set {KEYS_ENV} or {KEY_FILE_ENV}", reason="missing_credential_key", details={"env": KEYS_ENV}
            )
        try:
            mode = os.stat(path).st_mode
            with open(path, encoding="ascii") as fh:
                lines = [line.strip() for line in fh if line.strip()]
        except (OSError, UnicodeDecodeError):
            raise ConfigError("the credential key file cannot be read", reason="key_file_unreadable") from None
        if mode & 0o077:
            raise ConfigError("the credential key file is readable by others (chmod 600)", reason="key_file_too_open")
        return cls(lines)

    def encrypt(self, plaintext: bytes) -> str:
        return self._primary.encrypt(plaintext).decode("ascii")

    def decrypt(self, token: str) -> bytes:
        """Raises: StorageError ``credential_undecryptable`` (no configured key opens it, or it was altered)."""
        try:
            return self._fernet.decrypt(token.encode("ascii"))
        except (InvalidToken, UnicodeEncodeError):
            raise StorageError(
                "the credential cannot be decrypted with the configured keys", reason="credential_undecryptable"
            ) from None

    def rotate(self, token: str) -> str:
        """The same plaintext encrypted with the first key.

        Raises: StorageError ``credential_undecryptable``.
        """
        try:
            return self._fernet.rotate(token.encode("ascii")).decode("ascii")
        except (InvalidToken, UnicodeEncodeError):
            raise StorageError(
                "the credential cannot be decrypted with the configured keys", reason="credential_undecryptable"
            ) from None

    def __repr__(self) -> str:
        return f"CredentialKeys(<{self.count} key(s)>)"

    def __reduce__(self) -> Any:
        raise TypeError("credential keys are not sent to other processes: each process reads them itself")


def _plaintext(value: Any) -> bytes:
    raw = value.reveal() if isinstance(value, Secret) else value
    if not isinstance(raw, str) or not raw:
        raise ValidationError("a credential value is a non-empty str or Secret", reason="invalid_value")
    data = raw.encode("utf-8")
    if len(data) > MAX_VALUE_BYTES:
        raise ValidationError(
            "the credential value is too large", reason="limit_exceeded", details={"max_bytes": MAX_VALUE_BYTES}
        )
    return data


def _not_found(ref: CredentialRef) -> StorageError:
    return StorageError("no such credential", reason="credential_not_found", details={"name": ref.name})


class _Base:
    keys: CredentialKeys

    def _ref(self, scope: CredentialScope, name: str) -> CredentialRef:
        if not isinstance(scope, CredentialScope):
            raise ValidationError("scope must be a CredentialScope", reason="invalid_value", details={"key": "scope"})
        return CredentialRef(scope.app, scope.user, _name(name, "name"))

    def _open(self, ref: CredentialRef, token: str | None) -> Secret:
        if token is None:
            raise _not_found(ref)
        return Secret(self.keys.decrypt(token).decode("utf-8"))


class InMemoryCredentialStore(_Base):
    """The store's interface in memory (for tests and single-process use); values are kept encrypted."""

    def __init__(self, keys: CredentialKeys | None = None) -> None:
        self.keys = keys or CredentialKeys([CredentialKeys.generate()])
        self._rows: dict[CredentialRef, str] = {}
        self._lock = threading.Lock()

    def put(self, scope: CredentialScope, name: str, value: Any) -> CredentialRef:
        """Store (or replace) a credential; returns its ref."""
        ref = self._ref(scope, name)
        token = self.keys.encrypt(_plaintext(value))
        with self._lock:
            self._rows[ref] = token
        return ref

    def get(self, ref: CredentialRef) -> Secret:
        """Raises: StorageError ``credential_not_found`` / ``credential_undecryptable``."""
        with self._lock:
            token = self._rows.get(ref)
        return self._open(ref, token)

    def delete(self, ref: CredentialRef) -> bool:
        with self._lock:
            return self._rows.pop(ref, None) is not None

    def names(self, scope: CredentialScope) -> list[str]:
        with self._lock:
            return sorted(r.name for r in self._rows if r.app == scope.app and r.user == scope.user)

    def rotate(self) -> int:
        """Re-encrypt every credential with the first key; returns how many."""
        with self._lock:
            for ref, token in list(self._rows.items()):
                self._rows[ref] = self.keys.rotate(token)
            return len(self._rows)


_COMPONENT: Final = "credentials"
_PG_MIGRATION_LOCK: Final = 0x4144_4B43_5245_4431  # "ADKCRED1"

metadata = MetaData()
schema_table = schema_version_table("adk_credentials_schema", metadata)
credentials_table = Table(
    "adk_credentials",
    metadata,
    Column("app", String(128), primary_key=True),
    Column("user_id", String(128), primary_key=True),
    Column("name", String(128), primary_key=True),
    Column("ciphertext", Text, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)
_C = credentials_table.c


def _migrate_to_1(conn: Connection) -> None:
    metadata.create_all(conn, tables=[credentials_table], checkfirst=True)


class SqlCredentialStore(SqlStore, _Base):
    """Credentials in a SQL database (SQLite file or PostgreSQL), encrypted with ``keys``.

    The store pickles as its URL only: each process that unpickles it reads the keys itself from the environment
    (:meth:`CredentialKeys.from_env`), so keys never travel in messages.

    Raises:
        ConfigError: a bad URL; no or bad keys.
    """

    LABEL: ClassVar[str] = "credential store"
    URL_KEY: ClassVar[str] = "credentials_url"
    COMPONENT = _COMPONENT
    SCHEMA_TABLE = schema_table
    MIGRATIONS: ClassVar[Mapping[int, Callable[[Connection], None]]] = {1: _migrate_to_1}
    PG_MIGRATION_LOCK = _PG_MIGRATION_LOCK
    DIALECTS = ("sqlite", "postgresql")

    def __init__(
        self,
        url: str,
        *,
        keys: CredentialKeys | None = None,
        busy_timeout_ms: int = 30_000,
        engine_options: Mapping[str, Any] | None = None,
        clock: Any = None,
    ) -> None:
        super().__init__(url, busy_timeout_ms=busy_timeout_ms, engine_options=engine_options, clock=clock)
        self.keys = keys if keys is not None else CredentialKeys.from_env()

    def _migration_timestamp(self, conn: Connection) -> Any:
        return int(time.time() * 1000)

    @staticmethod
    def _insert(conn: Connection) -> Any:
        return pg_insert(credentials_table) if conn.dialect.name == "postgresql" else sqlite_insert(credentials_table)

    def put(self, scope: CredentialScope, name: str, value: Any) -> CredentialRef:
        """Store (or replace) a credential; returns its ref.

        Raises:
            ValidationError: a bad scope, name or value. StorageError: the database failed.
        """
        ref = self._ref(scope, name)
        token = self.keys.encrypt(_plaintext(value))
        now = int(time.time() * 1000)

        def body(conn: Connection) -> None:
            stmt = self._insert(conn).values(
                app=ref.app, user_id=ref.user, name=ref.name, ciphertext=token, updated_at=now
            )
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=[_C.app, _C.user_id, _C.name], set_={"ciphertext": token, "updated_at": now}
                )
            )

        self._write(body)
        return ref

    def get(self, ref: CredentialRef) -> Secret:
        """Raises: StorageError ``credential_not_found`` / ``credential_undecryptable`` or a database failure."""

        def body(conn: Connection) -> str | None:
            row = conn.execute(
                select(_C.ciphertext).where(_C.app == ref.app, _C.user_id == ref.user, _C.name == ref.name)
            ).first()
            return None if row is None else str(row[0])

        return self._open(ref, self._read(body))

    def delete(self, ref: CredentialRef) -> bool:
        def body(conn: Connection) -> bool:
            result = conn.execute(
                delete(credentials_table).where(_C.app == ref.app, _C.user_id == ref.user, _C.name == ref.name)
            )
            return bool(result.rowcount)

        return self._write(body)

    def names(self, scope: CredentialScope) -> list[str]:
        def body(conn: Connection) -> list[str]:
            rows = conn.execute(
                select(_C.name).where(_C.app == scope.app, _C.user_id == scope.user).order_by(_C.name)
            ).all()
            return [str(r[0]) for r in rows]

        return self._read(body)

    def rotate(self) -> int:
        """Re-encrypt every row with the first key, in one transaction; returns how many.

        Raises:
            StorageError: ``credential_undecryptable`` (a row no configured key opens: nothing is changed).
        """

        def body(conn: Connection) -> int:
            rows = conn.execute(select(_C.app, _C.user_id, _C.name, _C.ciphertext)).all()
            for app, user, name, token in rows:
                conn.execute(
                    update(credentials_table)
                    .where(_C.app == app, _C.user_id == user, _C.name == name)
                    .values(ciphertext=self.keys.rotate(str(token)))
                )
            return len(rows)

        return self._write(body)
