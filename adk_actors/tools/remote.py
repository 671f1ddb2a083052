"""Remote tools: a tool whose calls an agent sends to another actor (an MCP connection) instead of running code.

A tool that has a ``remote`` attribute holding a :class:`RemoteBinding` is carried by an agent without a payload:
the agent sends ``binding.request(function, args, call_id)`` to ``binding.target`` as an asynchronous call (no
worker hop) and expects a function-response part (a dict) back; a cancelled turn sends
:class:`CancelRemoteCall` with the call's id so the target can abandon the request. The target checks the
declaration ``digest`` the model was shown and fails the call with ``tool_catalog_changed`` when its backend moved on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CancelRemoteCall", "RemoteBinding", "remote_binding"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteBinding:
    """Where and how a remote tool's calls go (subclass it and implement :meth:`request`)."""

    target: Any
    """The ref of the actor that runs the calls."""
    tool: str
    """The backend's name of the tool."""
    digest: str
    """The digest of the tool's declaration in the snapshot the model is shown."""

    def request(self, function: str, args: dict[str, Any], call_id: str | None) -> Any:
        """The call request sent to :attr:`target` (picklable)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class CancelRemoteCall:
    """Sent to a remote tool's target when the turn no longer needs the call (``call_id``: the runtime call id)."""

    call_id: str


def remote_binding(tool: Any) -> RemoteBinding | None:
    """The tool's :class:`RemoteBinding`, or ``None`` for a tool that runs code."""
    binding = getattr(tool, "remote", None)
    return binding if isinstance(binding, RemoteBinding) else None
