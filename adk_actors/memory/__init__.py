"""Long-term memory: exact-scope entries with deterministic lexical search.

``InMemoryMemoryService`` (one process) and ``SqlMemoryService`` (SQLite with FTS5, PostgreSQL with its
full-text search) implement :class:`BaseMemoryService`: add (idempotent per key), search (ranked, exact metadata
filters), get, delete an entry, erase a session's or a user's entries, count — each bound to one exact
:class:`MemoryScope`. Ranking is lexical on every adapter; none is a vector store. ``ActorMemoryService`` (one
actor owning a service) and ``ShardedMemoryService`` (one shard actor per exact scope) are picklable clients of
actor-hosted services, usable from any process.
"""

from __future__ import annotations

from adk_actors.memory.actor import ActorMemoryService
from adk_actors.memory.base import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_ENTRIES,
    MAX_BATCH_ENTRIES,
    MAX_CONTENT_BYTES,
    MAX_LIMIT,
    MAX_METADATA_KEY_CHARS,
    MAX_METADATA_KEYS,
    MAX_METADATA_VALUE_CHARS,
    MAX_QUERY_BYTES,
    BaseMemoryService,
    MemoryEntry,
    MemoryHit,
    MemoryProvenance,
    MemoryScope,
    MetadataValue,
    NewMemory,
)
from adk_actors.memory.in_memory import InMemoryMemoryService
from adk_actors.memory.sharded import ShardedMemoryService
from adk_actors.memory.sql import SqlMemoryService

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_MAX_ENTRIES",
    "MAX_BATCH_ENTRIES",
    "MAX_CONTENT_BYTES",
    "MAX_LIMIT",
    "MAX_METADATA_KEYS",
    "MAX_METADATA_KEY_CHARS",
    "MAX_METADATA_VALUE_CHARS",
    "MAX_QUERY_BYTES",
    "ActorMemoryService",
    "BaseMemoryService",
    "InMemoryMemoryService",
    "MemoryEntry",
    "MemoryHit",
    "MemoryProvenance",
    "MemoryScope",
    "MetadataValue",
    "NewMemory",
    "ShardedMemoryService",
    "SqlMemoryService",
]
