"""A stable-run body that runs one tool call in the worker pool: :class:`ToolCallBody`.

Surfaces that expose tools to another party (the MCP server, later A2A) start each call as a stable run of this
body, so the call is work the node owns: it survives the HTTP request that asked for it, shows up in
``runs.status``, and ``runs.cancel`` stops it (the worker running it is killed). The tool runs in a worker process
through :func:`run_tool`, which never raises: its value says whether the call succeeded.

The run completes with ``{"ok": True, "result": payload}`` (``payload`` the secret-pruned function-response object,
as the model would see it: a dict result as is, anything else as ``{"result": value}``) or ``{"ok": False, "error":
{"reason", "type"}}`` (the tool's reason tag, or ``tool_exception``, and the exception's class name; never its
text). A worker that is lost or misses the deadline fails the run with the pool's reason (``worker_lost``,
``job_timeout``).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from adk_actors.errors import AdkError, ToolError
from adk_actors.logs import log_crash
from adk_actors.runs.body import RunContext
from adk_actors.runtime.workers import CancelJob

__all__ = ["ToolCallBody", "run_tool"]


def run_tool(tool: Any, args: dict[str, Any], agent_name: str = "mcp") -> dict[str, Any]:
    """Validate ``args`` against ``tool.schema()``, run the tool (or the cloudpickled tool) and shape the outcome, in
    a worker process.

    Returns ``{"ok": True, "result": payload}`` or ``{"ok": False, "error": {"reason", "type"}}``; a tool that
    raised something other than an :class:`AdkError` also leaves a scrubbed crash report in the log.
    """
    from adk_actors.schema import compile_schema
    from adk_actors.tools.base import invoke_tool_sync
    from adk_actors.tools.context import ToolContext
    from adk_actors.tools.responses import failed_function_response, result_payload

    if isinstance(tool, bytes):
        import cloudpickle

        tool = cloudpickle.loads(tool)
    name = str(getattr(tool, "name", "tool"))
    try:
        validated = compile_schema(tool.schema()).validate(args)
        context = ToolContext(invocation_id=uuid.uuid4().hex, agent_name=agent_name)
        payload = result_payload(invoke_tool_sync(tool, validated, context))
    except Exception as exc:
        if not isinstance(exc, AdkError):
            log_crash("adk_actors.tools", "tool raised", exc, tool=name)
        # A fixed part name: an MCP tool name need not be a valid function-call name.
        error = failed_function_response("tool", None, exc).response["error"]
        return {"ok": False, "error": dict(error)}
    return {"ok": True, "result": payload}


@dataclass
class ToolCallBody:
    """Run ``tool`` (a picklable tool, e.g. a :class:`~adk_actors.tools.FunctionTool`) with ``args`` in the worker
    pool, within ``timeout_s`` seconds of the run's start; ``runs.cancel`` kills the job's worker."""

    tool: Any
    args: dict[str, Any]
    timeout_s: float = 300.0
    agent_name: str = "mcp"
    """What the tool's context names as its caller."""
    job: str | None = field(default=None, repr=False)
    """The pool call id of the running job (set in the run's process)."""

    def __post_init__(self) -> None:
        if not isinstance(self.tool, bytes):
            # By value, as an agent carries its tools: a tool defined in a script's __main__ reaches the worker.
            import cloudpickle

            try:
                self.tool = cloudpickle.dumps(self.tool)
            except Exception:
                raise ToolError("the tool cannot be sent to another process", reason="unpicklable_callable") from None
        if not isinstance(self.args, dict):
            raise ToolError("tool arguments are a JSON object", reason="invalid_arguments")
        if isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, int | float) or self.timeout_s <= 0:
            raise ToolError("timeout_s must be a positive number", reason="invalid_tool_call")

    def start(self, run: RunContext) -> None:
        self.job = run.run_job(
            run_tool,
            (self.tool, self.args, self.agent_name),
            time.monotonic() + self.timeout_s,
            lambda value, error: self._done(run, value, error),
        )

    def _done(self, run: RunContext, value: Any, error: AdkError | None) -> None:
        self.job = None
        if run.done:
            return  # a cancelled run's killed job answers too; its outcome is already recorded
        if error is not None:
            run.fail(error.reason, {"type": type(error).__name__})
        else:
            run.complete(value)

    def cancel(self, run: RunContext, reason: str) -> None:
        if self.job is not None:
            run.send_to("workers", CancelJob(call_id=self.job))
            self.job = None
