"""``make demo`` (samples/quickstart.py) and the runtime tour (samples/demo.py) run offline and print what they say."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from actor_tests.samples_runner import assert_lines, run_sample, sample_env

ROOT = Path(__file__).resolve().parents[1]

EXPECTED = {
    "quickstart.py": [
        "user: What is the weather in Tokyo?",
        "agent: It is sunny in Tokyo.",
        "final by WeatherAgent: Take sunglasses and some water: it stays sunny all day.",
        "run outcome: Completed",
        "the session holds 8 events",
    ],
    "demo.py": ["stopped; no actor process left"],
}


@pytest.mark.parametrize("sample", sorted(EXPECTED))
def test_the_demo_samples_run_offline(sample: str) -> None:
    assert_lines(run_sample(sample), EXPECTED[sample])


def test_make_demo_prints_the_conversation_and_exits_0() -> None:
    """``make demo`` itself, from the repository root: its install step, then the quickstart.

    The install step reaches the package index only when ``.venv`` is missing or older than ``pyproject.toml`` /
    ``setup.cfg`` (``make test`` installs first, so it is current there); no test may reach the network, so the
    test is skipped in that case rather than run.
    """
    make = shutil.which("make")
    assert make is not None, "make is not installed"
    # A clean make: not a sub-make of `make test` (whose jobserver descriptors this process does not pass on).
    env = {k: v for k, v in sample_env().items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    current = subprocess.run([make, "-q", "install"], cwd=ROOT, env=env, capture_output=True, timeout=30, check=False)
    if current.returncode != 0:
        pytest.skip("the .venv install is out of date: `make install` would reach the package index")
    out = subprocess.run(
        [make, "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "samples/quickstart.py" in out.stdout  # the recipe ran the quickstart, not something else
    assert_lines(out, EXPECTED["quickstart.py"])
    positions = [out.stdout.index(text) for text in EXPECTED["quickstart.py"]]
    assert positions == sorted(positions), out.stdout  # the conversation, in order
    assert "Traceback" not in out.stdout + out.stderr
