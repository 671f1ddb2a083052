"""Observability fixtures: a real OTLP/HTTP receiver per test, and this process's export pipeline pointed at it
(shut down after the test, so no export thread outlives it)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actor_tests.observability.otlp_receiver import OtlpReceiver
from adk_actors.observability import setup, spans


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    """A receiver on 127.0.0.1; the test fails if it received anything malformed."""
    with OtlpReceiver() as rx:
        yield rx
    assert rx.failures == [], f"the OTLP receiver got malformed requests: {rx.failures}"


@pytest.fixture
def export_to() -> Iterator[Callable[..., None]]:
    """``export_to(url, **configure_kwargs)``: configure this process's export (a long schedule delay, so the
    test decides when to send with ``setup.flush()``); export is shut down after the test."""

    def configure(url: str, **kwargs: Any) -> None:
        assert setup.configure(endpoint=url, **{"schedule_delay_ms": 60_000, **kwargs})

    yield configure
    setup.shutdown(timeout_s=1.0)
    alive = [t.name for t in threading.enumerate() if t.name.startswith("OtelBatch")]
    assert alive == [], f"export threads outlived the test: {alive}"


def counters() -> dict[str, Any]:
    """The export counters now (tests compare before and after: they are process-wide)."""
    return spans.stats()


def delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """What changed between two :func:`counters` readings (numbers and drop reasons)."""
    out = {k: after[k] - before[k] for k in ("exported", "dropped", "export_failures", "sampled_out")}
    out.update({f"dropped.{r}": n - before["dropped_by_reason"][r] for r, n in after["dropped_by_reason"].items()})
    return out
