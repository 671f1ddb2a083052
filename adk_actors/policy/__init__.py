"""Runtime policy: fail-closed allow/deny for agents and tools, byte budgets, immutable denial decisions."""

from adk_actors.policy.logic import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    DEFAULT_MAX_CONTENT_BYTES,
    Decision,
    RuntimePolicy,
    content_bytes,
)

__all__ = ["DEFAULT_MAX_ARGUMENT_BYTES", "DEFAULT_MAX_CONTENT_BYTES", "Decision", "RuntimePolicy", "content_bytes"]
