"""The reference's deterministic retry example in Python: ``adk_actors.retry.execute`` runs each attempt in a worker
process, with bounded exponential backoff between attempts. The flaky function fails twice, then recovers.

Attempts run in other processes, so they are counted in a file (``CrossProcessCounter``), not in a variable.

Run: ``.venv/bin/python samples/retry.py``
"""

from __future__ import annotations

import os
import tempfile

import adk_actors as adk
from adk_actors import retry
from adk_actors.errors import RetryExhausted
from adk_actors.testing import CrossProcessCounter, reserved_port


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data:
        return _main(data)


def _main(data: str) -> int:
    settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
    with adk.open_actor_system(settings):
        attempts = CrossProcessCounter(os.path.join(data, "attempts"))

        def flaky() -> str:
            if attempts.incr() < 3:
                raise RuntimeError("temporary")
            return "recovered"

        result = retry.execute(flaky, {"max_attempts": 5, "initial_delay": 1, "max_delay": 10,
                                       "backoff_factor": 2.0})
        print(f"result={result} attempts={attempts.value}")

        hopeless = CrossProcessCounter(os.path.join(data, "hopeless"))

        def always_fails() -> str:
            hopeless.incr()
            raise RuntimeError("still down")

        try:
            retry.execute(always_fails, {"max_attempts": 3, "initial_delay": 1})
        except RetryExhausted as err:
            print(f"{err.reason}: attempts={err.details['attempts']} "
                  f"last_error={err.details['last_error']['reason']} ran={hopeless.value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
