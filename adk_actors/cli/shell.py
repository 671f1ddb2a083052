"""``adk shell``: an admin shell attached to a running actor system (see ``docs/SHELL.md``).

The shell attaches by admin port and owns nothing: it never starts or stops the system, and leaving it only
detaches. Every command is one or a few asks with one deadline:

* ``tree`` — the supervision tree from the root: each child's state, pid and restart count;
* ``hosts`` — the hosts and their inner (tier-2) actors: local id, actor class, state, restarts;
* ``agents`` — the agents living in the hosts, with what they ``Describe``;
* ``runs`` — the run index's newest runs, running and retained (``ListRuns``);
* ``sessions`` — sessions per app and user of the node's in-memory store (``SessionSummary``);
* ``cancel RUN_ID`` and ``stop-agent NAME`` — through the same facade functions as ``runs.cancel`` and
  ``agents.stop_agent``.

Interactively (no command given) it is a REPL; with ``--json COMMAND`` it prints one JSON document —
``{"ok": true, ...}`` and exit status 0, or ``{"ok": false, "error": {...}}`` and exit status 1, on one line of
stdout — for scripts.
Every document goes through :func:`~adk_actors.secrets.prune_secrets` and every printed line through
:func:`~adk_actors.logs.scrub` (known secret values, the environment's API keys, credential-looking patterns).

``main.py`` wires :func:`add_parser` and :func:`run` into ``adk``; ``python -m adk_actors.cli.shell`` runs the
same parser on its own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TextIO

from adk_actors.agents import api as agents_api
from adk_actors.agents.messages import Describe
from adk_actors.errors import AdkError, ConfigError, SystemNotRunning
from adk_actors.logs import scrub
from adk_actors.runs import api as runs_api
from adk_actors.runs.actor import INDEX_NAME
from adk_actors.runs.messages import ListRuns
from adk_actors.runtime.messages import GetStatus
from adk_actors.runtime.refs import LocalRef
from adk_actors.runtime.system import ActorSystemHandle, attach, port_listening
from adk_actors.secrets import prune_secrets
from adk_actors.sessions.actor import STORE_NAME
from adk_actors.sessions.messages import SessionSummary
from adk_actors.settings import load_settings

__all__ = [
    "COMMANDS",
    "AdminShell",
    "add_parser",
    "main",
    "open_admin_shell",
    "outcome_view",
    "parse_command",
    "render",
    "repl",
    "run",
    "tree_view",
]

COMMANDS = ("agents", "cancel", "hosts", "runs", "sessions", "stop-agent", "tree")
"""The commands of the shell (``help`` and ``exit`` are REPL-only)."""

DEFAULT_RUNS = 100
"""How many runs ``runs`` lists when not told."""
HOSTS_NAME = "hosts"
"""The registered name of the host supervisor."""
AGENT_ACTOR = "AgentActor"
"""The class name hosts report for an agent's inner actor."""

HELP = """\
commands:
  tree              supervision tree: each child's state, pid and restart count
  hosts             hosts and their inner actors (local id, actor class, state, restarts)
  agents            agents in the hosts, with their description, tools and sub-agents
  runs [LIMIT]      the newest runs, running and retained (default 100)
  sessions          sessions per app and user (in-memory store only)
  cancel RUN_ID     cancel a run and print its terminal outcome
  stop-agent NAME   stop an agent (it is not restarted)
  help              this text
  exit              leave the shell (the system keeps running; also Ctrl-D)"""


