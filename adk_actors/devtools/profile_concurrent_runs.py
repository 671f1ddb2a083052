"""Profile the hosts while N stable Runner runs start and finish at 200 ms model latency:
``python -m adk_actors.devtools.profile_concurrent_runs [N]`` (the profile behind the C = 1,000 finding in
docs/PERFORMANCE.md; default N = 300)."""

from __future__ import annotations

import os
import pstats
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 300
    os.environ["ADKACTORS_PROFILE_DIR"] = tempfile.mkdtemp(prefix="adk-profile-")
    from adk_actors import Runner, open_actor_system, runs, session_service, spawn_agent
    from adk_actors.emulator import Emulator
    from adk_actors.runtime.messages import DumpProfile
    from adk_actors.runtime.refs import host_name

    with Emulator(latency_ms=200) as emu, open_actor_system(max_concurrent_invocations=n) as system:
        agent = spawn_agent("Profiled", {"provider": "gemini", "base_url": emu.base_url, "api_key": "k"})
        runner = Runner(agent, "profile", session_service())
        runner.run("u", "warm", "hi")
        t0 = time.perf_counter()
        with ThreadPoolExecutor(32) as pool:
            ids = list(
                pool.map(
                    lambda i: runs.start(runner, "u", f"c{i}", f"q{i}", retention_ms=600000, timeout=300), range(n)
                )
            )
            started = time.perf_counter() - t0
            list(pool.map(lambda run_id: runs.wait(run_id, 300), ids))
        print(f"{n} runs: all started after {started:.2f} s, all done after {time.perf_counter() - t0:.2f} s")
        paths = [system.ask(host_name(i), DumpProfile()) for i in range(system.settings.hosts)]
    for path in filter(None, paths):
        print(f"===== {path}")
        pstats.Stats(path).sort_stats("cumulative").print_stats(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
