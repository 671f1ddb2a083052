"""An MCP connection as an agent toolset: a snapshot of the server's tools, bound to the connection.

::

    client = mcp.connect("stdio", "my-mcp-server")
    agent = spawn_agent("helper", model=..., tools=[mcp_toolset(client)])

The snapshot is listed once (``tools/list``, all pages); each tool becomes an :class:`McpTool` whose declaration the
agent's catalog compiles with its other tools (a name collision fails ``spawn_agent`` with
``duplicate_tool_name``; ``prefix`` avoids them). Runtime policy and confirmation apply before a call reaches the
connection. A call goes from the agent straight to the connection actor (no worker process: no user code runs
here) carrying the digest of the declaration the model was shown; the connection fails it with
``tool_catalog_changed`` — and the agent fails the turn — when the server announced a changed catalog
(``notifications/tools/list_changed``) or the tool's declaration differs from the snapshot, until
``toolset.refresh()`` lists the tools again (then give the agent the new snapshot: running agents keep theirs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adk_actors.errors import McpError, ToolError
from adk_actors.mcp.api import McpClient
from adk_actors.mcp.binding import McpBinding
from adk_actors.mcp.core import declaration_digest
from adk_actors.tools.catalog import Toolset

__all__ = ["McpTool", "mcp_toolset"]

MAX_DESCRIPTION_CHARS = 4096


class McpTool:
    """One tool of an MCP server's snapshot (the ``Tool`` protocol plus a :class:`McpBinding`)."""

    def __init__(
        self,
        client: McpClient,
        declaration: dict[str, Any],
        *,
        prefix: str = "",
        requires_confirmation: bool = False,
        parallel_safe: bool = False,
    ) -> None:
        remote_name = declaration.get("name")
        if not isinstance(remote_name, str) or not remote_name:
            raise ToolError("an MCP tool without a name", reason="invalid_tool", details={"toolset": client.name})
        schema = declaration.get("inputSchema")
        if not isinstance(schema, dict):
            raise ToolError(
                "an MCP tool without an input schema",
                reason="invalid_tool",
                details={"tool": remote_name[:128], "toolset": client.name},
            )
        self.client = client
        self.name = prefix + remote_name
        self.description = str(declaration.get("description") or "")[:MAX_DESCRIPTION_CHARS]
        self._schema = schema
        self.requires_confirmation = requires_confirmation
        self.parallel_safe = parallel_safe
        self.annotations = dict(declaration.get("annotations") or {})
        """The server's hints (``readOnlyHint``, ...): untrusted, shown in status, never used for decisions."""
        self.remote = McpBinding(target=client.ref, tool=remote_name, digest=declaration_digest(declaration))

    def schema(self) -> dict[str, Any]:
        return self._schema

    def execute(self, args: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """Call the tool through the facade (outside an agent); a result with ``isError`` raises.

        Raises:
            ToolError: ``mcp_tool_error`` (the tool reported a failure).
            McpError: the request failed.
        """
        result = self.client.execute_tool(self.remote.tool, args)
        if result["isError"]:
            raise ToolError("the MCP tool reported an error", reason="mcp_tool_error", details={"tool": self.name})
        return result

    def __repr__(self) -> str:
        return f"McpTool(name={self.name!r}, server={self.client.name!r})"


@dataclass(frozen=True, slots=True)
class _Lister:
    client: McpClient
    prefix: str
    requires_confirmation: bool
    parallel_safe: bool

    def __call__(self) -> list[McpTool]:
        return [
            McpTool(
                self.client,
                declaration,
                prefix=self.prefix,
                requires_confirmation=self.requires_confirmation,
                parallel_safe=self.parallel_safe,
            )
            for declaration in self.client.list_tools()
        ]


def mcp_toolset(
    client: McpClient,
    *,
    name: str | None = None,
    prefix: str = "",
    requires_confirmation: bool = False,
    parallel_safe: bool = False,
) -> Toolset:
    """A :class:`~adk_actors.tools.Toolset` snapshot of ``client``'s tools (``refresh()`` lists them again).

    Args:
        client: A connected :class:`McpClient`.
        name: The toolset's name (default: the connection's name), named in collision errors.
        prefix: Prepended to every tool's function name (to avoid collisions).
        requires_confirmation: Every call pauses for human approval under a Runner.
        parallel_safe: Calls may run concurrently with neighbouring parallel-safe calls.

    Raises:
        McpError: the listing failed.
        ToolError: ``invalid_tool`` / ``invalid_tool_name`` (a tool the model cannot be shown).
        SchemaError: a tool's input schema is not a schema we can validate.
    """
    if not isinstance(client, McpClient):
        raise McpError("mcp_toolset needs a connected McpClient", reason="invalid_value", details={"key": "client"})
    if not isinstance(prefix, str) or len(prefix) > 32:
        raise McpError(
            "prefix must be a str of at most 32 characters", reason="invalid_value", details={"key": "prefix"}
        )
    lister = _Lister(client, prefix, requires_confirmation is True, parallel_safe is True)
    return Toolset.dynamic(name or client.name, lister, late_bound=False)
