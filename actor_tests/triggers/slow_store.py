"""A trigger store whose ``accept`` is slow (1 s), for the tests that prove the trigger actor stays responsive.

It pickles as its URL (like any ``TriggerStore``) and is importable in every node process. Each ``accept`` first
appends one line to ``<database file>.accepts``, so a test can see that an accept is in flight (and count them).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from adk_actors.triggers.store import TriggerStore

ACCEPT_S = 1.0


def accepts_file(url: str) -> Path:
    """The file one line per ``accept`` call is appended to (a SQLite URL's database file + ``.accepts``)."""
    database = make_url(url).database
    assert database, "SlowStore needs a SQLite file URL"
    return Path(database + ".accepts")


class SlowStore(TriggerStore):
    def accept(self, *args: Any, **kwargs: Any) -> str | None:
        with accepts_file(self.url).open("a") as marker:
            marker.write("accept\n")
        time.sleep(ACCEPT_S)  # the slowness under test (a store stalled on its write lock)
        return super().accept(*args, **kwargs)
