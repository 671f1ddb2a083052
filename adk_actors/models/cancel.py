"""Cancellation of blocking provider calls: the runtime's :class:`~adk_actors.runtime.cancel.CancelToken`."""

from __future__ import annotations

from adk_actors.runtime.cancel import CancelToken

__all__ = ["CancelToken"]
