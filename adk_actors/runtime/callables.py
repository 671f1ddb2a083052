"""``CallableRef``: user code that crosses process boundaries, by importable name or by value (cloudpickle).

Closures and lambdas are serialized *by value*: captured variables are copies in the worker, so mutating them
there is invisible to the caller (use ``adk_actors.testing`` helpers to count attempts across processes).
An unpicklable callable fails early with ``WorkerError(reason="unpicklable_callable")`` naming the attribute
path that could not be pickled (``fn.<closure>.lock``, ``fn.__self__.client``...).
"""

from __future__ import annotations

import importlib
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import cloudpickle

from adk_actors.errors import WorkerError

__all__ = ["CallableRef", "callable_ref"]


@dataclass(frozen=True, slots=True)
class CallableRef:
    """A picklable reference to a callable: ``name`` (``"pkg.mod:attr"``) or cloudpickled ``payload``."""

    name: str = ""
    payload: bytes = b""
    label: str = ""
    """Human-readable name for status and errors (never the code)."""

    def resolve(self) -> Callable[..., Any]:
        """Load the callable in this process.

        Raises:
            WorkerError: ``unresolvable_callable`` when the name does not import or the payload does not load.
        """
        try:
            if self.name:
                module, _, attr = self.name.partition(":")
                obj: object = importlib.import_module(module)
                for part in attr.split("."):
                    obj = getattr(obj, part)
            else:
                obj = cloudpickle.loads(self.payload)
        except Exception as exc:
            raise WorkerError(
                "the callable could not be loaded",
                reason="unresolvable_callable",
                details={"callable": self.label or self.name, "error": type(exc).__name__},
            ) from None
        # Not checked here: a non-callable fails when it is called, as the user's own error (function_failed).
        return cast("Callable[..., Any]", obj)

    @classmethod
    def by_name(cls, name: str) -> CallableRef:
        """A callable by importable name, ``"pkg.mod:attr"`` or ``"pkg.mod.attr"``."""
        if ":" not in name:
            module, _, attr = name.rpartition(".")
            name = f"{module}:{attr}"
        return cls(name=name, label=name)


def callable_ref(fn: Callable[..., Any] | CallableRef | str) -> CallableRef:
    """Make a ``CallableRef``: strings are importable names; module-level functions go by name; anything else
    (closures, lambdas, bound methods, callable objects) by value.

    Raises:
        WorkerError: ``unpicklable_callable`` with ``details["path"]`` naming what could not be pickled.
    """
    if isinstance(fn, CallableRef):
        return fn
    if isinstance(fn, str):
        return CallableRef.by_name(fn)
    if not callable(fn):
        raise WorkerError("not callable", reason="unpicklable_callable", details={"path": "fn"})
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    label = f"{module}:{qualname}" if module else qualname or type(fn).__name__
    if module and module != "__main__" and qualname and "<" not in qualname and not hasattr(fn, "__self__"):
        try:
            mod = importlib.import_module(module)
            obj: Any = mod
            for part in qualname.split("."):
                obj = getattr(obj, part)
            if obj is fn:
                return CallableRef(name=f"{module}:{qualname}", label=label)
        except Exception:  # not importable by name: fall back to by-value
            pass
    try:
        return CallableRef(payload=cloudpickle.dumps(fn), label=label)
    except Exception:
        raise WorkerError(
            "the callable cannot be sent to another process",
            reason="unpicklable_callable",
            details={"callable": label, "path": _unpicklable_path(fn)},
        ) from None


def _picklable(value: Any) -> bool:
    try:
        cloudpickle.dumps(value)
        return True
    except Exception:
        return False


def _unpicklable_path(fn: Any, prefix: str = "fn", depth: int = 0) -> str:
    """Find the first attribute path under ``fn`` that does not pickle (bounded search)."""
    if depth > 4:
        return prefix
    candidates: list[tuple[str, Any]] = []
    code = getattr(fn, "__code__", None)
    closure = getattr(fn, "__closure__", None)
    if code is not None and closure:
        candidates += [
            (f"{prefix}.<closure>.{name}", cell.cell_contents)
            for name, cell in zip(code.co_freevars, closure, strict=False)
            if _has_contents(cell)
        ]
    if code is not None:
        globals_ = getattr(fn, "__globals__", {})
        candidates += [(f"{prefix}.<global>.{name}", globals_[name]) for name in code.co_names if name in globals_]
    defaults = getattr(fn, "__defaults__", None) or ()
    candidates += [(f"{prefix}.<default>[{i}]", v) for i, v in enumerate(defaults)]
    if hasattr(fn, "__self__"):
        candidates.append((f"{prefix}.__self__", fn.__self__))
    if not candidates and hasattr(fn, "__dict__"):
        candidates += [(f"{prefix}.{k}", v) for k, v in vars(fn).items()]
    for path, value in candidates:
        if not _picklable(value):
            if isinstance(value, pickle.PickleError | type):
                return path
            deeper = _unpicklable_path(value, path, depth + 1)
            return deeper
    return prefix


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
        return True
    except ValueError:
        return False
