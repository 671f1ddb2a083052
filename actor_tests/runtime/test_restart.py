"""Pure supervision decisions with an injected clock: restart types, strategies, the intensity window."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors.errors import ConfigError
from adk_actors.runtime.restart import Window, restart_group, should_restart
from adk_actors.runtime.supervisor import ChildSpec, SupervisorSpec


@pytest.mark.parametrize(
    ("restart", "reason", "expected"),
    [
        ("permanent", "normal", True),
        ("permanent", "crash", True),
        ("permanent", "killed", True),
        ("transient", "normal", False),
        ("transient", "shutdown", False),
        ("transient", "crash", True),
        ("transient", "killed", True),
        ("temporary", "crash", False),
        ("temporary", "killed", False),
    ],
)
def test_restart_types_follow_otp(restart: str, reason: str, expected: bool) -> None:
    assert should_restart(restart, reason) is expected  # type: ignore[arg-type]


def test_strategies_pick_the_otp_restart_group() -> None:
    order = ["a", "b", "c", "d"]
    assert restart_group("one_for_one", order, "b") == ["b"]
    assert restart_group("simple_one_for_one", order, "c") == ["c"]
    assert restart_group("one_for_all", order, "b") == ["a", "b", "c", "d"]
    assert restart_group("rest_for_one", order, "b") == ["b", "c", "d"]
    assert restart_group("rest_for_one", order, "d") == ["d"]


def test_window_allows_intensity_restarts_per_period_then_escalates() -> None:
    w = Window(intensity=3, period=5.0)
    now = 100.0
    for _ in range(3):
        w, exceeded = w.record(now)
        assert not exceeded
        now += 1.0
    w, exceeded = w.record(now)
    assert exceeded


def test_window_forgets_restarts_older_than_the_period() -> None:
    w = Window(intensity=1, period=5.0)
    w, exceeded = w.record(0.0)
    assert not exceeded
    w, exceeded = w.record(5.0)  # exactly one period later: the first has aged out
    assert not exceeded
    w, exceeded = w.record(6.0)
    assert exceeded
    assert w.count(100.0) == 0


@given(
    st.lists(st.floats(min_value=0, max_value=1000, allow_nan=False), max_size=40),
    st.integers(min_value=0, max_value=5),
    st.floats(min_value=0.1, max_value=50, allow_nan=False),
)
def test_window_escalates_exactly_when_more_than_intensity_fall_in_one_period(
    gaps: list[float], intensity: int, period: float
) -> None:
    w, now, stamps = Window(intensity, period), 0.0, []
    for gap in gaps:
        now += gap
        stamps.append(now)
        w, exceeded = w.record(now)
        recent = [t for t in stamps if now - t < period]
        assert exceeded == (len(recent) > intensity)


def test_specs_are_frozen_and_validated() -> None:
    spec = ChildSpec(id="a", actor="pkg.mod.Cls")
    with pytest.raises(AttributeError):
        spec.id = "b"  # type: ignore[misc]
    with pytest.raises(ConfigError):
        ChildSpec(id="", actor="pkg.mod.Cls")
    with pytest.raises(ConfigError):
        ChildSpec(id="a", actor="pkg.mod.Cls", restart="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        SupervisorSpec(strategy="one_for_some")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        SupervisorSpec(children=(spec, spec))
