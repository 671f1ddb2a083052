"""Import-layer check: ``python -m adk_actors.devtools.layers [PACKAGE_DIR]``; exit 1 on a violation.

Rules (docs/ARCHITECTURE.md, "Layers"):

* ``thespian`` is imported only inside ``runtime/``;
* a module may import adk_actors modules of its own layer or of layers below it, never above;
* a module of a domain or lifecycle package (layers 3 and 4) never imports another such package's *actor module*
  (a module that defines a ``GenServer``/Thespian actor class, found by reading the classes): it talks to that
  actor through the package's api, client, body or messages modules;
* product code never imports ``adk_actors.emulator`` (only the emulator itself, ``devtools/``, ``testing/`` and
  the :data:`EMULATOR_USERS` that start it on request);
* benchmark code (a module named ``bench*``) lives in ``devtools/``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

__all__ = ["EMULATOR_USERS", "LAYERS", "actor_modules", "check", "main"]

LAYERS: dict[str, int] = {
    # 0: used by all
    "errors": 0,
    "secrets": 0,
    "settings": 0,
    "logs": 0,
    # 1: our OTP
    "runtime": 1,
    # 2: values
    "content": 2,
    "events": 2,
    "schema": 2,
    # 3: domain
    "tools": 3,
    "models": 3,
    "sessions": 3,
    "agents": 3,
    "emulator": 3,
    "memory": 3,
    "artifacts": 3,
    "plugins": 3,
    "telemetry": 3,
    "observability": 3,
    "storage": 3,
    "auth": 3,
    "context": 3,
    "admission": 3,
    "policy": 3,
    "mcp": 3,
    "openapi": 3,
    "a2a": 3,
    "shards": 3,
    # 4: lifecycles
    "runs": 4,
    "workflows": 4,
    "live": 4,
    "triggers": 4,
    "runner": 4,
    "planning": 4,
    "retry": 4,
    # 5: edges
    "cli": 5,
    "__main__": 5,
    "devtools": 5,
    "protocols": 5,
    "testing": 5,
    "evaluation": 5,
    "node": 5,
    "web": 5,
    "devapi": 5,
}
FACADE = 6  # adk_actors/__init__.py re-exports the public surface
DOMAIN_LAYERS = frozenset({3, 4})
"""Layers whose packages may not import each other's actor modules."""
ACTOR_BASES = frozenset({"Actor", "ActorTypeDispatcher", "GenServer"})
"""Base class names that make a class an actor (subclasses of them, found in the tree, count too)."""
EMULATOR_USERS = frozenset(
    {
        # ``adk emulator ...``: the CLI command that runs the emulator in the foreground.
        "cli/main.py",
        # ``adk run/shell --emulator``: the CLI starts an in-process emulator for a local try-out when asked to.
        "cli/launch.py",
    }
)
"""Product modules allowed to import ``adk_actors.emulator`` (paths relative to the package), each for a reason."""


def _layer_of(parts: tuple[str, ...]) -> int | None:
    if not parts:
        return FACADE
    head = parts[0].removesuffix(".py")
    if head == "__init__":
        return FACADE
    return LAYERS.get(head)


def _imports(tree: ast.AST, module_parts: tuple[str, ...], is_package: bool) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(module_parts if is_package else module_parts[:-1])
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(["adk_actors", *base] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # ``from pkg import name`` may name a submodule: keep ``pkg.name`` as a candidate too.
            found.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names if target)
    return found


def _parse(package_dir: Path) -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), filename=str(path)) for path in sorted(package_dir.rglob("*.py"))}


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _base_name(node.value)
    return ""


def actor_modules(trees: dict[Path, ast.Module], package_dir: Path) -> frozenset[str]:
    """Dotted names (``adk_actors.sessions.actor``) of the modules that define an actor class.

    A class is an actor when one of its bases is in :data:`ACTOR_BASES` or is (by name) another actor class of the
    tree, transitively.
    """
    classes: list[tuple[str, str, list[str]]] = []
    for path, tree in trees.items():
        parts = path.relative_to(package_dir).with_suffix("").parts
        module = ".".join(["adk_actors", *(parts[:-1] if parts[-1] == "__init__" else parts)])
        classes.extend(
            (module, node.name, [_base_name(b) for b in node.bases])
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
        )
    actors = set(ACTOR_BASES)
    while True:
        more = {name for _, name, bases in classes if name not in actors and actors.intersection(bases)}
        if not more:
            break
        actors |= more
    return frozenset(module for module, name, bases in classes if actors.intersection(bases))


def check(package_dir: Path) -> list[str]:
    """Return one message per violation in the package at ``package_dir`` (the ``adk_actors`` folder)."""
    problems: list[str] = []
    trees = _parse(package_dir)
    actors = actor_modules(trees, package_dir)
    for path, tree in trees.items():
        rel = path.relative_to(package_dir)
        parts = rel.with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module_parts = parts[:-1] if is_package else parts
        own = _layer_of(module_parts) if module_parts else FACADE
        if own is None:
            problems.append(f"{rel}: package {module_parts[0]!r} has no layer in adk_actors.devtools.layers")
            continue
        top_package = module_parts[0] if module_parts else ""
        if parts[-1].startswith("bench") and top_package != "devtools":
            problems.append(f"{rel}: benchmark code outside adk_actors/devtools/")
        reported: set[tuple[int, str]] = set()
        for lineno, target in _imports(tree, module_parts, is_package):
            top = target.split(".")
            if top[0] == "thespian" and (not module_parts or module_parts[0] != "runtime"):
                problems.append(f"{rel}:{lineno}: imports thespian outside adk_actors/runtime/")
            if top[0] != "adk_actors" or len(top) < 2:
                continue
            layer = _layer_of(tuple(top[1:]))
            if layer is not None and own is not None and layer > own:
                problems.append(f"{rel}:{lineno}: imports {target} (layer {layer}) from layer {own}")
            if (
                target in actors
                and own in DOMAIN_LAYERS
                and layer in DOMAIN_LAYERS
                and top_package != top[1]
                and (lineno, target) not in reported
            ):
                reported.add((lineno, target))
                problems.append(
                    f"{rel}:{lineno}: imports {target}, the actor module of another domain package "
                    f"(import {top[1]}'s api, client, body or messages module instead)"
                )
            if (
                top[1] == "emulator"
                and top_package not in ("emulator", "devtools", "testing")
                and rel.as_posix() not in EMULATOR_USERS
                and (lineno, "emulator") not in reported
            ):
                reported.add((lineno, "emulator"))
                problems.append(f"{rel}:{lineno}: product code imports adk_actors.emulator")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    package_dir = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    problems = check(package_dir)
    for problem in problems:
        print(problem)
    print(f"layers: {'FAILED' if problems else 'ok'} ({len(problems)} violation(s))")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