class AdminShell:
    """The shell's commands against one attached system; each returns a JSON-safe document.

    Args:
        handle: An attached handle (the shell never stops it; :meth:`close` detaches).
        timeout: Seconds each command may take (one deadline for all of its asks).
    """

    def __init__(self, handle: ActorSystemHandle, timeout: float) -> None:
        self.handle = handle
        self.timeout = timeout
        root = handle.status(timeout)
        self.root_children = frozenset(str(c["id"]) for c in root.get("children", []))
        if HOSTS_NAME in self.root_children:
            # Runs and agents are placed by ``blake2b(id) mod hosts``: use the node's host count, not this
            # process's settings, so cancel and stop-agent reach the right host.
            hosts = handle.ask(HOSTS_NAME, GetStatus(), timeout)
            count = sum(1 for c in hosts.get("children", []) if str(c.get("id", "")).startswith("host-"))
            if count and count != handle.settings.hosts:
                handle.settings = handle.settings.replace(hosts=count)

    def close(self) -> None:
        """Detach (the system keeps running)."""
        self.handle.detach()

    # ---- dispatch ---------------------------------------------------------------------------------------------
    def execute(self, words: Sequence[str]) -> dict[str, Any]:
        """Run one command (``["cancel", run_id]`` ...) and return its document (without ``ok``).

        Raises:
            ConfigError: ``unknown_command`` or ``usage`` (see :func:`parse_command`).
            SystemNotRunning: the system is gone.
            AdkError: whatever the command's asks raised (``not_found``, ``timeout``, ...).
        """
        command, argument = parse_command(words)
        if not port_listening(self.handle.port, self.handle.settings.bind_ip):
            raise SystemNotRunning("no actor system listens on that port", details={"port": self.handle.port})
        if command == "cancel":
            return self.cancel(str(argument))
        if command == "stop-agent":
            return self.stop_agent(str(argument))
        if command == "runs":
            return self.runs(int(argument) if argument is not None else DEFAULT_RUNS)
        handlers: dict[str, Callable[[], dict[str, Any]]] = {
            "tree": self.tree,
            "hosts": self.hosts,
            "agents": self.agents,
            "sessions": self.sessions,
        }
        return handlers[command]()

    # ---- commands ---------------------------------------------------------------------------------------------
    def tree(self) -> dict[str, Any]:
        """``{"tree": node}``; a node is ``{id, actor, kind, state, pid, restarts}`` plus ``children`` (a
        supervisor's, each restarted ``restarts`` times by it), ``workers`` (a worker pool's processes) or
        ``inner_actors`` (a host's count)."""
        return {"tree": tree_view(self.handle.tree(self.timeout))}

    def hosts(self) -> dict[str, Any]:
        """``{"hosts": [{id, host_id, state, pid, restarts, inner_actors, inner: [...], inner_truncated}]}``."""
        deadline = time.monotonic() + self.timeout
        return {"hosts": self._hosts(deadline)}

    def _hosts(self, deadline: float) -> list[dict[str, Any]]:
        self._require(HOSTS_NAME, "this node has no host supervisor")
        supervisor = self.handle.ask(HOSTS_NAME, GetStatus(), self._remaining(deadline))
        out = []
        for child in supervisor.get("children", []):
            host: dict[str, Any] = {
                "id": child["id"],
                "host_id": _host_id(str(child["id"])),
                "state": child["state"],
                "pid": child["pid"],
                "restarts": child["restarts"],
            }
            if child["state"] == "running" and child.get("address") is not None:
                try:
                    status = self.handle.ask_address(child["address"], GetStatus(), deadline)
                except AdkError as err:
                    host["error"] = err.reason
                else:
                    inner = [
                        {
                            "local_id": a["local_id"],
                            "actor": a["actor"],
                            "state": a["state"],
                            "restarts": a["restarts"],
                            "restart": a["restart"],
                            "name": a["register_as"],
                        }
                        for a in status.get("inner", [])
                    ]
                    host.update(
                        inner_actors=status.get("inner_actors", len(inner)),
                        inner=inner,
                        inner_truncated=status.get("inner_actors", len(inner)) > len(inner),
                    )
            out.append(host)
        return out

    def agents(self) -> dict[str, Any]:
        """``{"agents": [{name, host_id, local_id, state, restarts, description, tools, sub_agents}],
        "truncated"}`` — the agents the hosts report (a host reports at most 200 inner actors)."""
        deadline = time.monotonic() + self.timeout
        agents = []
        truncated = False
        for host in self._hosts(deadline):
            truncated = truncated or bool(host.get("inner_truncated"))
            for actor in host.get("inner", []):
                if actor["actor"] != AGENT_ACTOR:
                    continue
                entry: dict[str, Any] = {
                    "name": actor["name"] or actor["local_id"].removeprefix("agent."),
                    "host_id": host["host_id"],
                    "local_id": actor["local_id"],
                    "state": actor["state"],
                    "restarts": actor["restarts"],
                }
                if actor["state"] == "running":
                    try:
                        info = self.handle.ask(
                            LocalRef(host["host_id"], actor["local_id"]), Describe(), self._remaining(deadline)
                        )
                    except AdkError as err:
                        entry["error"] = err.reason
                    else:
                        entry.update(
                            description=info.get("description", ""),
                            tools=list(info.get("tools", [])),
                            sub_agents=list(info.get("sub_agents", [])),
                        )
                agents.append(entry)
        agents.sort(key=lambda a: a["name"])
        return {"agents": agents, "truncated": truncated}

    def runs(self, limit: int = DEFAULT_RUNS) -> dict[str, Any]:
        """``{"runs": [{run_id, host_id, state, age_s, parent_run_id, reason}], "total", "running"}``, newest
        first."""
        self._require(INDEX_NAME, "this node has no run index")
        return dict(self.handle.ask(INDEX_NAME, ListRuns(limit=limit), self.timeout))

    def sessions(self) -> dict[str, Any]:
        """``{"sessions": {"listed": true, "backend": "memory", "apps": {app: {user: n}}, "sessions", "truncated"}}``;
        ``listed`` is false when the node keeps no in-memory store (a SQL backend is not listed)."""
        if STORE_NAME not in self.root_children:
            return {
                "sessions": {
                    "listed": False,
                    "backend": "sql",
                    "note": "this node keeps no in-memory session store: sessions are not listed",
                }
            }
        summary = dict(self.handle.ask(STORE_NAME, SessionSummary(), self.timeout))
        return {"sessions": {"listed": True, **summary}}

    def cancel(self, run_id: str) -> dict[str, Any]:
        """``{"run_id", "outcome": {"state", "reason"?}}``.

        Raises:
            RunNotFound: no such run, or it is past its retention.
        """
        outcome = runs_api.cancel(run_id, "cancelled", system=self.handle, timeout=self.timeout)
        return {"run_id": run_id, "outcome": outcome_view(outcome)}

    def stop_agent(self, name: str) -> dict[str, Any]:
        """``{"stopped": name}``.

        Raises:
            AgentError: ``not_found`` (no such agent), ``invalid_agent_name``.
        """
        agents_api.stop_agent(name, system=self.handle, timeout=self.timeout)
        return {"stopped": name}

    # ---- helpers ----------------------------------------------------------------------------------------------
    def _require(self, child: str, message: str) -> None:
        # Asking a name nothing registers would park in the registry until the deadline.
        if child not in self.root_children:
            raise ConfigError(message, reason="not_available", details={"child": child})

    @staticmethod
    def _remaining(deadline: float) -> float:
        return max(0.0, deadline - time.monotonic())


