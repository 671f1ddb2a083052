"""The runtime tour: start an actor system, run a tier-2 actor and a worker job, print the status tree, stop.

No model is involved: this is the layer under the agents (``docs/ARCHITECTURE.md``). ``make demo`` runs
``samples/quickstart.py`` instead (a weather agent against the Gemini emulator). Offline, like every sample.

Run: ``.venv/bin/python samples/demo.py``
"""

from __future__ import annotations

import json

import adk_actors
from adk_actors.testing.actors import Echo, Incr


def main() -> int:
    settings = adk_actors.load_settings(data_dir="var/demo", admin_port=19599)
    with adk_actors.open_actor_system(settings) as system:
        probe = system.spawn("adk_actors.testing.actors.Probe", id="demo-probe", name="demo_probe")
        print("spawned", probe, "->", system.ask("demo_probe", Echo(value="hello from a tier-2 actor")))
        print("counter:", [system.ask(probe, Incr()) for _ in range(3)])
        print("worker job (2 ** 10):", system.run_job(pow, 2, 10))
        tree = system.tree()
        summary = [{"id": c["id"], "state": c["state"], "restarts": c["restarts"],
                    "kind": c.get("status", {}).get("kind")} for c in tree["children"]]
        print(json.dumps({"port": system.port, "root_pid": system.root_pid, "children": summary}, indent=2))
    print("stopped; no actor process left")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
