"""The ``execute_code`` toolset: code a model writes runs only through an executor the application configures.

::

    from adk_actors.tools import ProcessSandbox, code_toolset

    tools = code_toolset(ProcessSandbox(), timeout_s=10)
    agent = spawn_agent("Calculator", model, [tools])

adk_actors itself has no in-process evaluation, no shell and no interpreter fallback (:func:`capabilities`). Before
the executor is called the tool checks the language against the allow-list, the code's size and UTF-8, and the
limits; the call runs like any tool (in a worker process, under the tool deadline, policy, confirmation, plugins and
cancellation — a cancelled call kills its worker, and the sandbox process dies with it). The result reaches the model
as ``{"outcome", "exit_code", "stdout", "stderr", "truncated", "duration_ms"}``; an execution that failed, timed out
or hit the output bound is still a result (the model can correct its code), while an executor that could not run it
is a tool failure (``sandbox_error``).
"""

from __future__ import annotations

from typing import Any

from adk_actors.errors import ConfigError, ToolError
from adk_actors.tools.catalog import Toolset
from adk_actors.tools.sandbox import CodeExecutor, CodeRequest

__all__ = ["CodeExecutionTool", "capabilities", "code_toolset"]

MAX_CODE_BYTES = 1024 * 1024
MAX_OUTPUT_BYTES = 16 * 1024 * 1024


def capabilities() -> dict[str, bool]:
    """The reference's capability statement: code needs an external executor; nothing runs in our processes."""
    return {"external_sandbox_required": True, "in_process_execution": False, "shell_fallback": False}


class CodeExecutionTool:
    """The ``execute_code(language, code)`` tool over one executor."""

    name = "execute_code"
    description = "Run a short program in an isolated sandbox and return its exit code, stdout and stderr."

    def __init__(
        self,
        executor: CodeExecutor,
        *,
        languages: tuple[str, ...],
        timeout_s: float,
        max_code_bytes: int,
        max_output_bytes: int,
        parallel_safe: bool = False,
        requires_confirmation: bool = False,
    ) -> None:
        self.executor = executor
        self.languages = languages
        self.timeout_s = timeout_s
        self.max_code_bytes = max_code_bytes
        self.max_output_bytes = max_output_bytes
        self.parallel_safe = parallel_safe
        self.requires_confirmation = requires_confirmation

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "language": {"type": "string", "enum": list(self.languages)},
                "code": {"type": "string", "description": "The whole program; print what you need to see."},
            },
            "required": ["language", "code"],
            "additionalProperties": False,
        }

    def execute(self, args: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """Check the call and run it through the executor.

        Raises:
            ToolError: ``unsupported_language``, ``code_too_large``, ``invalid_code`` (not text, NUL bytes),
                ``sandbox_error`` (the executor could not run the code).
        """
        language, code = args.get("language"), args.get("code")
        if language not in self.languages:
            raise ToolError("that language is not allowed", reason="unsupported_language")
        if not isinstance(code, str) or "\x00" in code:
            raise ToolError("the code must be text without NUL characters", reason="invalid_code")
        try:
            size = len(code.encode("utf-8"))
        except UnicodeEncodeError:
            raise ToolError("the code must be valid UTF-8 text", reason="invalid_code") from None
        if size > self.max_code_bytes:
            raise ToolError(
                "the code is too large", reason="code_too_large", details={"max_code_bytes": self.max_code_bytes}
            )
        result = self.executor.execute(
            CodeRequest(
                language=str(language),
                code=code,
                timeout_s=self.timeout_s,
                max_output_bytes=self.max_output_bytes,
            )
        )
        if result.outcome == "sandbox_error":
            raise ToolError("the sandbox could not run the code", reason="sandbox_error")
        return result.to_dict()


def code_toolset(
    executor: CodeExecutor,
    *,
    languages: tuple[str, ...] | None = None,
    timeout_s: float = 30.0,
    max_code_bytes: int = 65536,
    max_output_bytes: int = 1024 * 1024,
    parallel_safe: bool = False,
    requires_confirmation: bool = False,
) -> Toolset:
    """A toolset with one tool, ``execute_code``, that runs code only through ``executor``.

    Args:
        executor: A :class:`~adk_actors.tools.sandbox.CodeExecutor` (picklable: the tool runs in a worker process).
        languages: The allow-list (default: the executor's languages, which it must all support).
        timeout_s: Wall-clock limit of one execution (the tool's own deadline still applies on top).
        max_code_bytes: Largest program (UTF-8 bytes).
        max_output_bytes: Largest stdout + stderr kept; past it the execution is stopped (``output_limit``).
        parallel_safe: Calls may run concurrently with neighbouring parallel-safe calls.
        requires_confirmation: Every execution pauses for human approval under a Runner.

    Raises:
        ConfigError: ``invalid_value`` (no executor, an unknown language, a limit out of range).
    """
    if not isinstance(executor, CodeExecutor):
        raise ConfigError("code_toolset needs a CodeExecutor", reason="invalid_value", details={"key": "executor"})
    supported = tuple(executor.languages)
    chosen = supported if languages is None else tuple(languages)
    if not chosen or not set(chosen) <= set(supported):
        raise ConfigError(
            "languages must be a non-empty subset of the executor's",
            reason="invalid_value",
            details={"key": "languages"},
        )
    for key, value, high in (
        ("timeout_s", timeout_s, 3600),
        ("max_code_bytes", max_code_bytes, MAX_CODE_BYTES),
        ("max_output_bytes", max_output_bytes, MAX_OUTPUT_BYTES),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= high:
            raise ConfigError(f"{key} must be in (0, {high}]", reason="invalid_value", details={"key": key})
    tool = CodeExecutionTool(
        executor,
        languages=chosen,
        timeout_s=float(timeout_s),
        max_code_bytes=int(max_code_bytes),
        max_output_bytes=int(max_output_bytes),
        parallel_safe=parallel_safe is True,
        requires_confirmation=requires_confirmation is True,
    )
    return Toolset.of("code_execution", [tool])
