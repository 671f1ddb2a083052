"""``make demo`` (samples/quickstart.py) and the runtime tour (samples/demo.py) run offline and print what they say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

EXPECTED = {
    "quickstart.py": ["user: What is the weather in Tokyo?", "agent: It is sunny in Tokyo.",
                      "final by WeatherAgent: Take sunglasses and some water: it stays sunny all day.",
                      "run outcome: Completed", "the session holds 8 events"],
    "demo.py": ["stopped; no actor process left"],
}


@pytest.mark.parametrize("sample", sorted(EXPECTED))
def test_the_demo_samples_run_offline(sample: str) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ADK_") and k not in {"GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_BASE_URL"}}
    result = subprocess.run([sys.executable, str(ROOT / "samples" / sample)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    for line in EXPECTED[sample]:
        assert line in result.stdout
