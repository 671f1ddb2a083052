"""The node's domain children under the root, built from settings (later issues add their supervisors here)."""

from __future__ import annotations

from adk_actors.runtime.supervisor import ChildSpec
from adk_actors.settings import Settings

__all__ = ["node_children"]


def node_children(settings: Settings) -> tuple[ChildSpec, ...]:
    """Children the root starts between the router and the sandbox, in order."""
    return ()
