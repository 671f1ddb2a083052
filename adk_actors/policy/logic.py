"""Runtime policy as pure logic.

Once a Runner is configured with a ``runtime_policy`` it is *fail-closed*: an omitted ``allow`` selector allows
nothing (``"all"`` must be said explicitly) and ``deny`` always wins. Text content is measured as UTF-8 bytes;
structured content and resolved tool arguments as canonical JSON. Every check returns a :class:`Decision`;
a denial's :meth:`Decision.record` is the immutable audit projection — ids, the policy fingerprint, operation,
subject, outcome/reason and byte counts, never arguments, content, credentials or exception text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adk_actors.content.canonical import canonical_dumps
from adk_actors.errors import ConfigError, ValidationError

__all__ = ["DEFAULT_MAX_ARGUMENT_BYTES", "DEFAULT_MAX_CONTENT_BYTES", "Decision", "RuntimePolicy", "content_bytes"]

DEFAULT_MAX_ARGUMENT_BYTES = 64 * 1024
DEFAULT_MAX_CONTENT_BYTES = 1024 * 1024
_KEYS = frozenset({"id", "agents", "tools", "max_argument_bytes", "max_content_bytes"})
_SELECTOR_KEYS = frozenset({"allow", "deny"})


@dataclass(frozen=True, slots=True)
class _Selector:
    allow_all: bool
    allow: frozenset[str]
    deny: frozenset[str]

    def permits(self, name: str) -> tuple[bool, str]:
        if name in self.deny:
            return False, "denied"
        if self.allow_all or name in self.allow:
            return True, "allowed"
        return False, "not_allowed"


def _selector(value: Any, where: str) -> _Selector:
    if value is None:
        return _Selector(False, frozenset(), frozenset())
    if not isinstance(value, Mapping):
        raise ConfigError(f"runtime_policy {where} must be a mapping", reason="invalid_value", details={"key": where})
    unknown = set(value) - _SELECTOR_KEYS
    if unknown:
        raise ConfigError(
            "unknown runtime_policy selector key",
            reason="unknown_key",
            details={"key": f"{where}.{sorted(map(str, unknown))[0]}"},
        )
    allow = value.get("allow", ())
    deny = value.get("deny", ())
    allow_all = allow == "all"
    for name, names in (("allow", () if allow_all else allow), ("deny", deny)):
        if not isinstance(names, list | tuple | frozenset | set) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(
                f"runtime_policy {where}.{name} must be a list of names" + (' or "all"' if name == "allow" else ""),
                reason="invalid_value",
                details={"key": f"{where}.{name}"},
            )
    return _Selector(allow_all, frozenset(() if allow_all else allow), frozenset(deny))


def content_bytes(value: Any) -> int:
    """Bytes of content as the policy measures it: UTF-8 for text, canonical JSON for anything structured.

    Raises:
        ValidationError: the value is not JSON-safe.
    """
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        value = to_dict()
    return len(canonical_dumps(value).encode("utf-8"))


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one policy check."""

    allowed: bool
    operation: str
    """``agent``, ``tool``, ``arguments``, ``input_content``, ``tool_result``, ``output_content``."""
    subject: str
    """The agent or tool name the check was about."""
    reason: str
    """``allowed``, ``denied``, ``not_allowed``, ``argument_budget_exceeded`` or ``content_budget_exceeded``."""
    policy_id: str
    fingerprint: str
    size: int = 0
    limit: int = 0

    def record(self, **ids: str) -> dict[str, Any]:
        """The immutable audit record of this decision (ids such as invocation_id, run_id are added)."""
        record: dict[str, Any] = {
            "policy_id": self.policy_id,
            "policy_fingerprint": self.fingerprint,
            "operation": self.operation,
            "subject": self.subject,
            "outcome": "allowed" if self.allowed else "denied",
            "reason": self.reason,
        }
        if self.limit:
            record.update(bytes=self.size, limit_bytes=self.limit)
        record.update({k: str(v) for k, v in ids.items()})
        return record


@dataclass(frozen=True, slots=True)
class RuntimePolicy:
    """A validated runtime policy; build with :meth:`from_config`."""

    policy_id: str
    agents: _Selector
    tools: _Selector
    max_argument_bytes: int
    max_content_bytes: int
    fingerprint: str

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RuntimePolicy:
        """Validate a ``runtime_policy`` map (strict keys).

        Raises:
            ConfigError: ``unknown_key`` or ``invalid_value`` naming the key.
        """
        if not isinstance(config, Mapping):
            raise ConfigError(
                "runtime_policy must be a mapping", reason="invalid_value", details={"key": "runtime_policy"}
            )
        unknown = set(config) - _KEYS
        if unknown:
            raise ConfigError(
                "unknown runtime_policy key", reason="unknown_key", details={"key": sorted(map(str, unknown))[0]}
            )
        limits = {}
        for key, default in (
            ("max_argument_bytes", DEFAULT_MAX_ARGUMENT_BYTES),
            ("max_content_bytes", DEFAULT_MAX_CONTENT_BYTES),
        ):
            value = config.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"runtime_policy {key} must be a positive integer", reason="invalid_value", details={"key": key}
                )
            limits[key] = value
        policy_id = config.get("id", "runtime-policy")
        if not isinstance(policy_id, str) or not policy_id or len(policy_id) > 128:
            raise ConfigError("runtime_policy id must be a short string", reason="invalid_value", details={"key": "id"})
        agents, tools = _selector(config.get("agents"), "agents"), _selector(config.get("tools"), "tools")
        canonical = canonical_dumps({"id": policy_id, **limits, "agents": _canon(agents), "tools": _canon(tools)})
        fingerprint = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]
        return cls(policy_id, agents, tools, limits["max_argument_bytes"], limits["max_content_bytes"], fingerprint)

    def _decision(
        self, allowed: bool, operation: str, subject: str, reason: str, size: int = 0, limit: int = 0
    ) -> Decision:
        return Decision(allowed, operation, subject, reason, self.policy_id, self.fingerprint, size, limit)

    def check_agent(self, name: str) -> Decision:
        allowed, reason = self.agents.permits(name)
        return self._decision(allowed, "agent", name, reason)

    def check_tool(self, name: str) -> Decision:
        allowed, reason = self.tools.permits(name)
        return self._decision(allowed, "tool", name, reason)

    def check_arguments(self, tool: str, args: Mapping[str, Any]) -> Decision:
        """Resolved tool arguments, measured as canonical JSON."""
        try:
            size = content_bytes(dict(args))
        except ValidationError:
            return self._decision(False, "arguments", tool, "invalid_arguments")
        ok = size <= self.max_argument_bytes
        return self._decision(
            ok, "arguments", tool, "allowed" if ok else "argument_budget_exceeded", size, self.max_argument_bytes
        )

    def check_content(self, operation: str, subject: str, value: Any) -> Decision:
        """Input, tool-result or output content: UTF-8 bytes for text, canonical JSON for structures."""
        try:
            size = content_bytes(value)
        except ValidationError:
            return self._decision(False, operation, subject, "invalid_content")
        ok = size <= self.max_content_bytes
        return self._decision(
            ok, operation, subject, "allowed" if ok else "content_budget_exceeded", size, self.max_content_bytes
        )


def _canon(selector: _Selector) -> dict[str, Any]:
    return {"allow": "all" if selector.allow_all else sorted(selector.allow), "deny": sorted(selector.deny)}
