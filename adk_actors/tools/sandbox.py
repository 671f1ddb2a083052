"""A code executor that runs code in a separate, unprivileged, resource-limited process: :class:`ProcessSandbox`.

An executor is anything with ``execute(request: CodeRequest) -> CodeResult`` (the :class:`CodeExecutor` protocol);
the ``execute_code`` toolset (:mod:`adk_actors.tools.code_execution`) only ever runs code through one. adk_actors has
no in-process evaluation and no shell fallback. :class:`ProcessSandbox` is the executor we ship, for Python code:

* a fresh process (``python -I -B`` on a file in a fresh private temporary directory, which is its working
  directory and is removed afterwards), in a session of its own, with ``PR_SET_PDEATHSIG=SIGKILL``; stdin is
  ``/dev/null`` and the environment holds only ``PATH``, ``LANG`` and ``HOME`` (the temporary directory);
* resource limits (``setrlimit``): CPU seconds, address space, processes (a fork bomb meets ``RLIMIT_NPROC``), file
  size, open files, no core dumps;
* when started as root: a network namespace of its own (``unshare(CLONE_NEWNET)``: only a down loopback, no route
  out), then the ``nobody`` user and group, so ``RLIMIT_NPROC`` counts only sandbox processes and the code cannot
  read the node's files; :attr:`ProcessSandbox.capabilities` says which of these this machine allowed;
* a wall-clock limit and an output bound: past either, the whole process group is killed (SIGKILL) and the result
  says why (``timeout``, ``output_limit``); whatever the code started is killed with it.

This is defence in depth on one machine, not a security boundary against a determined attacker: for untrusted code
in production, configure an executor that calls a real external sandbox (a container or VM service) — the same
protocol.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from adk_actors.errors import ConfigError, ToolError

__all__ = ["CodeExecutor", "CodeRequest", "CodeResult", "ProcessSandbox"]

_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_NOBODY = 65534
_libc: Any = None
with contextlib.suppress(OSError):
    _libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeRequest:
    """One execution: the language, the code and its limits (already checked by the toolset)."""

    language: str
    code: str
    timeout_s: float
    max_output_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeResult:
    """What an execution produced. ``outcome`` is ``ok`` (exit 0), ``failed`` (non-zero exit or a signal),
    ``timeout``, ``output_limit`` or ``sandbox_error`` (the executor could not run the code)."""

    outcome: str
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    duration_ms: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "truncated": self.truncated,
            "duration_ms": self.duration_ms,
        }


@runtime_checkable
class CodeExecutor(Protocol):
    """Runs code somewhere else than our processes."""

    languages: tuple[str, ...]

    def execute(self, request: CodeRequest) -> CodeResult: ...


def _default_python() -> str:
    found = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    return found or sys.executable


def _positive(value: Any, key: str, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= high:
        raise ConfigError(f"{key} must be a number in (0, {high}]", reason="invalid_value", details={"key": key})


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessSandbox:
    """Python code in a separate, limited process (see the module docstring). Picklable: the toolset runs it from a
    worker process."""

    cpu_s: int = 10
    """``RLIMIT_CPU``: CPU seconds of the sandbox process."""
    memory_mb: int = 256
    """``RLIMIT_AS``: address space."""
    max_processes: int = 16
    """``RLIMIT_NPROC``: processes (and threads) the sandbox user may have."""
    max_file_mb: int = 16
    """``RLIMIT_FSIZE``: the largest file the code may write."""
    max_open_files: int = 64
    isolate_network: bool = True
    """Give the process a network namespace of its own (needs root; :attr:`capabilities` reports whether it did)."""
    drop_privileges: bool = True
    """When started as root, run as ``nobody``."""
    python: str = field(default_factory=lambda: _default_python())
    """The interpreter: the system's ``python3`` (readable by ``nobody``; a virtualenv under ``/root`` is not), else
    ours."""
    languages: tuple[str, ...] = ("python",)

    def __post_init__(self) -> None:
        _positive(self.cpu_s, "cpu_s", 3600)
        _positive(self.memory_mb, "memory_mb", 65536)
        _positive(self.max_processes, "max_processes", 4096)
        _positive(self.max_file_mb, "max_file_mb", 65536)
        _positive(self.max_open_files, "max_open_files", 65536)
        if self.languages != ("python",):
            raise ConfigError("ProcessSandbox runs Python only", reason="invalid_value", details={"key": "languages"})

    @property
    def capabilities(self) -> dict[str, bool]:
        """What this machine lets the sandbox do: ``network_isolated`` and ``unprivileged`` need root to set up."""
        root = os.geteuid() == 0
        return {
            "separate_process": True,
            "resource_limits": True,
            "network_isolated": root and self.isolate_network and _libc is not None,
            "unprivileged": (root and self.drop_privileges) or not root,
        }

    def _limits(self) -> None:  # pragma: no cover - runs in the forked child before exec
        if _libc is not None:
            _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        root = os.geteuid() == 0
        if root and self.isolate_network and _libc is not None and _libc.unshare(_CLONE_NEWNET) != 0:
            os._exit(125)  # asked for isolation and could not have it: refuse to run the code
        mb = 1024 * 1024
        resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_s, self.cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (self.memory_mb * mb, self.memory_mb * mb))
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.max_file_mb * mb, self.max_file_mb * mb))
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.max_open_files, self.max_open_files))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if root and self.drop_privileges:
            os.setgroups([])
            os.setgid(_NOBODY)
            os.setuid(_NOBODY)
        resource.setrlimit(resource.RLIMIT_NPROC, (self.max_processes, self.max_processes))

    def execute(self, request: CodeRequest) -> CodeResult:
        """Run ``request.code``; never raises for what the code does.

        Raises:
            ToolError: ``unsupported_language``.
        """
        if request.language not in self.languages:
            raise ToolError("the sandbox does not run that language", reason="unsupported_language")
        started = time.monotonic()
        workdir = tempfile.mkdtemp(prefix="adk-sandbox-")
        try:
            path = os.path.join(workdir, "main.py")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(request.code)
            if os.geteuid() == 0 and self.drop_privileges:
                os.chown(workdir, _NOBODY, _NOBODY)
                os.chown(path, _NOBODY, _NOBODY)
            env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir}
            try:
                proc = subprocess.Popen(
                    [self.python, "-I", "-B", path],
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    close_fds=True,
                    preexec_fn=self._limits,
                )
            except OSError as exc:
                return CodeResult(outcome="sandbox_error", stderr=f"could not start the sandbox ({type(exc).__name__})")
            outcome, out, err, truncated = _collect(proc, request.timeout_s, request.max_output_bytes)
            code = proc.returncode
            if outcome == "exited":
                outcome = "ok" if code == 0 else "failed"
                if code == 125 and not out and not err:
                    outcome = "sandbox_error"
            return CodeResult(
                outcome=outcome,
                exit_code=code,
                stdout=out.decode("utf-8", "replace"),
                stderr=err.decode("utf-8", "replace"),
                truncated=truncated,
                duration_ms=int((time.monotonic() - started) * 1000),
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies, which only wait to be reaped, do not count)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[0] != b"Z" and fields[2] == str(pgid).encode():
            return True
    return False


def _reap_group(proc: subprocess.Popen[bytes], bound_s: float = 2.0) -> None:
    """Kill the group and wait (bounded) until none of it runs: when ``execute`` returns, nothing the code started
    is still running."""
    deadline = time.monotonic() + bound_s
    while True:
        _kill_group(proc)
        if not _group_alive(proc.pid) or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def _collect(proc: subprocess.Popen[bytes], timeout_s: float, limit: int) -> tuple[str, bytes, bytes, bool]:
    """Read both pipes until the process ends, the wall clock runs out or the output passes ``limit`` bytes; the
    process group is killed in the last two cases (and always at the end: nothing the code started survives)."""
    assert proc.stdout is not None and proc.stderr is not None
    chunks: dict[int, bytearray] = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    deadline = time.monotonic() + timeout_s
    outcome, total = "exited", 0
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome = "timeout"
                break
            for key, _ in sel.select(remaining):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                room = limit - total
                chunks[key.fd] += data[: max(0, room)]
                total += len(data)
            if total > limit:
                outcome = "output_limit"
                break
    _kill_group(proc)
    try:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()) if outcome == "exited" else 5)
    except subprocess.TimeoutExpired:
        outcome = "timeout"
        _kill_group(proc)
        proc.wait(5)
    _reap_group(proc)
    proc.stdout.close()
    proc.stderr.close()
    out, err = chunks.values()
    return outcome, bytes(out), bytes(err), total > limit
