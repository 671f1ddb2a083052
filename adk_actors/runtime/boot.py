"""Boot process: ``python -m adk_actors.runtime.boot SPEC_JSON``.

``start()`` runs this in a clean subprocess (no inherited fds, stdin from /dev/null, output to a log file),
because Thespian's admin daemonises itself and every actor process inherits its creator's open descriptors.
It starts the multiprocTCPBase admin, creates and initialises the root, writes a JSON line to the ready file and
exits, leaving the system running.

Before the admin forks it sets what every process of the node inherits: the private umask (files 0600, dirs 0700)
and the Thespian patches of ``thespian_tuning`` (listeners bound to ``bind_ip`` only). It refuses a non-loopback
``bind_ip`` without ``allow_remote_bind`` and a lane name of this admin port that someone already holds.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any

from adk_actors.errors import AdkError, ConfigError, SystemNotRunning
from adk_actors.secrets import PRIVATE_UMASK

__all__ = ["check_bind", "main"]


def check_bind(bind_ip: str, allow_remote_bind: bool) -> None:
    """Refuse a ``bind_ip`` that is not loopback unless the operator opted in.

    Raises:
        ConfigError: ``remote_bind_not_allowed`` (or ``invalid_value`` when the name does not resolve).
    """
    try:
        resolved = socket.getaddrinfo(bind_ip, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (OSError, UnicodeError, ValueError):
        raise ConfigError(
            "bind_ip does not resolve to an IPv4 address", reason="invalid_value", details={"key": "bind_ip"}
        ) from None
    if ipaddress.ip_address(resolved).is_loopback or allow_remote_bind:
        return
    raise ConfigError(
        "bind_ip is not a loopback address: Thespian ports unpickle what they receive, so set "
        "allow_remote_bind = true only on a trusted network (docs/SECURITY.md)",
        reason="remote_bind_not_allowed",
        details={"key": "bind_ip", "bind_ip": bind_ip[:64]},
    )


def _private_outputs(data_dir: Path) -> None:
    """Tighten what the starter made before this process existed: its log and run folders and our stdout file."""
    for sub in ("logs", "run"):
        path = data_dir / sub
        if path.is_dir():
            os.chmod(path, 0o700)
    try:
        if stat.S_ISREG(os.fstat(1).st_mode):
            os.fchmod(1, 0o600)
    except OSError:  # stdout closed or not ours: nothing to tighten
        pass


def main(argv: list[str]) -> int:
    # Every process of the node forks from this one and inherits the umask: databases, WAL files, logs and run
    # files hold user content and are created readable by the node's user only.
    os.umask(PRIVATE_UMASK)
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

    from adk_actors.logs import LIBRARY_LEVEL_ENV, quiet_libraries, sink_environment
    from adk_actors.runtime.lane import held_lane_names
    from adk_actors.runtime.logdefs import log_defs, sink_path
    from adk_actors.runtime.messages import Call, Failure, Reply, SupInit
    from adk_actors.runtime.root import ROOT_NAME, AwaitReady, Root, RootArgs
    from adk_actors.settings import Settings

    port = int(spec["port"])
    data_dir = Path(spec["data_dir"])
    settings = Settings.from_dict(
        {
            **spec["settings"],
            "gemini_api_key": os.environ.get("GEMINI_API_KEY") or None,
            "dev_live_principal": os.environ.get("ADK_DEV_LIVE_PRINCIPAL") or None,
        },
        source="boot",
    )
    _private_outputs(data_dir)
    os.environ[LIBRARY_LEVEL_ENV] = settings.library_log_level  # inherited by every process of the node
    # Our own records go straight to the sink file from every process (logs.AppendSink), not through Thespian's
    # logger process; third-party records keep Thespian's path.
    os.environ.update(
        sink_environment(
            str(sink_path(data_dir, port)), spec.get("log_level", "info"), spec.get("log_format", "console")
        )
    )
    quiet_libraries()
    check_bind(settings.bind_ip, settings.allow_remote_bind)
    if settings.local_lanes:
        # The port was free, so no process of this node holds a lane name yet: whoever does is waiting for our
        # actors' connections (a client refuses another uid, but a start that silently loses its lanes is worse).
        taken = held_lane_names(port)
        if taken:
            raise SystemNotRunning(
                "a lane name of this admin port is already held by another process",
                reason="lane_name_taken",
                details={"port": port, "names": taken[:8]},
            )
    composer = importlib.import_module(spec.get("node") or "adk_actors.runtime.children")
    composer.preflight(settings)
    asys = ActorSystem(
        "multiprocTCPBase",
        {"Admin Port": port},
        logDefs=log_defs(data_dir, port, spec.get("log_level", "info"), spec.get("log_format", "console")),
        transientUnique=True,
    )
    try:
        root = asys.createActor(Root, globalName=ROOT_NAME)
        args = RootArgs(
            port=port,
            owner_pid=int(spec.get("owner_pid", 0)),
            data_dir=str(data_dir),
            intensity=settings.supervisor_intensity,
            period=settings.supervisor_period_s,
            extra_children=composer.node_children(settings),
        )
        asys.tell(root, SupInit(parent=None, child_id="root", args=args, system_port=port))
        deadline = time.monotonic() + float(spec.get("timeout", 30.0))
        reply = asys.ask(
            root, Call(call_id="boot", request=AwaitReady(), deadline=deadline), max(0.1, deadline - time.monotonic())
        )
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
