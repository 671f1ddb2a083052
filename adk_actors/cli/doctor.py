"""``adk doctor [--json] [--port N] [--base-url URL] [--require-system] [--timeout S]``: check the installation.

Checks, each ``ok``, ``warning`` or ``fail`` (the exit status is 1 when any check fails):

* ``adk_actors``, ``python``, ``dependencies``: versions (a missing dependency fails);
* ``settings``: ``config/adk.toml`` / ``$ADK_CONFIG`` and ``ADK_*`` load (a failure skips the checks below);
* ``actor_system``: attach to the admin port and ask the root for its status; a system that is not running is a
  warning, a failure with ``--require-system``;
* ``session_backend``: ``memory``, or the SQL store opened (and migrated) — its URL is never printed;
* ``gemini_api_key``: configured or not (a warning: the emulator needs none); the key is never printed;
* ``base_url``: with ``--base-url`` or a ``gemini_base_url`` setting, a ``GET`` on it (no key sent) must get an
  HTTP answer.

``--json`` prints ``{"ok": bool, "checks": {NAME: {"status": ..., "detail": ..., ...}}}``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from adk_actors import __version__
from adk_actors.cli.output import error_dict, print_json, print_text
from adk_actors.errors import AdkError, AskTimeout, SystemNotRunning
from adk_actors.settings import Settings, load_settings

__all__ = ["PACKAGES", "add_parser", "collect", "doctor", "overall_ok", "render"]

PACKAGES = ("thespian", "requests", "websocket-client", "fastjsonschema", "sqlalchemy", "structlog")
"""The runtime dependencies whose versions are reported."""

Check = dict[str, Any]
T = TypeVar("T")


def add_parser(sub: Any) -> None:
    """Register ``doctor`` on the ``adk`` subparsers."""
    parser = sub.add_parser(
        "doctor",
        help="check the installation, the actor system and the configuration",
        description="Check versions, the actor system, the session backend and the keys.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object of checks")
    parser.add_argument("--port", type=int, default=None, help="admin port (default: settings / $ADK_ADMIN_PORT)")
    parser.add_argument("--base-url", default=None, metavar="URL", help="model endpoint to probe")
    parser.add_argument("--require-system", action="store_true", help="fail when no actor system is running")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per network check (default 3)")
    parser.set_defaults(handler=doctor)


def doctor(args: argparse.Namespace) -> int:
    """Run the command; returns the exit status."""
    checks = collect(port=args.port, base_url=args.base_url, require_system=args.require_system, timeout=args.timeout)
    ok = overall_ok(checks)
    if args.json:
        print_json({"ok": ok, "checks": checks})
    else:
        print_text(render(checks, ok))
    return 0 if ok else 1


def overall_ok(checks: dict[str, Check]) -> bool:
    """Whether no check failed (warnings and skipped checks pass)."""
    return all(check["status"] != "fail" for check in checks.values())


def render(checks: dict[str, Check], ok: bool) -> str:
    """The human-readable report: one line per check, then a verdict."""
    width = max(len(name) for name in checks)
    lines = [f"  {check['status']:<8} {name:<{width}}  {check.get('detail', '')}" for name, check in checks.items()]
    warnings = sum(check["status"] == "warning" for check in checks.values())
    verdict = "ok" if ok else "FAILED"
    lines.append(f"doctor: {verdict}" + (f" ({warnings} warning{'s' * (warnings != 1)})" if warnings else ""))
    return "\n".join(lines)


def collect(
    *, port: int | None = None, base_url: str | None = None, require_system: bool = False, timeout: float = 3.0
) -> dict[str, Check]:
    """Run every check, in report order."""
    checks: dict[str, Check] = {
        "adk_actors": {"status": "ok", "version": __version__, "detail": __version__},
        "python": _python(),
        "dependencies": _dependencies(),
    }
    try:
        settings = load_settings()
    except AdkError as err:
        checks["settings"] = {"status": "fail", "error": error_dict(err), "detail": f"{err.message} [{err.reason}]"}
        for name in ("actor_system", "session_backend", "gemini_api_key", "base_url"):
            checks[name] = {"status": "skipped", "detail": "settings do not load"}
        return checks
    checks["settings"] = _settings(settings)
    checks["actor_system"] = _actor_system(
        settings, settings.admin_port if port is None else port, require_system, timeout
    )
    checks["session_backend"] = _session_backend(settings)
    configured = settings.gemini_api_key is not None
    checks["gemini_api_key"] = {
        "status": "ok" if configured else "warning",
        "configured": configured,
        "detail": "yes" if configured else "no (set GEMINI_API_KEY, or use --emulator)",
    }
    checks["base_url"] = _base_url(base_url or settings.gemini_base_url, timeout)
    return checks


def _python() -> Check:
    version = platform.python_version()
    good = sys.version_info >= (3, 11)
    return {
        "status": "ok" if good else "fail",
        "version": version,
        "detail": version if good else f"{version} (3.11 or newer needed)",
    }


def _dependencies() -> Check:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    missing = [name for name, version in versions.items() if version is None]
    detail = ", ".join(f"{name} {version or 'MISSING'}" for name, version in versions.items())
    return {"status": "fail" if missing else "ok", "versions": versions, "missing": missing, "detail": detail}


def _settings(settings: Settings) -> Check:
    env_file = os.environ.get("ADK_CONFIG")
    source = env_file or ("config/adk.toml" if Path("config/adk.toml").is_file() else None)
    return {
        "status": "ok",
        "config_file": source,
        "data_dir": str(settings.data_path()),
        "detail": f"{source or 'defaults'}; data_dir {settings.data_path()}",
    }


def _with_deadline(fn: Callable[[], T], timeout: float) -> T:
    """``fn()`` on a daemon thread, abandoned after ``timeout`` (a peer that never answers must not hang us)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the caller below
            box["error"] = exc

    thread = threading.Thread(target=target, name="adk-doctor-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise AskTimeout("no answer in time", reason="timeout", details={"timeout_s": timeout})
    if "error" in box:
        raise box["error"]
    return box["value"]


def _actor_system(settings: Settings, port: int, require: bool, timeout: float) -> Check:
    from adk_actors.runtime.system import attach, port_listening

    base: Check = {"port": port}
    if not port_listening(port, settings.bind_ip):
        return {
            **base,
            "status": "fail" if require else "warning",
            "running": False,
            "detail": f"not running on port {port}",
        }

    def ping() -> tuple[float, list[str]]:
        started = time.monotonic()
        handle = attach(port, settings, make_default=False, timeout=timeout)
        try:
            status = handle.status(timeout=timeout)
        finally:
            handle.detach()
        children = [str(child.get("id")) for child in status.get("children", []) if isinstance(child, dict)]
        return (time.monotonic() - started) * 1000.0, children

    try:
        elapsed_ms, children = _with_deadline(ping, timeout * 2 + 1)
    except SystemNotRunning as err:
        return {
            **base,
            "status": "fail" if require else "warning",
            "running": False,
            "error": error_dict(err),
            "detail": f"not running on port {port} ({err.reason})",
        }
    except AdkError as err:
        return {
            **base,
            "status": "fail",
            "running": False,
            "error": error_dict(err),
            "detail": f"port {port} does not answer as an adk_actors system [{err.reason}]",
        }
    return {
        **base,
        "status": "ok",
        "running": True,
        "ping_ms": round(elapsed_ms, 1),
        "children": children,
        "detail": f"running on port {port} ({len(children)} children, {elapsed_ms:.0f} ms)",
    }


def _session_backend(settings: Settings) -> Check:
    if settings.session_backend == "memory":
        # Say the guarantee, not only the backend: a restart of the store actor loses every in-memory session.
        return {
            "status": "ok",
            "backend": "memory",
            "durability": "lost_on_store_restart",
            "detail": "memory (the node's session store actor; sessions are lost when it restarts or the "
            'node stops: use session_backend = "sql" to keep them)',
        }
    from adk_actors.sessions.factory import default_sqlite_url, session_service_for

    dialect = _dialect(settings.session_url or default_sqlite_url(settings.data_dir))
    try:
        session_service_for(settings).close()
    except AdkError as err:
        return {
            "status": "fail",
            "backend": "sql",
            "dialect": dialect,
            "error": error_dict(err),
            "detail": f"sql ({dialect}) does not open [{err.reason}]",
        }
    return {
        "status": "ok",
        "backend": "sql",
        "dialect": dialect,
        "durability": "durable",
        "detail": f"sql ({dialect}) opens; sessions survive restarts",
    }


def _dialect(url: str) -> str:
    # The scheme only: the rest of a SQLAlchemy URL may hold a password.
    return url.split(":", 1)[0] if ":" in url else "unknown"


def _base_url(url: str | None, timeout: float) -> Check:
    if not url:
        return {"status": "ok", "configured": False, "detail": "not configured (public endpoint, not probed)"}
    import requests

    from adk_actors.errors import ConfigError
    from adk_actors.models.gemini.config import check_base_url

    try:
        url = check_base_url(url, "base_url")
    except ConfigError as err:
        return {"status": "fail", "configured": True, "error": error_dict(err), "detail": f"invalid [{err.reason}]"}
    try:
        reply = requests.get(url + "/", timeout=timeout, allow_redirects=False)
    except requests.RequestException as exc:
        return {
            "status": "fail",
            "configured": True,
            "url": url,
            "reachable": False,
            "error": {"type": type(exc).__name__},
            "detail": f"{url} unreachable ({type(exc).__name__})",
        }
    return {
        "status": "ok",
        "configured": True,
        "url": url,
        "reachable": True,
        "http_status": reply.status_code,
        "detail": f"{url} reachable (HTTP {reply.status_code})",
    }
