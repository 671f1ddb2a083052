"""The value packages and tools import only downward, never thespian, and export sorted ``__all__`` lists."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import adk_actors

ROOT = Path(adk_actors.__file__).parent
ALLOWED = {
    "content": ("adk_actors.errors", "adk_actors.secrets", "adk_actors.content"),
    "events": ("adk_actors.errors", "adk_actors.secrets", "adk_actors.content", "adk_actors.events"),
    "schema": ("adk_actors.errors", "adk_actors.secrets", "adk_actors.content", "adk_actors.schema"),
    "tools": (
        "adk_actors.errors",
        "adk_actors.secrets",
        "adk_actors.logs",
        "adk_actors.content",
        "adk_actors.events",
        "adk_actors.schema",
        "adk_actors.tools",
    ),
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_downward(package: str) -> None:
    for path in sorted((ROOT / package).glob("*.py")):
        for name in _imports(path):
            assert not name.startswith("thespian"), path
            if name.startswith("adk_actors"):
                assert name.startswith(ALLOWED[package]), f"{path.name} imports {name}"


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_public_surface_is_sorted_and_resolves(package: str) -> None:
    module = importlib.import_module(f"adk_actors.{package}")
    exported = list(module.__all__)
    # isort-style order, as ruff's RUF022 keeps it: CONSTANTS, then Classes, then functions.
    assert exported == sorted(exported, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    for name in exported:
        assert hasattr(module, name), name
