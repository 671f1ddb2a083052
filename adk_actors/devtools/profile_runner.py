"""Profile ``Runner.run`` text turns inside the actor system: ``python -m adk_actors.devtools.profile_runner [N]``.

Every tier-1 process started with ``ADKACTORS_PROFILE_DIR`` set runs under cProfile; after ``N`` turns (default
300) against the in-process emulator, the hosts and the session store write their statistics (``DumpProfile``)
and the top functions by own time are printed. This is the profile behind Runner optimisations.
"""

from __future__ import annotations

import os
import pstats
import sys
import tempfile
import time
import uuid


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 300
    directory = tempfile.mkdtemp(prefix="adk-profile-")
    os.environ["ADKACTORS_PROFILE_DIR"] = directory
    from adk_actors import Runner, open_actor_system, session_service, spawn_agent
    from adk_actors.emulator import Emulator
    from adk_actors.runtime.messages import DumpProfile
    from adk_actors.runtime.refs import host_name

    with Emulator() as emu, open_actor_system() as system:
        agent = spawn_agent("Profiled", {"provider": "gemini", "base_url": emu.base_url, "api_key": "k"})
        runner = Runner(agent, "profile", session_service())
        for i in range(20):
            runner.run("u", f"warm-{i}", "hi")
        t0 = time.perf_counter()
        for i in range(n):
            runner.run("u", f"s{i}-{uuid.uuid4().hex[:6]}", "hi")
        print(f"{(time.perf_counter() - t0) / n * 1000:.2f} ms per Runner.run (wall, sequential)")
        paths = [system.ask(host_name(i), DumpProfile()) for i in range(system.settings.hosts)]
        paths.append(system.ask("sessions", DumpProfile()))
    for path in filter(None, paths):
        print(f"===== {path}")
        pstats.Stats(path).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
