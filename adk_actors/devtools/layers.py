"""Import-layer check: ``python -m adk_actors.devtools.layers [PACKAGE_DIR]``; exit 1 on a violation.

Rules (docs/ARCHITECTURE.md, "Layers"): ``thespian`` is imported only inside ``runtime/``; a module may import
adk_actors modules of its own layer or of layers below it, never above.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

__all__ = ["LAYERS", "check", "main"]

LAYERS: dict[str, int] = {
    # 0: used by all
    "errors": 0, "secrets": 0, "settings": 0, "logs": 0,
    # 1: our OTP
    "runtime": 1,
    # 2: values
    "content": 2, "events": 2, "schema": 2,
    # 3: domain
    "tools": 3, "models": 3, "sessions": 3, "agents": 3, "emulator": 3, "memory": 3, "artifacts": 3,
    "plugins": 3, "telemetry": 3, "storage": 3, "auth": 3, "context": 3, "admission": 3, "policy": 3,
    # 4: lifecycles
    "runs": 4, "workflows": 4, "live": 4, "triggers": 4, "runner": 4, "planning": 4, "retry": 4,
    # 5: edges
    "cli": 5, "__main__": 5, "devtools": 5, "protocols": 5, "testing": 5, "evaluation": 5, "node": 5,
}
FACADE = 6  # adk_actors/__init__.py re-exports the public surface


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
            if target in ("adk_actors",):
                found.extend((node.lineno, f"adk_actors.{alias.name}") for alias in node.names)
    return found


def check(package_dir: Path) -> list[str]:
    """Return one message per violation in the package at ``package_dir`` (the ``adk_actors`` folder)."""
    problems: list[str] = []
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir)
        parts = rel.with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module_parts = parts[:-1] if is_package else parts
        own = _layer_of(module_parts) if module_parts else FACADE
        if own is None:
            problems.append(f"{rel}: package {module_parts[0]!r} has no layer in adk_actors.devtools.layers")
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for lineno, target in _imports(tree, module_parts, is_package):
            top = target.split(".")
            if top[0] == "thespian" and (not module_parts or module_parts[0] != "runtime"):
                problems.append(f"{rel}:{lineno}: imports thespian outside adk_actors/runtime/")
            if top[0] == "adk_actors" and len(top) > 1:
                layer = _layer_of(tuple(top[1:]))
                if layer is not None and own is not None and layer > own:
                    problems.append(f"{rel}:{lineno}: imports {target} (layer {layer}) from layer {own}")
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