@contextlib.contextmanager
def open_admin_shell(port: int | None = None, *, timeout: float = 10.0) -> Iterator[AdminShell]:
    """Attach to the system on ``port`` for a ``with`` block; detached (never stopped) on exit.

    Raises:
        SystemNotRunning: nothing answers on the port as an initialised adk_actors system.
        ConfigError: the local settings are invalid.
    """
    settings = load_settings()
    try:
        handle = attach(port, settings, make_default=False, timeout=timeout)
    except SystemNotRunning:
        raise
    except AdkError as err:  # e.g. something listens on the port but never answers as our root
        raise SystemNotRunning("the actor system did not answer", details={"port": port, "cause": err.reason}) from None
    try:
        shell = AdminShell(handle, timeout)
    except BaseException:
        handle.detach()
        raise
    try:
        yield shell
    finally:
        shell.close()


# ---- pure parts -------------------------------------------------------------------------------------------------
def parse_command(words: Sequence[str]) -> tuple[str, str | int | None]:
    """Check one command line: ``(command, argument)`` — the run id, agent name or runs limit, else None.

    Raises:
        ConfigError: ``usage`` (no command, or wrong arguments), ``unknown_command``.
    """
    if not words:
        raise ConfigError("no command given", reason="usage", details={"commands": list(COMMANDS)})
    command, rest = words[0], list(words[1:])
    if command not in COMMANDS:
        raise ConfigError(
            "unknown command", reason="unknown_command", details={"command": command[:64], "commands": list(COMMANDS)}
        )
    usage = {"cancel": "cancel RUN_ID", "stop-agent": "stop-agent NAME", "runs": "runs [LIMIT]"}.get(command, command)
    if command in ("cancel", "stop-agent"):
        if len(rest) == 1:
            return command, rest[0]
    elif command == "runs":
        if not rest:
            return command, None
        if len(rest) == 1 and rest[0].isdigit():
            return command, int(rest[0])
    elif not rest:
        return command, None
    raise ConfigError(f"usage: {usage}", reason="usage", details={"command": command})


