"""Provider overhead benchmark: our Gemini provider vs a bare ``requests.post`` against the local emulator.

``make bench`` calls :func:`run` (``python -m adk_actors.devtools.provider_overhead`` prints one run); it needs
nothing but the emulator (no network beyond 127.0.0.1).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import requests

from adk_actors.emulator import Emulator
from adk_actors.models.api import generate
from adk_actors.models.gemini.transport import close_sessions

__all__ = ["run"]

_KEY = "bench-key-0123456789"


def _timed(fn: Callable[[], Any], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "mean_ms": statistics.fmean(ordered) * 1000,
        "p50_ms": ordered[len(ordered) // 2] * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    }


def run(n: int = 500) -> dict[str, Any]:
    """Time ``n`` generate round trips through the provider and through a bare pooled ``requests`` session.

    Returns:
        ``{"n", "provider": {mean_ms, p50_ms, p99_ms}, "bare_requests": {...}, "overhead_mean_ms"}``.
    """
    history = [{"role": "user", "content": "benchmark"}]
    with Emulator(script={"rules": [{"respond": {"text": "ok"}}]}, latency_ms=0) as emu:
        config = {"api_key": _KEY, "base_url": emu.base_url}
        url = f"{emu.base_url}/v1beta/models/gemini-3.1-flash-lite:generateContent"
        body = {"contents": [{"role": "user", "parts": [{"text": "benchmark"}]}]}
        with requests.Session() as bare:

            def bare_call() -> None:
                resp = bare.post(url, json=body, headers={"x-goog-api-key": _KEY}, timeout=30)
                resp.raise_for_status()
                resp.json()

            def provider_call() -> None:
                generate(config, history)

            for warm in (bare_call, provider_call):
                _timed(warm, min(20, n))
            provider = _summary(_timed(provider_call, n))
            baseline = _summary(_timed(bare_call, n))
        close_sessions()
    return {
        "n": n,
        "provider": provider,
        "bare_requests": baseline,
        "overhead_mean_ms": provider["mean_ms"] - baseline["mean_ms"],
    }


if __name__ == "__main__":  # pragma: no cover
    import json

    print(json.dumps(run(), indent=2))
