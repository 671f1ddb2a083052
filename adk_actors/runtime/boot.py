"""Boot process: ``python -m adk_actors.runtime.boot SPEC_JSON``.

``start()`` runs this in a clean subprocess (no inherited fds, stdin from /dev/null, output to a log file),
because Thespian's admin daemonises itself and every actor process inherits its creator's open descriptors.
It starts the multiprocTCPBase admin, creates and initialises the root, writes a JSON line to the ready file and
exits, leaving the system running.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from adk_actors.errors import AdkError

__all__ = ["main"]


def main(argv: list[str]) -> int:
    spec: dict[str, Any] = json.loads(argv[0])
    ready_file = Path(spec["ready_file"])
    try:
        info = _boot(spec)
    except AdkError as err:  # the starter re-raises it as the same error
        ready_file.write_text(json.dumps({"ok": False, "error": type(err).__name__, "adk_error": err.to_dict()}))
        return 1
    except BaseException as exc:  # report every failure to the starter, which raises it as an AdkError
        ready_file.write_text(json.dumps({"ok": False, "error": type(exc).__name__}))
        return 1
    ready_file.write_text(json.dumps({"ok": True, **info}))
    return 0


def _boot(spec: dict[str, Any]) -> dict[str, Any]:
    import importlib

    from adk_actors.runtime import thespian_tuning

    thespian_tuning.apply()  # before the admin forks: every actor process inherits it

    from thespian.actors import ActorSystem

    from adk_actors.runtime.logdefs import log_defs
    from adk_actors.runtime.messages import Call, Failure, Reply, SupInit
    from adk_actors.runtime.root import ROOT_NAME, AwaitReady, Root, RootArgs
    from adk_actors.settings import Settings

    port = int(spec["port"])
    data_dir = Path(spec["data_dir"])
    settings = Settings.from_dict({**spec["settings"], "gemini_api_key": os.environ.get("GEMINI_API_KEY") or None},
                                  source="boot")
    composer = importlib.import_module(spec.get("node") or "adk_actors.runtime.children")
    composer.preflight(settings)
    asys = ActorSystem("multiprocTCPBase", {"Admin Port": port},
                       logDefs=log_defs(data_dir, port, spec.get("log_level", "info"),
                                        spec.get("log_format", "console")),
                       transientUnique=True)
    try:
        root = asys.createActor(Root, globalName=ROOT_NAME)
        args = RootArgs(port=port, owner_pid=int(spec.get("owner_pid", 0)), data_dir=str(data_dir),
                        intensity=settings.supervisor_intensity, period=settings.supervisor_period_s,
                        extra_children=composer.node_children(settings))
        asys.tell(root, SupInit(parent=None, child_id="root", args=args, system_port=port))
        deadline = time.monotonic() + float(spec.get("timeout", 30.0))
        reply = asys.ask(root, Call(call_id="boot", request=AwaitReady(), deadline=deadline),
                         max(0.1, deadline - time.monotonic()))
        if isinstance(reply, Failure):
            raise reply.error
        if not isinstance(reply, Reply):
            raise TimeoutError("root did not become ready")
        info = dict(reply.value)
        return {"pgid": info["pgid"], "root_pid": info["root_pid"], "pid": os.getpid()}
    except BaseException:
        asys.shutdown()
        raise


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
