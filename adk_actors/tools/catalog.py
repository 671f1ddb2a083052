"""Toolsets (immutable catalog snapshots) and catalog compilation.

Before a provider sees a catalog, every tool's schema is normalized and compiled, and names must be unique across
plain tools, toolsets and sub-agents. A compiled :class:`ToolCatalog` has a ``version`` (a digest of its
declarations); a call recorded against another version fails closed as ``tool_catalog_changed`` rather than
running against a stale declaration. ``Toolset.refresh()`` returns a new snapshot; nothing is swapped in place.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from adk_actors.content.canonical import canonical_dumps
from adk_actors.content.parts import FunctionCallPart
from adk_actors.errors import AdkError, SchemaError, ToolError
from adk_actors.schema import CompiledSchema, compile_schema, gemini_function_declaration
from adk_actors.tools.base import Tool

__all__ = ["CatalogEntry", "ToolCatalog", "Toolset", "ToolsetMember", "compile_catalog", "tool_declaration"]


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_dumps(value).encode("utf-8")).hexdigest()


def _read_tool(tool: Any, source: str) -> tuple[str, str, Any]:
    if not isinstance(tool, Tool):
        raise ToolError("not a tool", reason="invalid_tool", details={"source": source, "type": type(tool).__name__})
    try:
        name, description, schema = tool.name, tool.description, tool.schema()
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(
            "tool declaration could not be read",
            reason="invalid_tool",
            details={"source": source, "type": type(exc).__name__},
        ) from None
    if not isinstance(name, str):
        raise ToolError("tool name must be a str", reason="invalid_tool_name", details={"source": source})
    return name, description, schema


def tool_declaration(tool: Any, *, source: str = "tool") -> tuple[dict[str, Any], CompiledSchema]:
    """Compile one tool's schema and build its Gemini function declaration.

    Raises:
        ToolError: reason ``invalid_tool`` or ``invalid_tool_name``.
        SchemaError: the schema is invalid (``details["tool"]`` names the tool).
    """
    name, description, schema = _read_tool(tool, source)
    try:
        compiled = compile_schema(schema)
        declaration = gemini_function_declaration(name, description, compiled.schema)
    except SchemaError as exc:
        if exc.reason == "invalid_function_name":
            raise ToolError("invalid tool name", reason="invalid_tool_name", details={"source": source}) from None
        raise SchemaError(
            exc.message, reason=exc.reason, details={**exc.details, "tool": name, "source": source}
        ) from None
    return declaration, compiled


@dataclass(frozen=True, slots=True, kw_only=True)
class Toolset:
    """An immutable snapshot of a tool catalog (static, or loaded from a mutable backend such as MCP/OpenAPI)."""

    name: str
    """The toolset's name (for error details and catalog sources)."""
    tools: tuple[Any, ...]
    """The tools in this snapshot."""
    loader: Callable[[], Iterable[Any]] | None = None
    """Loads a fresh tool list for :meth:`refresh`; ``None`` for a static toolset."""
    version: str = dataclasses.field(default="", compare=False)
    """Digest of this snapshot's declarations (computed)."""
    late_bound: bool = True
    """For a dynamic toolset: whether its tools are materialized from the backend when a call runs
    (:class:`ToolsetMember`); ``False`` when each tool carries its own binding and checks its declaration's
    digest with the backend itself (an MCP toolset)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ToolError("toolset name must be a non-empty str", reason="invalid_toolset")
        tools = tuple(self.tools) if isinstance(self.tools, list | tuple) else None
        if tools is None:
            raise ToolError(
                "toolset tools must be a sequence", reason="invalid_toolset", details={"toolset": self.name}
            )
        object.__setattr__(self, "tools", tools)
        source = f"toolset:{self.name}"
        declarations = [tool_declaration(t, source=source)[0] for t in tools]
        object.__setattr__(self, "version", _digest(sorted(declarations, key=lambda d: str(d["name"]))))

    @classmethod
    def of(cls, name: str, tools: Sequence[Any]) -> Toolset:
        """A static toolset.

        Raises:
            ToolError: a tool is invalid.
            SchemaError: a tool's schema is invalid.
        """
        return cls(name=name, tools=tuple(tools))

    @classmethod
    def dynamic(cls, name: str, loader: Callable[[], Iterable[Any]], *, late_bound: bool = True) -> Toolset:
        """A toolset whose snapshot comes from ``loader`` (called now and on each :meth:`refresh`).

        Raises:
            ToolError: reason ``toolset_load_failed`` or an invalid tool.
            SchemaError: a tool's schema is invalid.
        """
        return cls(name=name, tools=_load(name, loader), loader=loader, late_bound=late_bound)

    def refresh(self) -> Toolset:
        """A new snapshot from the loader (a static toolset returns itself); ``self`` is unchanged.

        Raises:
            ToolError: reason ``toolset_load_failed`` or an invalid tool.
            SchemaError: a tool's schema is invalid.
        """
        if self.loader is None:
            return self
        return Toolset(
            name=self.name, tools=_load(self.name, self.loader), loader=self.loader, late_bound=self.late_bound
        )

    def members(self) -> tuple[Any, ...]:
        """The snapshot's tools as an agent carries them: a static toolset's tools as they are; a dynamic one's as
        :class:`ToolsetMember` values that re-load the backend when called and fail closed when it moved on."""
        if self.loader is None or not self.late_bound:
            return self.tools
        out = []
        for tool in self.tools:
            declaration = tool_declaration(tool, source=f"toolset:{self.name}")[0]
            out.append(ToolsetMember(toolset=self, name=declaration["name"], digest=_digest(declaration)))
        return tuple(out)

    def resolve(self, name: str, digest: str) -> Any:
        """The backend's current tool ``name``, provided its declaration still has ``digest`` (the one the model
        was shown).

        Raises:
            ToolError: reason ``tool_catalog_changed`` (removed or changed since the snapshot) or
                ``toolset_load_failed``.
        """
        current = self.refresh()
        for tool in current.tools:
            declaration = tool_declaration(tool, source=f"toolset:{self.name}")[0]
            if declaration["name"] == name:
                if _digest(declaration) == digest:
                    return tool
                break
        raise ToolError(
            "tool catalog changed since the call was made",
            reason="tool_catalog_changed",
            details={"tool": name[:128], "toolset": self.name},
        )


class ToolsetMember:
    """One tool of a dynamic toolset's snapshot, as an agent carries it.

    The model is shown the snapshot's declaration; the backend is only materialized when the call runs (after
    runtime policy, so a denied call never reaches a remote catalog), and a tool that was removed or whose
    declaration changed since the snapshot fails closed as ``tool_catalog_changed`` until the toolset is
    refreshed and the agent replaced.
    """

    def __init__(self, *, toolset: Toolset, name: str, digest: str) -> None:
        self.toolset, self.name, self.digest = toolset, name, digest
        snapshot = next(t for t in toolset.tools if t.name == name)
        self.description = snapshot.description
        self._schema = snapshot.schema()
        self.parallel_safe = getattr(snapshot, "parallel_safe", False) is True
        self.inline = getattr(snapshot, "inline", False) is True
        self._resolved: Any = None

    def schema(self) -> Any:
        return self._schema

    def _tool(self) -> Any:
        # One job resolves once: its confirmation gate and its execution see the same materialized tool.
        if self._resolved is None:
            self._resolved = self.toolset.resolve(self.name, self.digest)
        return self._resolved

    def require_confirmation(self, args: dict[str, Any], context: Any) -> Any:
        from adk_actors.tools.base import confirmation_for

        return confirmation_for(self._tool(), args, context).to_dict()

    def execute(self, args: dict[str, Any], context: Any) -> Any:
        return self._tool().execute(args, context)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_resolved": None}

    def __repr__(self) -> str:
        return f"ToolsetMember(toolset={self.toolset.name!r}, name={self.name!r})"


def _load(name: str, loader: Callable[[], Iterable[Any]]) -> tuple[Any, ...]:
    try:
        return tuple(loader())
    except AdkError:
        raise
    except Exception as exc:
        raise ToolError(
            "toolset could not be loaded",
            reason="toolset_load_failed",
            details={"toolset": name, "type": type(exc).__name__},
        ) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogEntry:
    """One compiled tool in a catalog."""

    name: str
    """The function name."""
    tool: Any
    """The tool object."""
    compiled: CompiledSchema
    """The compiled argument schema."""
    declaration: dict[str, Any]
    """The Gemini function declaration."""
    source: str
    """``"tool"`` or ``"toolset:<name>"``."""
    digest: str = ""
    """SHA-256 of the declaration's canonical JSON (computed); record it with a paused call to detect change."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", _digest(self.declaration))

    def validate_args(self, args: Any) -> dict[str, Any]:
        """Validate call arguments; the error never reflects them.

        Raises:
            SchemaError: reason ``invalid_arguments`` (``details["tool"]`` names the tool).
        """
        try:
            validated: dict[str, Any] = self.compiled.validate(args)
        except SchemaError as exc:
            raise SchemaError(exc.message, reason=exc.reason, details={**exc.details, "tool": self.name}) from None
        return validated


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCatalog:
    """A compiled, immutable tool catalog: unique names, compiled schemas, Gemini declarations, a version."""

    entries: tuple[CatalogEntry, ...]
    """Tools in declaration order."""
    sub_agents: tuple[str, ...] = ()
    """Sub-agent names that share the namespace."""
    version: str = ""
    """Digest of the declarations and sub-agent names."""

    def names(self) -> tuple[str, ...]:
        """Tool names in declaration order."""
        return tuple(e.name for e in self.entries)

    def declarations(self) -> list[dict[str, Any]]:
        """The Gemini ``functionDeclarations`` list (fresh copies)."""
        return [dict(e.declaration) for e in self.entries]

    def get(self, name: str) -> CatalogEntry | None:
        """The entry for ``name``, or ``None``."""
        for entry in self.entries:
            if entry.name == name:
                return entry
        return None

    def resolve(self, name: str, *, version: str | None = None, digest: str | None = None) -> CatalogEntry:
        """Find the tool for a call, failing closed when the call was made against another declaration.

        Args:
            name: The called function name.
            version: The catalog version the call was made against; any difference fails.
            digest: The entry digest recorded with the call (for example across a pause); fails only when that
                tool was removed or its declaration changed, so unrelated catalog changes do not.

        Raises:
            ToolError: reason ``tool_catalog_changed`` (stale ``version``/``digest``) or ``tool_not_found``.
        """
        entry = self.get(name) if isinstance(name, str) else None
        label = name[:128] if isinstance(name, str) else "?"
        stale_version = version is not None and version != self.version
        stale_digest = digest is not None and (entry is None or entry.digest != digest)
        if stale_version or stale_digest:
            raise ToolError(
                "tool catalog changed since the call was made", reason="tool_catalog_changed", details={"tool": label}
            )
        if entry is None:
            raise ToolError("no such tool", reason="tool_not_found")
        return entry

    def validate_call(
        self, call: FunctionCallPart, *, version: str | None = None, digest: str | None = None
    ) -> tuple[CatalogEntry, dict[str, Any]]:
        """Resolve a call (see :meth:`resolve`) and validate its arguments.

        Raises:
            ToolError: reason ``tool_catalog_changed`` or ``tool_not_found``.
            SchemaError: reason ``invalid_arguments``.
        """
        entry = self.resolve(call.name, version=version, digest=digest)
        return entry, entry.validate_args(call.args)

    def check_batch(self, calls: Sequence[FunctionCallPart], *, version: str | None = None) -> None:
        """Structurally validate a provider's whole call batch before anything is persisted: every name resolves
        and no call id repeats. Arguments are validated per call later (their failures go back to the model).

        Raises:
            ToolError: reason ``tool_catalog_changed``, ``tool_not_found`` (``details["index"]``),
                ``duplicate_call_id`` or ``invalid_call``.
        """
        seen: set[str] = set()
        for index, call in enumerate(calls):
            if not isinstance(call, FunctionCallPart):
                raise ToolError("not a function call", reason="invalid_call", details={"index": index})
            try:
                self.resolve(call.name, version=version)
            except ToolError as exc:
                raise ToolError(exc.message, reason=exc.reason, details={**exc.details, "index": index}) from None
            if call.id is not None:
                if call.id in seen:
                    raise ToolError("duplicate function call id", reason="duplicate_call_id", details={"index": index})
                seen.add(call.id)


