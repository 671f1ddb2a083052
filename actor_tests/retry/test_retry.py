"""retry.execute: isolated attempts in worker processes, bounded backoff, attempt timeouts, one deadline."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adk_actors import retry
from adk_actors.errors import ConfigError, RetryExhausted, WorkerError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.testing import CrossProcessCounter

from .funcs import flaky, hang_first


def test_the_reference_example_recovers_on_the_third_attempt(system: ActorSystemHandle, tmp_path: Path) -> None:
    counter = CrossProcessCounter(tmp_path / "attempts")
    policy = {"max_attempts": 5, "initial_delay": 1, "max_delay": 10, "backoff_factor": 2.0}
    assert retry.execute(flaky, policy, counter, 3, system=system) == "recovered"
    assert counter.value == 3  # every attempt ran in a worker process; the file counted them


def test_exhaustion_carries_the_last_error_and_the_attempt_count(system: ActorSystemHandle, tmp_path: Path) -> None:
    counter = CrossProcessCounter(tmp_path / "attempts")
    with pytest.raises(RetryExhausted) as info:
        retry.execute(flaky, {"max_attempts": 3, "initial_delay": 1}, counter, 99, system=system)
    assert info.value.reason == "retry_exhausted" and info.value.details["attempts"] == 3
    assert info.value.details["last_error"]["reason"] == "function_failed"
    assert "temporary" not in str(info.value.details)  # structural: no exception text
    assert counter.value == 3


def test_a_hung_attempt_is_killed_at_its_timeout_and_retried(system: ActorSystemHandle, tmp_path: Path) -> None:
    counter = CrossProcessCounter(tmp_path / "attempts")
    t0 = time.monotonic()
    assert (
        retry.execute(
            hang_first, {"max_attempts": 2, "attempt_timeout": 1500, "initial_delay": 1}, counter, system=system
        )
        == "after a hung attempt"
    )
    assert time.monotonic() - t0 < 10
    assert counter.value == 2


def test_the_total_deadline_bounds_everything(system: ActorSystemHandle, tmp_path: Path) -> None:
    counter = CrossProcessCounter(tmp_path / "attempts")
    t0 = time.monotonic()
    with pytest.raises(RetryExhausted) as info:
        retry.execute(
            flaky,
            {"max_attempts": 50, "initial_delay": 200, "backoff_factor": 1.0, "timeout": 700},
            counter,
            99,
            system=system,
        )
    assert info.value.reason == "retry_deadline"
    assert time.monotonic() - t0 < 3
    assert 1 <= counter.value < 50


def test_an_unpicklable_function_fails_before_any_attempt(system: ActorSystemHandle) -> None:
    import threading

    lock = threading.Lock()
    with pytest.raises(WorkerError) as info:
        retry.execute(lambda: lock.locked(), {"max_attempts": 2}, system=system)
    assert info.value.reason == "unpicklable_callable"


def test_backoff_is_bounded_exponential_and_full_jitter_stays_below_it() -> None:
    policy = retry.RetryPolicy(max_attempts=6, initial_delay=100, max_delay=500, backoff_factor=2.0)
    assert list(retry.backoff_delays(policy)) == [0.1, 0.2, 0.4, 0.5, 0.5]
    jittered = retry.RetryPolicy(max_attempts=6, initial_delay=100, max_delay=500, jitter="full")
    for bound, value in zip([0.1, 0.2, 0.4, 0.5, 0.5], retry.backoff_delays(jittered, random.Random(7))):
        assert 0.0 <= value <= bound


@pytest.mark.parametrize(
    "bad",
    [
        {"max_attempts": 0},
        {"initial_delay": -1},
        {"backoff_factor": 0.5},
        {"jitter": "some"},
        {"timeout": 0},
        {"retries": 3},
        {"max_delay": True},
    ],
)
def test_invalid_policies_are_config_errors(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        retry.RetryPolicy.from_config(bad)


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "max_attempts",
                "initial_delay",
                "max_delay",
                "backoff_factor",
                "jitter",
                "attempt_timeout",
                "timeout",
                "other",
            ]
        ),
        st.one_of(st.integers(-5, 10_000), st.floats(allow_nan=True), st.text(max_size=4), st.none(), st.booleans()),
        max_size=5,
    )
)
def test_policy_validation_only_ever_raises_config_error(config: dict[str, object]) -> None:
    try:
        retry.RetryPolicy.from_config(config)
    except ConfigError:
        pass


# ---- the absolute deadline ------------------------------------------------------------------------------------------


def test_an_absolute_deadline_bounds_attempts_and_waits(system: ActorSystemHandle, tmp_path: Path) -> None:
    counter = CrossProcessCounter(tmp_path / "attempts")
    t0 = time.monotonic()
    with pytest.raises(RetryExhausted) as info:
        retry.execute(
            flaky,
            {"max_attempts": 50, "initial_delay": 200, "backoff_factor": 1.0, "timeout": 60_000},
            counter,
            99,
            deadline=t0 + 0.7,
            system=system,
        )  # earlier than the policy's timeout: it wins
    assert info.value.reason == "retry_deadline"
    assert time.monotonic() - t0 < 3
    assert 1 <= counter.value < 50


def test_a_hung_attempt_is_killed_at_the_absolute_deadline(system: ActorSystemHandle, tmp_path: Path) -> None:
    counter = CrossProcessCounter(tmp_path / "attempts")
    t0 = time.monotonic()
    with pytest.raises(RetryExhausted) as info:
        retry.execute(
            hang_first,
            {"max_attempts": 3, "attempt_timeout": 30_000, "initial_delay": 1},
            counter,
            deadline=t0 + 1.5,
            system=system,
        )
    assert info.value.reason == "retry_deadline"
    assert info.value.details["last_error"]["reason"] == "job_timeout"
    assert time.monotonic() - t0 < 5  # not the attempt's 30 s
    assert counter.value == 1


def test_a_deadline_already_past_runs_no_attempt(system: ActorSystemHandle, tmp_path: Path) -> None:
    counter = CrossProcessCounter(tmp_path / "attempts")
    with pytest.raises(RetryExhausted) as info:
        retry.execute(flaky, {"max_attempts": 3}, counter, 1, deadline=time.monotonic() - 1, system=system)
    assert (info.value.reason, info.value.details["attempts"]) == ("retry_deadline", 0)
    assert counter.value == 0


@given(
    st.one_of(
        st.text(max_size=5),
        st.booleans(),
        st.just(float("nan")),
        st.just(float("inf")),
        st.just(float("-inf")),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(), st.none()),
    )
)
def test_a_deadline_that_is_not_finite_monotonic_seconds_is_a_config_error(bad: object) -> None:
    with pytest.raises(ConfigError) as info:
        retry.execute("actor_tests.retry.funcs:flaky", {"max_attempts": 1}, deadline=bad)  # type: ignore[arg-type]
    assert (info.value.reason, info.value.details) == ("invalid_value", {"key": "deadline"})
