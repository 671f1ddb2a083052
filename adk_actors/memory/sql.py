"""The durable memory service on our SQL storage layer: a SQLite file (FTS5) or PostgreSQL (full-text search).

Tables (schema version 1, recorded in ``adk_memory_schema``):

* ``adk_memory_scopes``: one row per non-empty scope holding its entry count. Every mutation of a scope locks
  that row first (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite writes are ``BEGIN IMMEDIATE``), so the
  capacity check and the idempotency check of an add see every committed add of the same scope.
* ``adk_memory_entries``: the entries; a unique index on (app, user, idempotency key) is the backstop that makes
  a key yield one entry even if two writers got past the lock (the loser is retried and finds the winner's).
* Each entry row carries its metadata twice: as canonical JSON (what ``get`` returns) and as ``tags``, a JSON
  object (JSONB on PostgreSQL) of the typed text forms of :func:`~adk_actors.memory.base.encode_metadata_value`.
  Search filters compare ``tags`` on each candidate row (``json_each`` on SQLite, ``@>`` on PostgreSQL), so a
  filter never turns into a join whose plan depends on fresh table statistics.
* SQLite: ``adk_memory_fts``, an FTS5 index over ``content`` kept in step by triggers (tokenizer ``unicode61``
  without diacritics folding). PostgreSQL: a ``tsvector`` column of the content's words as
  :func:`~adk_actors.memory.base.tokenize` cuts them (``'simple'`` configuration: no stemming, no stop words; so
  ``dotted.name`` is two words, not PostgreSQL's host name), with a GIN index.

Search never hands the caller's text to a query parser: the query is cut into words by
:func:`~adk_actors.memory.base.query_terms` and the adapter searches for "any of these words", each one quoted
(FTS5) or a quoted lexeme cast to ``tsquery`` as it is (PostgreSQL's text parser never sees it, so it cannot cut a
word of ours, e.g. ``¼near``, into a shorter one that matches what the query did not ask for), so ``"``, ``*``,
``NEAR``, ``-``, ``:``, ``&`` or ``|`` are text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Final

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    delete,
    func,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError

from adk_actors.errors import StorageError, ValidationError
from adk_actors.memory.base import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_ENTRIES,
    BaseMemoryService,
    MemoryEntry,
    MemoryHit,
    MemoryProvenance,
    MemoryScope,
    MetadataValue,
    NewMemory,
    check_batch,
    check_entry_id,
    check_scope,
    check_search,
    check_session_id,
    encode_metadata_value,
    entry_not_found,
    is_entry_id,
    metadata_from_json,
    metadata_to_json,
    new_entry_id,
    plan_batch,
    scope_capacity_reached,
    tokenize,
)
from adk_actors.storage.sql import SqlStore, schema_version_table

__all__ = ["SCHEMA_VERSION", "SqlMemoryService", "tables"]

SCHEMA_VERSION: Final = 1
"""The schema version this code writes; older databases are migrated forward on open."""
_COMPONENT: Final = "memory"
_PG_MIGRATION_LOCK: Final = 0x4144_4B4D_454D_5231  # "ADKMEMR1": serializes concurrent first opens
_CLAIM_ATTEMPTS: Final = 8

_Pk = BigInteger().with_variant(Integer(), "sqlite")  # SQLite: an INTEGER PRIMARY KEY is the FTS5 rowid
_Id = String(40).with_variant(String(40, collation="C"), "postgresql")  # ties order by id bytewise everywhere

tables = MetaData()

schema_table = schema_version_table("adk_memory_schema", tables, wall_clock=True)

scopes_table = Table(
    "adk_memory_scopes",
    tables,
    Column("app", String(255), primary_key=True),
    Column("user_id", String(255), primary_key=True),
    Column("entries", Integer, nullable=False),
)

entries_table = Table(
    "adk_memory_entries",
    tables,
    Column("pk", _Pk, primary_key=True, autoincrement=True),
    Column("id", _Id, nullable=False, unique=True),
    Column("app", String(255), nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("content", Text, nullable=False),
    Column("metadata", Text, nullable=False),
    Column("session_id", String(255)),
    Column("event_id", String(255)),
    Column("author", String(255)),
    Column("created_at", Float, nullable=False),
    Column("idempotency_key", String(255)),
    # PostgreSQL: the words of the content (our tokenizer's, so both dialects agree on what a word is); unused on
    # SQLite, where FTS5 indexes the content itself.
    Column("tsv", Text().with_variant(TSVECTOR(), "postgresql")),
    # The metadata in the typed text form of ``encode_metadata_value`` (what the exact-match filters compare).
    Column("tags", JSON().with_variant(JSONB(), "postgresql"), nullable=False),
    UniqueConstraint("app", "user_id", "idempotency_key", name="uq_adk_memory_idempotency"),
)
Index("ix_adk_memory_entries_scope", entries_table.c.app, entries_table.c.user_id, entries_table.c.created_at)
Index("ix_adk_memory_entries_session", entries_table.c.app, entries_table.c.user_id, entries_table.c.session_id)

_E = entries_table.c
_S = scopes_table.c
_ENTRY_COLUMNS: Final = (
    _E.id,
    _E.content,
    _E.metadata,
    _E.session_id,
    _E.event_id,
    _E.author,
    _E.created_at,
    _E.idempotency_key,
)

_SQLITE_FTS: Final = (
    "CREATE VIRTUAL TABLE adk_memory_fts USING fts5(content, content='adk_memory_entries', content_rowid='pk', "
    "tokenize='unicode61 remove_diacritics 0')",
    "CREATE TRIGGER adk_memory_fts_insert AFTER INSERT ON adk_memory_entries BEGIN "
    "INSERT INTO adk_memory_fts(rowid, content) VALUES (new.pk, new.content); END",
    "CREATE TRIGGER adk_memory_fts_delete AFTER DELETE ON adk_memory_entries BEGIN "
    "INSERT INTO adk_memory_fts(adk_memory_fts, rowid, content) VALUES ('delete', old.pk, old.content); END",
    "CREATE TRIGGER adk_memory_fts_update AFTER UPDATE OF content ON adk_memory_entries BEGIN "
    "INSERT INTO adk_memory_fts(adk_memory_fts, rowid, content) VALUES ('delete', old.pk, old.content); "
    "INSERT INTO adk_memory_fts(rowid, content) VALUES (new.pk, new.content); END",
)
_PG_FTS: Final = ("CREATE INDEX ix_adk_memory_entries_tsv ON adk_memory_entries USING GIN (tsv)",)

_SELECT_ENTRY: Final = (
    "e.id, e.content, e.metadata, e.session_id, e.event_id, e.author, e.created_at, e.idempotency_key"
)
_SQLITE_SEARCH: Final = (
    f"SELECT {_SELECT_ENTRY}, -bm25(adk_memory_fts) AS score "
    "FROM adk_memory_fts JOIN adk_memory_entries AS e ON e.pk = adk_memory_fts.rowid "
    "WHERE adk_memory_fts MATCH :query AND e.app = :app AND e.user_id = :user{filters} "
    "ORDER BY score DESC, e.created_at DESC, e.id ASC LIMIT :limit"
)
_PG_SEARCH: Final = (
    f"SELECT {_SELECT_ENTRY}, ts_rank(e.tsv, q.query) AS score "
    "FROM adk_memory_entries AS e CROSS JOIN CAST(:query AS tsquery) AS q(query) "
    "WHERE e.app = :app AND e.user_id = :user AND e.tsv @@ q.query{filters} "
    "ORDER BY score DESC, e.created_at DESC, e.id ASC LIMIT :limit"
)
# Filters are checked on the candidate row itself (no join the planner could get wrong on a fresh table).
_SQLITE_FILTER: Final = (
    " AND EXISTS (SELECT 1 FROM json_each(e.tags) AS t{i} WHERE t{i}.key = :fk{i} AND t{i}.value = :fv{i})"
)
_PG_FILTER: Final = " AND e.tags @> CAST(:filter AS jsonb)"


def _migrate_to_1(conn: Connection) -> None:
    tables.create_all(conn, tables=[scopes_table, entries_table], checkfirst=True)
    for statement in _PG_FTS if conn.dialect.name == "postgresql" else _SQLITE_FTS:
        conn.exec_driver_sql(statement)


def _match_expression(terms: Sequence[str], dialect: str) -> str:
    """The "any of these words" query. Terms are runs of letters and digits (never a quote or a backslash), and
    each is quoted, so nothing in them is operator syntax."""
    if dialect == "postgresql":
        return " | ".join(f"'{t}'" for t in terms)
    return " OR ".join(f'"{t}"' for t in terms)


class SqlMemoryService(SqlStore, BaseMemoryService):
    """The memory contract in a SQLite file or a PostgreSQL database (see the module docstring for the schema).

    The service is a picklable descriptor (its URL and options, never an engine): each process opens its own
    engine on first use and migrates the schema forward.

    Ranking, per dialect (both lexical: neither is a vector store; ties go to the newer entry, then to the smaller
    id):

    * SQLite: FTS5 ``bm25()`` (``k1 = 1.2``, ``b = 0.75``) over ``unicode61`` words; the score is ``-bm25()`` so
      higher is better. FTS5 keeps its term statistics (document frequencies, average length) for the whole
      table, so scores, and with them the order of a scope's hits, can shift when other scopes change; which
      entries match never does, and no other scope's entry is ever returned.
    * PostgreSQL: ``ts_rank`` (no normalization) of the ``'simple'`` ``tsvector`` against the query words joined
      with OR; it depends only on the entry itself, so scores never reflect other scopes. The GIN index serves
      searches once the table has planner statistics (autovacuum's ``ANALYZE``); right after a bulk load, before
      that, PostgreSQL scans the scope's rows instead (tens of milliseconds per 100k entries).

    Args:
        url: A SQLAlchemy URL: ``sqlite:///path.db`` or ``postgresql+psycopg://...``.
        max_entries_per_scope: The bound on one scope's entries.
        busy_timeout_ms: SQLite's busy timeout.
        engine_options: Extra ``create_engine`` options.
        clock: Wall-clock source in epoch seconds (``created_at``); must pickle (a module-level function).

    Raises:
        ConfigError: ``url`` is not a SQLAlchemy URL.
        ValidationError: ``max_entries_per_scope`` is not a positive int.
    """

    LABEL: ClassVar[str] = "memory store"
    URL_KEY: ClassVar[str] = "memory_url"
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
        max_entries_per_scope: int = DEFAULT_MAX_ENTRIES,
        busy_timeout_ms: int = 30_000,
        engine_options: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if isinstance(max_entries_per_scope, bool) or not isinstance(max_entries_per_scope, int):
            raise ValidationError("max_entries_per_scope must be an int", reason="invalid_value")
        if max_entries_per_scope < 1:
            raise ValidationError("max_entries_per_scope must be positive", reason="invalid_value")
        self._max = max_entries_per_scope
        super().__init__(url, busy_timeout_ms=busy_timeout_ms, engine_options=engine_options, clock=clock)

    def _descriptor(self) -> dict[str, Any]:
        return {**super()._descriptor(), "max_entries_per_scope": self._max}

    @property
    def max_entries_per_scope(self) -> int:
        return self._max

    def _retriable_integrity(self, exc: DBAPIError, sqlstate: str | None) -> bool:
        # Two adds of one idempotency key that both passed the scope lock: the retry finds the winner's entry.
        return sqlstate == "23505" or "UNIQUE constraint failed" in str(exc.orig)

    # -- scope rows ------------------------------------------------------------------------------------------

    @staticmethod
    def _where_scope(scope: MemoryScope) -> tuple[Any, Any]:
        return (_E.app == scope.app, _E.user_id == scope.user)

    @staticmethod
    def _scope_row(conn: Connection, scope: MemoryScope) -> int | None:
        """Lock the scope's row (PostgreSQL; SQLite's write transaction already excludes other writers)."""
        row = conn.execute(
            select(_S.entries).where(_S.app == scope.app, _S.user_id == scope.user).with_for_update()
        ).first()
        return None if row is None else int(row[0])

    def _claim_scope(self, conn: Connection, scope: MemoryScope) -> int:
        """Create the scope's row if needed and lock it; returns its entry count."""
        insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
        for _attempt in range(_CLAIM_ATTEMPTS):
            # A concurrent erase may delete the row between the insert and the lock: then insert it again.
            conn.execute(
                insert(scopes_table)
                .values(app=scope.app, user_id=scope.user, entries=0)
                .on_conflict_do_nothing(index_elements=[_S.app, _S.user_id])
            )
            current = self._scope_row(conn, scope)
            if current is not None:
                return current
        raise StorageError(
            "the memory scope kept being erased", reason="write_failed", details={"operation": "claim_scope"}
        )

    @staticmethod
    def _settle_scope(conn: Connection, scope: MemoryScope, removed: int, current: int) -> None:
        where = (_S.app == scope.app, _S.user_id == scope.user)
        if current - removed <= 0:
            conn.execute(delete(scopes_table).where(*where))
        elif removed:
            conn.execute(update(scopes_table).where(*where).values(entries=_S.entries - removed))

    # -- the contract ----------------------------------------------------------------------------------------

    def add_batch(self, scope: MemoryScope, items: Sequence[NewMemory]) -> list[MemoryEntry]:
        check_scope(scope)
        batch = check_batch(items)
        keys = sorted({i.idempotency_key for i in batch if i.idempotency_key is not None})

        def body(conn: Connection) -> list[MemoryEntry]:
            current = self._claim_scope(conn, scope)
            stored: dict[str, MemoryEntry] = {}
            if keys:
                rows = conn.execute(
                    select(*_ENTRY_COLUMNS).where(*self._where_scope(scope), _E.idempotency_key.in_(keys))
                ).all()
                stored = {str(r.idempotency_key): _entry(scope, r) for r in rows}
            slots, to_add = plan_batch(batch, stored.get)
            if to_add and current + len(to_add) > self._max:
                raise scope_capacity_reached(self._max)
            created = self._insert(conn, scope, to_add)
            if created:
                conn.execute(
                    update(scopes_table)
                    .where(_S.app == scope.app, _S.user_id == scope.user)
                    .values(entries=_S.entries + len(created))
                )
            return [slot if isinstance(slot, MemoryEntry) else created[slot] for slot in slots]

        return self._write(body)

    def _insert(self, conn: Connection, scope: MemoryScope, items: Sequence[NewMemory]) -> list[MemoryEntry]:
        if not items:
            return []
        now = float(self._clock())
        created = [
            MemoryEntry(
                id=new_entry_id(),
                scope=scope,
                content=item.content,
                metadata=dict(item.metadata),
                provenance=item.provenance,
                created_at=now,
                idempotency_key=item.idempotency_key,
            )
            for item in items
        ]
        rows = [
            {
                "id": e.id,
                "app": scope.app,
                "user_id": scope.user,
                "content": e.content,
                "metadata": metadata_to_json(e.metadata),
                "session_id": e.provenance.session_id,
                "event_id": e.provenance.event_id,
                "author": e.provenance.author,
                "created_at": now,
                "idempotency_key": e.idempotency_key,
                "tags": _tags(e.metadata),
            }
            for e in created
        ]
        statement = entries_table.insert()
        if conn.dialect.name == "postgresql":
            statement = statement.values(
                tsv=func.to_tsvector(literal_column("'simple'::regconfig"), bindparam("words", type_=Text()))
            )
            for row, entry in zip(rows, created):
                row["words"] = " ".join(tokenize(entry.content))
        conn.execute(statement, rows)
        return created

    def search(
        self,
        scope: MemoryScope,
        query: str,
        *,
        filter: Mapping[str, MetadataValue] | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> list[MemoryHit]:
        terms, wanted, limit = check_search(scope, query, filter, limit)
        if not terms:
            return []
        dialect = self._get_engine().dialect.name
        params: dict[str, Any] = {
            "query": _match_expression(terms, dialect),
            "app": scope.app,
            "user": scope.user,
            "limit": limit,
        }
        clauses = ""
        if wanted and dialect == "postgresql":
            clauses = _PG_FILTER
            params["filter"] = json.dumps(_tags(wanted), ensure_ascii=False)
        elif wanted:
            for i, (key, value) in enumerate(wanted.items()):
                clauses += _SQLITE_FILTER.format(i=i)
                params[f"fk{i}"], params[f"fv{i}"] = key, encode_metadata_value(value)
        statement = text((_PG_SEARCH if dialect == "postgresql" else _SQLITE_SEARCH).format(filters=clauses))

        def body(conn: Connection) -> list[MemoryHit]:
            rows = conn.execute(statement, params).all()
            return [
                MemoryHit(entry=_entry(scope, row), score=float(row.score), rank=rank)
                for rank, row in enumerate(rows, start=1)
            ]

        return self._read(body)

    def get(self, scope: MemoryScope, entry_id: str) -> MemoryEntry:
        check_scope(scope)
        if not is_entry_id(check_entry_id(entry_id)):
            raise entry_not_found(entry_id)  # never one of ours: no need to ask the database

        def body(conn: Connection) -> Any:
            return conn.execute(select(*_ENTRY_COLUMNS).where(*self._where_scope(scope), _E.id == entry_id)).first()

        row = self._read(body)
        if row is None:
            raise entry_not_found(entry_id)
        return _entry(scope, row)

    def delete_entry(self, scope: MemoryScope, entry_id: str) -> bool:
        check_scope(scope)
        if not is_entry_id(check_entry_id(entry_id)):
            return False
        return self._erase(scope, _E.id == entry_id) > 0

    def erase_session(self, scope: MemoryScope, session_id: str) -> int:
        check_scope(scope)
        check_session_id(session_id)
        return self._erase(scope, _E.session_id == session_id)

    def erase_user(self, scope: MemoryScope) -> int:
        check_scope(scope)
        return self._erase(scope, None)

    def _erase(self, scope: MemoryScope, condition: Any) -> int:
        def body(conn: Connection) -> int:
            current = self._scope_row(conn, scope)
            if current is None:
                return 0
            where = [*self._where_scope(scope)] + ([condition] if condition is not None else [])
            removed = int(conn.execute(delete(entries_table).where(*where)).rowcount or 0)
            self._settle_scope(conn, scope, removed, current if condition is not None else removed)
            return removed

        return self._write(body)

    def count(self, scope: MemoryScope) -> int:
        check_scope(scope)

        def body(conn: Connection) -> int:
            found = conn.execute(select(_S.entries).where(_S.app == scope.app, _S.user_id == scope.user)).scalar()
            return int(found or 0)

        return self._read(body)


def _tags(metadata: Mapping[str, MetadataValue]) -> dict[str, str]:
    return {key: encode_metadata_value(value) for key, value in metadata.items()}


def _entry(scope: MemoryScope, row: Any) -> MemoryEntry:
    return MemoryEntry(
        id=str(row.id),
        scope=scope,
        content=str(row.content),
        metadata=metadata_from_json(str(row.metadata)),
        provenance=MemoryProvenance(session_id=row.session_id, event_id=row.event_id, author=row.author),
        created_at=float(row.created_at),
        idempotency_key=row.idempotency_key,
    )
