"""Provider overhead benchmark: our Gemini provider vs a bare ``requests`` session and a bare ``urllib3`` pool.

All three make the same ``generateContent`` round trip against the local emulator (no network beyond 127.0.0.1),
interleaved in rounds so that a busy moment of a shared machine falls on all of them alike. Each is reported as
wall time per call and as the CPU time of the calling thread per call: the emulator answers from its own thread in
this process, so thread CPU is the client's cost alone, and steadier than wall time on a loaded machine.

``make bench`` calls :func:`run` (``python -m adk_actors.devtools.provider_overhead`` prints one run).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import requests
import urllib3

from adk_actors.emulator import Emulator
from adk_actors.errors import ConfigError
from adk_actors.models.api import generate
from adk_actors.models.gemini.transport import close_sessions

__all__ = ["run"]

_KEY = "bench-key-0123456789"
_ROUNDS = 5


def _timed(fn: Callable[[], Any], n: int, wall: list[float], cpu: list[float]) -> None:
    for _ in range(n):
        start, start_cpu = time.perf_counter(), time.thread_time()
        fn()
        cpu.append(time.thread_time() - start_cpu)
        wall.append(time.perf_counter() - start)


def _summary(wall: list[float], cpu: list[float]) -> dict[str, float]:
    ordered = sorted(wall)
    return {
        "mean_ms": statistics.fmean(ordered) * 1000,
        "p50_ms": ordered[len(ordered) // 2] * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "cpu_mean_us": statistics.fmean(cpu) * 1e6,
    }


def run(n: int = 500) -> dict[str, Any]:
    """Time ``n`` generate round trips each through the provider, a bare pooled ``requests.Session`` and a bare
    ``urllib3.HTTPConnectionPool``, in :data:`_ROUNDS` interleaved rounds after a warm-up.

    Raises:
        ConfigError: reason ``invalid_value`` when ``n`` is not a positive int.

    Returns:
        ``{"n", "provider", "bare_requests", "bare_urllib3"}`` each ``{mean_ms, p50_ms, p99_ms, cpu_mean_us}``, and
        ``overhead_mean_ms`` (provider − bare requests, mean wall time), ``overhead_urllib3_mean_ms``,
        ``cpu_overhead_us`` / ``cpu_overhead_urllib3_us`` (the same differences in thread CPU per call).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError("n must be a positive number of calls", reason="invalid_value", details={"key": "n"})
    history = [{"role": "user", "content": "benchmark"}]
    with Emulator(script={"rules": [{"respond": {"text": "ok"}}]}, latency_ms=0) as emu:
        config = {"api_key": _KEY, "base_url": emu.base_url}
        path = "/v1beta/models/gemini-3.1-flash-lite:generateContent"
        body = {"contents": [{"role": "user", "parts": [{"text": "benchmark"}]}]}
        pool = urllib3.HTTPConnectionPool(emu.host, emu.port, maxsize=1, retries=False)
        with requests.Session() as bare, pool:

            def bare_requests() -> None:
                resp = bare.post(emu.base_url + path, json=body, headers={"x-goog-api-key": _KEY}, timeout=30)
                resp.raise_for_status()
                resp.json()

            def bare_urllib3() -> None:
                resp = pool.urlopen(
                    "POST",
                    path,
                    body=json.dumps(body).encode(),
                    headers={"x-goog-api-key": _KEY, "Content-Type": "application/json"},
                    timeout=30,
                )
                if resp.status != 200:
                    raise RuntimeError(f"the emulator answered HTTP {resp.status}")
                json.loads(resp.data)

            def provider() -> None:
                generate(config, history)

            calls = {"provider": provider, "bare_requests": bare_requests, "bare_urllib3": bare_urllib3}
            samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in calls}
            for fn in calls.values():
                _timed(fn, min(20, n), [], [])
            rounds = min(_ROUNDS, n)
            names = list(calls)
            for r in range(rounds):
                count = n // rounds + (1 if r < n % rounds else 0)
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    _timed(calls[name], count, *samples[name])
        close_sessions()
    res = {name: _summary(*samples[name]) for name in calls}
    p, b, u = res["provider"], res["bare_requests"], res["bare_urllib3"]
    return {
        "n": n,
        **res,
        "overhead_mean_ms": p["mean_ms"] - b["mean_ms"],
        "overhead_urllib3_mean_ms": p["mean_ms"] - u["mean_ms"],
        "cpu_overhead_us": p["cpu_mean_us"] - b["cpu_mean_us"],
        "cpu_overhead_urllib3_us": p["cpu_mean_us"] - u["cpu_mean_us"],
    }


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run(), indent=2))
