"""``SqlArtifactService``: the artifact contract in a SQLite file or a PostgreSQL database.

Tables (schema version 1, recorded in ``adk_artifact_schema``):

* ``adk_artifact_store``: one row counting the scopes ever admitted. A writer admitting a new scope locks it first,
  so the lifetime scope capacity holds across processes.
* ``adk_artifact_scopes``: one row per scope ever admitted (never deleted), keyed by the SHA-256 of the scope, with
  the scope's ids (checked on every use) and the count of names ever admitted in it. Every ``put`` locks its scope's
  row (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite writes are ``BEGIN IMMEDIATE``), so the puts of one scope
  take turns: version numbers and capacities are decided by one writer at a time.
* ``adk_artifact_names``: one row per name ever admitted (never deleted) holding ``issued``, the highest version
  number ever given out. Deleting a version removes its row in ``adk_artifact_versions`` but never lowers
  ``issued``: a number, once given out, is never given out again (the row is the tombstone).
* ``adk_artifact_versions``: the immutable versions: digest, size, MIME type, metadata (canonical JSON), creation
  time and the bytes (``BLOB``/``BYTEA``, at most ``max_artifact_bytes``). Every read checks size and digest
  (``artifact_corrupt``).

Names sort in code-point order on both dialects (SQLite compares UTF-8 bytes; PostgreSQL uses the ``C`` collation).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    delete,
    exists,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError

from adk_actors.artifacts.base import (
    DEFAULT_MAX_ARTIFACT_BYTES,
    DEFAULT_MAX_SCAN_ENTRIES,
    DEFAULT_MIME_TYPE,
    MAX_NAME_CHARS,
    MAX_SCOPE_ID_CHARS,
    Artifact,
    ArtifactScope,
    ArtifactVersion,
    BytesLike,
    Capacities,
    Clock,
    MetadataValue,
    check_artifact_name,
    check_limit,
    check_put,
    check_scope,
    check_version,
    digest_of,
    not_found,
    verified_artifact,
)
from adk_actors.errors import StorageError, ValidationError
from adk_actors.storage.sql import SqlStore, schema_version_table

__all__ = ["SCHEMA_VERSION", "SqlArtifactService", "tables"]

SCHEMA_VERSION: Final = 1
"""The schema version this code writes; older databases are migrated forward on open."""
_COMPONENT: Final = "artifacts"
_PG_MIGRATION_LOCK: Final = 0x4144_4B41_5254_4631  # "ADKARTF1": serializes concurrent first opens

_Id = BigInteger().with_variant(Integer(), "sqlite")
_Name = String(MAX_NAME_CHARS).with_variant(String(MAX_NAME_CHARS, collation="C"), "postgresql")

tables = MetaData()

schema_table = schema_version_table("adk_artifact_schema", tables, wall_clock=True)

store_table = Table(
    "adk_artifact_store",
    tables,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("scopes", BigInteger, nullable=False),
)

scopes_table = Table(
    "adk_artifact_scopes",
    tables,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("level", String(16), nullable=False),
    Column("app_name", String(MAX_SCOPE_ID_CHARS), nullable=False),
    Column("user_id", String(MAX_SCOPE_ID_CHARS), nullable=False),
    Column("session_id", String(MAX_SCOPE_ID_CHARS), nullable=False),
    Column("names", BigInteger, nullable=False),
)

names_table = Table(
    "adk_artifact_names",
    tables,
    Column("scope_id", _Id, ForeignKey("adk_artifact_scopes.id"), primary_key=True),
    Column("name", _Name, primary_key=True),
    Column("issued", BigInteger, nullable=False),
)

versions_table = Table(
    "adk_artifact_versions",
    tables,
    Column("scope_id", _Id, primary_key=True),
    Column("name", _Name, primary_key=True),
    Column("version", BigInteger, primary_key=True),
    Column("digest", String(71), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("mime_type", String(255), nullable=False),
    Column("metadata", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("data", LargeBinary, nullable=False),
)

_SC = scopes_table.c
_N = names_table.c
_V = versions_table.c
_INFO_COLUMNS: Final = (_V.version, _V.digest, _V.size, _V.mime_type, _V.metadata, _V.created_at)


def _migrate_to_1(conn: Connection) -> None:
    tables.create_all(conn, tables=[store_table, scopes_table, names_table, versions_table], checkfirst=True)


def _key_hash(scope: ArtifactScope) -> str:
    canonical = json.dumps(list(scope.key), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(b"scope\x00" + canonical.encode("utf-8")).hexdigest()


def _scope_columns(scope: ArtifactScope) -> dict[str, str]:
    # Scope ids are never empty, so "" stands for "not at this level" without NULLs in the unique key.
    return {
        "level": scope.level,
        "app_name": scope.app_name,
        "user_id": scope.user_id or "",
        "session_id": scope.session_id or "",
    }


def _corrupt(rule: str) -> StorageError:
    return StorageError("stored artifact data failed verification", reason="artifact_corrupt", details={"rule": rule})


class SqlArtifactService(SqlStore):
    """Artifacts in a SQLite file or a PostgreSQL database; safe for several threads, processes and hosts.

    The service is a picklable descriptor (its URL and options, never an engine): each process opens its own
    engine on first use and migrates the schema forward. See the module docstring for the schema.

    Args:
        url: A SQLAlchemy URL: ``sqlite:///path.db`` or ``postgresql+psycopg://...``.
        max_artifact_bytes: bound on one version's bytes (``artifact_too_large`` above it).
        max_scan_entries: the lifetime capacities derive from it, as for the other adapters
            (:class:`~adk_actors.artifacts.base.Capacities`): ``// 3`` versions per name, ``// 2`` names per scope
            and ``// 2`` scopes per database.
        busy_timeout_ms: SQLite's busy timeout.
        engine_options: Extra ``create_engine`` options.
        clock: wall-clock seconds for ``created_at``; must pickle (a module-level function).

    Raises:
        ConfigError: ``url`` is not a SQLAlchemy URL, or an option is out of range (``invalid_value``).
    """

    LABEL: ClassVar[str] = "artifact store"
    URL_KEY: ClassVar[str] = "artifact_url"
    COMPONENT = _COMPONENT
    SCHEMA_VERSION = SCHEMA_VERSION
    SCHEMA_TABLE = schema_table
    MIGRATIONS: ClassVar[Mapping[int, Callable[[Connection], None]]] = {1: _migrate_to_1}
    PG_MIGRATION_LOCK = _PG_MIGRATION_LOCK
    DIALECTS = ("sqlite", "postgresql")

    def __init__(
        self,
        url: str,
        *,
        max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES,
        max_scan_entries: int = DEFAULT_MAX_SCAN_ENTRIES,
        busy_timeout_ms: int = 30_000,
        engine_options: Mapping[str, Any] | None = None,
        clock: Clock = time.time,
    ) -> None:
        self.capacities = Capacities(max_artifact_bytes=max_artifact_bytes, max_scan_entries=max_scan_entries)
        super().__init__(url, busy_timeout_ms=busy_timeout_ms, engine_options=engine_options, clock=clock)

    def _descriptor(self) -> dict[str, Any]:
        caps = self.capacities
        return {
            **super()._descriptor(),
            "max_artifact_bytes": caps.max_artifact_bytes,
            "max_scan_entries": caps.max_scan_entries,
        }

    def _retriable_integrity(self, exc: DBAPIError, sqlstate: str | None) -> bool:
        # A lost race on a unique key (two first writers of one scope or name): the retry finds the winner's row.
        return sqlstate == "23505" or "UNIQUE constraint failed" in str(exc.orig)

    # -- scope rows ------------------------------------------------------------------------------------------

    @staticmethod
    def _find_scope(conn: Connection, scope: ArtifactScope, *, lock: bool = False) -> tuple[int, int] | None:
        """``(id, names)`` of the scope's row (locked for this transaction with ``lock``), or ``None``."""
        statement = select(_SC.id, _SC.names, _SC.level, _SC.app_name, _SC.user_id, _SC.session_id).where(
            _SC.key_hash == _key_hash(scope)
        )
        row = conn.execute(statement.with_for_update() if lock else statement).first()
        if row is None:
            return None
        if {k: getattr(row, k) for k in ("level", "app_name", "user_id", "session_id")} != _scope_columns(scope):
            raise _corrupt("scope_mismatch")
        return int(row.id), int(row.names)

    def _claim_scope(self, conn: Connection, scope: ArtifactScope) -> tuple[int, int]:
        """The scope's row, locked; admitted first (within the lifetime scope capacity) when it is new."""
        found = self._find_scope(conn, scope, lock=True)
        if found is not None:
            return found
        insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
        conn.execute(insert(store_table).values(id=1, scopes=0).on_conflict_do_nothing(index_elements=["id"]))
        admitted = int(
            conn.execute(select(store_table.c.scopes).where(store_table.c.id == 1).with_for_update()).scalar_one()
        )
        # Another writer may have admitted the scope while this one waited for the store row.
        found = self._find_scope(conn, scope, lock=True)
        if found is not None:
            return found
        if admitted >= self.capacities.max_scopes:
            raise self.capacities.scope_capacity_error()
        conn.execute(store_table.update().where(store_table.c.id == 1).values(scopes=store_table.c.scopes + 1))
        conn.execute(scopes_table.insert().values(key_hash=_key_hash(scope), names=0, **_scope_columns(scope)))
        found = self._find_scope(conn, scope, lock=True)
        if found is None:  # pragma: no cover - the row was inserted in this transaction
            raise StorageError("the artifact scope vanished", reason="write_failed", details={"operation": "put"})
        return found

    # -- the contract ----------------------------------------------------------------------------------------

    def put(
        self,
        scope: ArtifactScope,
        name: str,
        data: BytesLike,
        *,
        mime_type: str = DEFAULT_MIME_TYPE,
        metadata: Mapping[str, MetadataValue] | None = None,
    ) -> ArtifactVersion:
        """Store ``data`` as the next version of ``name`` in ``scope`` (see ``BaseArtifactService.put``)."""
        raw, meta = check_put(scope, name, data, mime_type, metadata, self.capacities.max_artifact_bytes)
        encoded = json.dumps(meta, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
        digest = digest_of(raw)
        caps = self.capacities

        def body(conn: Connection) -> ArtifactVersion:
            scope_id, names = self._claim_scope(conn, scope)
            issued = conn.execute(
                select(_N.issued).where(_N.scope_id == scope_id, _N.name == name).with_for_update()
            ).scalar()
            if issued is None:
                if names >= caps.max_names_per_scope:
                    raise caps.name_capacity_error(scope)
                conn.execute(names_table.insert().values(scope_id=scope_id, name=name, issued=0))
                conn.execute(update(scopes_table).where(_SC.id == scope_id).values(names=_SC.names + 1))
                issued = 0
            if int(issued) >= caps.max_versions_per_name:
                raise caps.version_capacity_error(scope, name)
            number = int(issued) + 1
            conn.execute(update(names_table).where(_N.scope_id == scope_id, _N.name == name).values(issued=number))
            created_at = float(self._clock())
            conn.execute(
                versions_table.insert().values(
                    scope_id=scope_id,
                    name=name,
                    version=number,
                    digest=digest,
                    size=len(raw),
                    mime_type=mime_type,
                    metadata=encoded,
                    created_at=created_at,
                    data=raw,
                )
            )
            return ArtifactVersion(
                scope=scope,
                name=name,
                version=number,
                digest=digest,
                size=len(raw),
                mime_type=mime_type,
                metadata=dict(meta),
                created_at=created_at,
            )

        return self._write(body)

    def get(self, scope: ArtifactScope, name: str, version: int | None = None) -> Artifact:
        """A version with its bytes, the latest when ``version`` is ``None`` (see ``BaseArtifactService.get``)."""
        check_scope(scope)
        check_artifact_name(name)
        if version is not None:
            check_version(version)

        def body(conn: Connection) -> Any:
            found = self._find_scope(conn, scope)
            if found is None:
                return None
            statement = select(*_INFO_COLUMNS, _V.data).where(_V.scope_id == found[0], _V.name == name)
            if version is not None:
                statement = statement.where(_V.version == version)
            return conn.execute(statement.order_by(_V.version.desc()).limit(1)).first()

        row = self._read(body)
        if row is None:
            raise not_found(scope, name, version)
        return verified_artifact(_version(scope, name, row), bytes(row.data))

    def list_names(
        self, scope: ArtifactScope, *, limit: int = 100, cursor: str | None = None
    ) -> tuple[list[str], str | None]:
        """A page of names with at least one stored version (see ``BaseArtifactService.list_names``)."""
        check_scope(scope)
        size = check_limit(limit)
        if cursor is not None:
            try:
                check_artifact_name(cursor)
            except ValidationError:
                raise ValidationError(
                    "a cursor is the last name of the previous page", reason="invalid_cursor", details={}
                ) from None

        def body(conn: Connection) -> list[str]:
            found = self._find_scope(conn, scope)
            if found is None:
                return []
            live = exists().where(_V.scope_id == _N.scope_id, _V.name == _N.name)
            statement = select(_N.name).where(_N.scope_id == found[0], live)
            if cursor is not None:
                statement = statement.where(_N.name > cursor)
            return [str(n) for n in conn.execute(statement.order_by(_N.name).limit(size + 1)).scalars()]

        names = self._read(body)
        page = names[:size]
        return page, (page[-1] if len(names) > size else None)

    def list_versions(self, scope: ArtifactScope, name: str) -> list[ArtifactVersion]:
        """The stored versions of ``name``, oldest first (see ``BaseArtifactService.list_versions``)."""
        check_scope(scope)
        check_artifact_name(name)

        def body(conn: Connection) -> list[Any]:
            found = self._find_scope(conn, scope)
            if found is None:
                return []
            statement = select(*_INFO_COLUMNS).where(_V.scope_id == found[0], _V.name == name)
            return list(conn.execute(statement.order_by(_V.version)).all())

        return [_version(scope, name, row) for row in self._read(body)]

    def delete(self, scope: ArtifactScope, name: str, version: int | None = None) -> int:
        """Delete one version or all; returns the count (see ``BaseArtifactService.delete``)."""
        check_scope(scope)
        check_artifact_name(name)
        if version is not None:
            check_version(version)

        def body(conn: Connection) -> int:
            found = self._find_scope(conn, scope)
            if found is None:
                return 0
            statement = delete(versions_table).where(_V.scope_id == found[0], _V.name == name)
            if version is not None:
                statement = statement.where(_V.version == version)
            return int(conn.execute(statement).rowcount or 0)

        return self._write(body)


def _version(scope: ArtifactScope, name: str, row: Any) -> ArtifactVersion:
    try:
        metadata = json.loads(str(row.metadata))
    except ValueError:
        raise _corrupt("metadata_not_json") from None
    if not isinstance(metadata, dict):
        raise _corrupt("metadata_not_an_object")
    return ArtifactVersion(
        scope=scope,
        name=name,
        version=int(row.version),
        digest=str(row.digest),
        size=int(row.size),
        mime_type=str(row.mime_type),
        metadata=metadata,
        created_at=float(row.created_at),
    )
