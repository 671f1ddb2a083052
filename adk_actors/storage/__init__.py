"""Shared plumbing of the SQL stores (sessions, the workflow ledger): engines per process, migrations, retries."""

from adk_actors.storage.sql import SqlStore, safe_url

__all__ = ["SqlStore", "safe_url"]
