"""C=1000 concurrent requests with latency_ms=200 complete with 0 errors (delays hold no server thread).

No wall-clock assertion: serialised delays would take 200 s and trip pytest's timeout instead.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from adk_actors.emulator import Emulator

from .helpers import GEN, post, user

C = 1000
THREADS = 200


@pytest.mark.slow
def test_thousand_concurrent_requests() -> None:
    local = threading.local()
    sessions: list[requests.Session] = []
    lock = threading.Lock()

    def session() -> requests.Session:
        if not hasattr(local, "s"):
            local.s = requests.Session()
            with lock:
                sessions.append(local.s)
        return local.s

    def one(i: int) -> str:
        resp = post(emu.base_url, GEN, {"contents": [user(f"req {i}")]}, session=session(), timeout=60)
        resp.raise_for_status()
        return resp.json()["candidates"][0]["content"]["parts"][0]["text"]

    with Emulator(latency_ms=200) as emu:
        try:
            with ThreadPoolExecutor(THREADS) as pool:
                results = list(pool.map(one, range(C)))
        finally:
            for s in sessions:
                s.close()
        assert results == [f"You said: req {i}" for i in range(C)]
        assert len(emu.requests) == C
        assert all(r["status"] == 200 for r in emu.requests)


@pytest.mark.slow
def test_thousand_simultaneous_connections() -> None:
    """All 1000 requests are in flight at once (one thread each, started together by a barrier)."""
    barrier = threading.Barrier(C)
    errors: list[BaseException] = []
    statuses: list[int] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            resp = post(emu.base_url, GEN, {"contents": [user(f"r{i}")]}, timeout=60)
            with lock:
                statuses.append(resp.status_code)
        except BaseException as exc:  # collected and asserted below
            with lock:
                errors.append(exc)

    with Emulator(latency_ms=200) as emu:
        threads = [threading.Thread(target=one, args=(i,)) for i in range(C)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert statuses == [200] * C