def compile_catalog(
    tools: Iterable[Any] = (), toolsets: Iterable[Toolset] = (), *, sub_agents: Iterable[str] = ()
) -> ToolCatalog:
    """Compile tools and toolset snapshots into one catalog.

    Args:
        tools: Plain tools.
        toolsets: Toolset snapshots; their tools join the catalog in order.
        sub_agents: Names of sub-agents (agent transfer / AgentTool) sharing the function namespace.

    Raises:
        ToolError: reason ``duplicate_tool_name`` (``details`` name the tool and both sources),
            ``invalid_tool``, ``invalid_tool_name`` or ``invalid_toolset``.
        SchemaError: a tool's schema is invalid.
    """
    entries: list[CatalogEntry] = []
    owners: dict[str, str] = {}

    def claim(name: str, source: str) -> None:
        if name in owners:
            raise ToolError(
                "duplicate tool name",
                reason="duplicate_tool_name",
                details={"tool": name, "source": source, "first_source": owners[name]},
            )
        owners[name] = source

    pending: list[tuple[Any, str]] = [(t, "tool") for t in tools]
    for toolset in toolsets:
        if not isinstance(toolset, Toolset):
            raise ToolError("not a toolset", reason="invalid_toolset", details={"type": type(toolset).__name__})
        pending.extend((t, f"toolset:{toolset.name}") for t in toolset.tools)
    for tool, source in pending:
        declaration, compiled = tool_declaration(tool, source=source)
        claim(declaration["name"], source)
        entries.append(
            CatalogEntry(name=declaration["name"], tool=tool, compiled=compiled, declaration=declaration, source=source)
        )
    agent_names: list[str] = []
    for agent in sub_agents:
        if not isinstance(agent, str) or not agent:
            raise ToolError(
                "sub-agent names are non-empty str", reason="invalid_tool_name", details={"source": "sub_agent"}
            )
        claim(agent, "sub_agent")
        agent_names.append(agent)
    version = _digest({"tools": [e.declaration for e in entries], "sub_agents": agent_names})
    return ToolCatalog(entries=tuple(entries), sub_agents=tuple(agent_names), version=version)