def tree_view(root: Mapping[str, Any]) -> dict[str, Any]:
    """The shell's tree from :meth:`ActorSystemHandle.tree`'s raw statuses (addresses and registry dropped)."""
    node: dict[str, Any] = {
        "id": root.get("id", "root"),
        "actor": root.get("type"),
        "kind": "supervisor",
        "state": "running",
        "pid": root.get("pid"),
        "restarts": 0,
    }
    node.update(_details(root))
    return node


def _child_view(child: Mapping[str, Any]) -> dict[str, Any]:
    node: dict[str, Any] = {
        "id": child["id"],
        "actor": str(child.get("actor") or "").rpartition(".")[2],
        "kind": child.get("kind"),
        "state": child["state"],
        "pid": child["pid"],
        "restarts": child["restarts"],
    }
    status = child.get("status") or {}
    if "error" in status:
        node["error"] = status["error"]
    node.update(_details(status))
    return node


def _details(status: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "children" in status:
        out["strategy"] = status.get("strategy")
        out["child_restarts"] = status.get("restarts", 0)
        out["children"] = [_child_view(c) for c in status["children"]]
    if status.get("kind") == "worker_pool":
        out["workers"] = [{"id": w["id"], "pid": w["pid"], "state": w["state"]} for w in status.get("workers", [])]
        out["replaced"] = status.get("replaced", 0)
    if status.get("kind") == "host":
        out["inner_actors"] = status.get("inner_actors", 0)
    return out


def outcome_view(outcome: Any) -> dict[str, Any]:
    """A run outcome as ``{"state", "reason"?}`` (a completed run's output and a pause's event are not shown)."""
    view: dict[str, Any] = {"state": type(outcome).__name__.lower()}
    reason = getattr(outcome, "reason", None)
    if reason is not None:
        view["reason"] = reason
    return view


def _host_id(name: str) -> int | None:
    suffix = name.rpartition("-")[2]
    return int(suffix) if suffix.isdigit() else None


# ---- text rendering ---------------------------------------------------------------------------------------------
def render(command: str, doc: Mapping[str, Any]) -> str:
    """The human-readable form of a command's document."""
    renderers: dict[str, Callable[[Mapping[str, Any]], str]] = {
        "tree": _render_tree,
        "hosts": _render_hosts,
        "agents": _render_agents,
        "runs": _render_runs,
        "sessions": _render_sessions,
        "cancel": _render_cancel,
        "stop-agent": _render_stopped,
    }
    return renderers[command](doc)


def _render_tree(doc: Mapping[str, Any]) -> str:
    lines: list[str] = []

    def describe(node: Mapping[str, Any]) -> str:
        parts = [
            str(node["id"]),
            str(node.get("actor") or "-"),
            str(node["state"]),
            f"pid {node['pid'] or '-'}",
            f"restarts {node['restarts']}",
        ]
        if "child_restarts" in node:
            parts.append(f"(children restarted {node['child_restarts']}, {node.get('strategy')})")
        if "replaced" in node:
            parts.append(f"(workers replaced {node['replaced']})")
        if "inner_actors" in node:
            parts.append(f"inner actors {node['inner_actors']}")
        if "error" in node:
            parts.append(f"error: {node['error']}")
        return "  ".join(parts)

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        items: list[tuple[str, Mapping[str, Any] | None]] = [
            (f"{w['id']}  pool worker  {w['state']}  pid {w['pid']}", None) for w in node.get("workers", [])
        ]
        items += [(describe(c), c) for c in node.get("children", [])]
        for i, (text, child) in enumerate(items):
            last = i == len(items) - 1
            lines.append(f"{prefix}{'└── ' if last else '├── '}{text}")
            if child is not None:
                walk(child, prefix + ("    " if last else "│   "))

    tree = doc["tree"]
    lines.append(describe(tree))
    walk(tree, "")
    return "\n".join(lines)


def _render_hosts(doc: Mapping[str, Any]) -> str:
    blocks = []
    for host in doc["hosts"]:
        head = f"{host['id']}  {host['state']}  pid {host['pid'] or '-'}  restarts {host['restarts']}"
        if "error" in host:
            blocks.append(f"{head}  error: {host['error']}")
            continue
        if "inner" not in host:
            blocks.append(head)
            continue
        head += f"  inner actors {host['inner_actors']}"
        if host["inner_truncated"]:
            head += f" (showing {len(host['inner'])})"
        rows = [
            [a["local_id"], a["actor"], a["state"], str(a["restarts"]), a["restart"], a["name"] or ""]
            for a in host["inner"]
        ]
        body = _table(["LOCAL ID", "ACTOR", "STATE", "RESTARTS", "RESTART", "NAME"], rows, indent="  ")
        blocks.append(head + ("\n" + body if rows else ""))
    return "\n".join(blocks) if blocks else "no hosts"


def _render_agents(doc: Mapping[str, Any]) -> str:
    if not doc["agents"]:
        return "no agents"
    rows = [
        [
            a["name"],
            str(a["host_id"]),
            a["state"],
            str(a["restarts"]),
            ", ".join(a.get("tools", [])) or "-",
            ", ".join(a.get("sub_agents", [])) or "-",
            f"error: {a['error']}" if "error" in a else _short(a.get("description", ""), 60),
        ]
        for a in doc["agents"]
    ]
    text = _table(["NAME", "HOST", "STATE", "RESTARTS", "TOOLS", "SUB-AGENTS", "DESCRIPTION"], rows)
    return text + ("\n(some hosts report only part of their inner actors)" if doc.get("truncated") else "")


def _render_runs(doc: Mapping[str, Any]) -> str:
    if not doc["runs"]:
        return "no runs"
    rows = [
        [r["run_id"], _state_text(r), _age(r["age_s"]), str(r["host_id"]), r.get("parent_run_id") or "-"]
        for r in doc["runs"]
    ]
    text = _table(["RUN ID", "STATE", "AGE", "HOST", "PARENT"], rows)
    return text + f"\n{len(doc['runs'])} shown of {doc['total']} ({doc['running']} running)"


def _render_sessions(doc: Mapping[str, Any]) -> str:
    sessions = doc["sessions"]
    if not sessions.get("listed"):
        return str(sessions.get("note", "sessions are not listed"))
    rows = [[app, user, str(count)] for app, users in sessions["apps"].items() for user, count in users.items()]
    if not rows:
        return "no sessions"
    text = _table(["APP", "USER", "SESSIONS"], rows)
    text += f"\n{sessions['sessions']} sessions"
    return text + (" (not every user shown)" if sessions.get("truncated") else "")


def _render_cancel(doc: Mapping[str, Any]) -> str:
    outcome = doc["outcome"]
    return f"run {doc['run_id']}: {_state_text(outcome)}"


def _state_text(item: Mapping[str, Any]) -> str:
    reason = item.get("reason")
    return str(item["state"]) + (f" ({reason})" if reason not in (None, item["state"]) else "")


def _render_stopped(doc: Mapping[str, Any]) -> str:
    return f"agent {doc['stopped']} stopped"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(line, widths)).rstrip() for line in (headers, *rows)]
    return "\n".join(indent + line for line in lines)


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _short(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


# ---- command line -----------------------------------------------------------------------------------------------
def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``shell`` to ``adk``'s subparsers; :func:`run` executes the parsed arguments."""
    parser = subparsers.add_parser(
        "shell",
        help="admin shell attached to a running actor system",
        description="Admin shell attached to a running actor system (never starts or "
        "stops it). Without a command: an interactive REPL.",
    )
    _arguments(parser)
    parser.set_defaults(handler=run)
    return parser


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=None, help="admin port (default: settings / $ADK_SYSTEM_PORT)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="run one command and print one JSON document (exit 0 on success, 1 on failure)",
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds each command may take (default 10)")
    parser.add_argument(
        "words",
        nargs="*",
        metavar="COMMAND",
        help=f"one command to run instead of the REPL: {', '.join(COMMANDS)} (with its arguments)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``adk shell`` with parsed arguments; returns the exit status."""
    words = list(args.words)
    if args.json:
        return _one_shot_json(args.port, args.timeout, words, sys.stdout)
    try:
        if words:
            parse_command(words)
        with open_admin_shell(args.port, timeout=args.timeout) as shell:
            if words:
                return _one_shot_text(shell, words, sys.stdout, sys.stderr)
            return repl(shell, sys.stdin, sys.stdout)
    except AdkError as err:
        print(f"error: {_error_line(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _one_shot_json(port: int | None, timeout: float, words: list[str], out: TextIO) -> int:
    try:
        parse_command(words)  # a malformed command fails before attaching
        with open_admin_shell(port, timeout=timeout) as shell:
            doc: dict[str, Any] = {"ok": True, **shell.execute(words)}
    except AdkError as err:
        doc = {"ok": False, "error": err.to_dict()}
    except Exception as exc:  # never a traceback (or an exception's text) in a script's output
        doc = {"ok": False, "error": {"type": type(exc).__name__, "reason": "internal_error"}}
    print(_dumps(doc), file=out)
    return 0 if doc["ok"] else 1


def _one_shot_text(shell: AdminShell, words: list[str], out: TextIO, err_out: TextIO) -> int:
    try:
        doc = shell.execute(words)
    except AdkError as err:
        print(f"error: {_error_line(err)}", file=err_out)
        return 1
    print(_scrub(render(words[0], doc)), file=out)
    return 0


def repl(shell: AdminShell, stdin: TextIO, stdout: TextIO) -> int:
    """Read commands until ``exit`` or end of input; a failing command prints its error and the loop goes on."""
    interactive = stdin.isatty()
    if interactive:
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
    print(
        f"attached to the actor system on port {shell.handle.port} ({shell.handle.settings.hosts} hosts); "
        "'help' lists the commands, 'exit' leaves (the system keeps running)",
        file=stdout,
        flush=True,
    )
    while True:
        try:
            line = input("adk> ") if interactive and stdin is sys.stdin else _read_line(stdin, stdout)
        except EOFError:
            print(file=stdout)
            return 0
        except KeyboardInterrupt:
            print("^C", file=stdout, flush=True)
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            print("error: unbalanced quotes", file=stdout, flush=True)
            continue
        if not words:
            continue
        if words[0] in ("exit", "quit"):
            return 0
        if words[0] in ("help", "?"):
            print(HELP, file=stdout, flush=True)
            continue
        try:
            text = render(words[0], shell.execute(words))
        except AdkError as err:
            text = f"error: {_error_line(err)}"
        except KeyboardInterrupt:
            text = "interrupted"
        except Exception as exc:  # keep the session alive; the type is enough (its text may quote a value)
            text = f"error: internal_error ({type(exc).__name__})"
        print(_scrub(text), file=stdout, flush=True)


def _read_line(stdin: TextIO, stdout: TextIO) -> str:
    print("adk> ", end="", file=stdout, flush=True)
    line = stdin.readline()
    if not line:
        raise EOFError
    return line


def _error_line(err: AdkError) -> str:
    text = err.reason if err.message == err.reason else f"{err.reason}: {err.message}"
    return _scrub(text)


def _scrub(text: str) -> str:
    # Known secret values (registered, or the environment's API keys) and credential-looking patterns.
    return scrub(text)


def _dumps(doc: Mapping[str, Any]) -> str:
    return _scrub(json.dumps(prune_secrets(dict(doc)), sort_keys=True, ensure_ascii=False, default=str))


def main(argv: list[str] | None = None) -> int:
    """``python -m adk_actors.cli.shell`` (the same arguments as ``adk shell``)."""
    parser = argparse.ArgumentParser(prog="adk shell", description="admin shell attached to a running actor system")
    _arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
