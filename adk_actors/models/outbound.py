"""What an outbound provider request carries besides its body: the W3C ``traceparent`` of the span it belongs to.

The agent sets :data:`TRACEPARENT` around a provider call on the I/O thread that makes it (a context variable, so
concurrent calls on other threads never see each other's); the provider adds the header when it is set.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["TRACEPARENT"]

TRACEPARENT: ContextVar[str] = ContextVar("adk_outbound_traceparent", default="")
"""The ``traceparent`` header value for requests made in this context (``""``: no header)."""
