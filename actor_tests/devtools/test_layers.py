"""The layer check's rules on small synthetic package trees (the real tree is checked in runtime/test_contracts.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from adk_actors.devtools.layers import actor_modules, check

_ACTOR = "from adk_actors.runtime.server import GenServer\n\n\nclass Store(GenServer):\n    pass\n"


def _tree(root: Path, files: dict[str, str]) -> Path:
    """An ``adk_actors`` folder under ``root`` holding ``files`` (relative path → source), packages filled in."""
    package = root / "adk_actors"
    base = {
        "__init__.py": "",
        "runtime/__init__.py": "",
        "runtime/server.py": "class GenServer:\n    pass\n",
        "sessions/__init__.py": "",
        "sessions/actor.py": _ACTOR,
        "sessions/messages.py": "STORE = 's'\n",
        "agents/__init__.py": "",
        "runs/__init__.py": "",
        "cli/__init__.py": "",
        "devtools/__init__.py": "",
        "emulator/__init__.py": "from adk_actors.emulator.server import serve\n",
        "emulator/server.py": "def serve():\n    pass\n",
    }
    for rel, text in {**base, **files}.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(text)
    return package


def test_the_synthetic_base_tree_is_clean(tmp_path: Path) -> None:
    package = _tree(
        tmp_path,
        {
            "agents/api.py": "from adk_actors.sessions.messages import STORE\n",
            "sessions/api.py": "from adk_actors.sessions.actor import Store\n",
        },
    )
    assert check(package) == []


def test_actor_modules_are_found_by_their_classes_transitively(tmp_path: Path) -> None:
    package = _tree(
        tmp_path,
        {
            "runs/actor.py": "from adk_actors.sessions.actor import Store\n\n\nclass Run(Store):\n    pass\n",
            "runs/logic.py": "class Plain:\n    pass\n",
        },
    )
    found = actor_modules({p: ast.parse(p.read_text()) for p in package.rglob("*.py")}, package)
    assert {"adk_actors.sessions.actor", "adk_actors.runs.actor"} <= found
    assert "adk_actors.runs.logic" not in found and "adk_actors.sessions.messages" not in found


@pytest.mark.parametrize(
    "line",
    [
        "from adk_actors.sessions.actor import Store\n",
        "from adk_actors.sessions import actor\n",
        "import adk_actors.sessions.actor\n",
        "def f():\n    from adk_actors.sessions.actor import Store\n",  # a lazy import counts too
    ],
)
def test_a_domain_package_importing_another_ones_actor_module_fails(tmp_path: Path, line: str) -> None:
    package = _tree(tmp_path, {"agents/turns.py": line})
    problems = check(package)
    assert any(
        p.startswith("agents/turns.py:") and "the actor module of another domain package" in p for p in problems
    ), problems
    result = subprocess.run(
        [sys.executable, "-m", "adk_actors.devtools.layers", str(package)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1 and "actor module" in result.stdout


def test_an_edge_or_the_owning_package_may_import_an_actor_module(tmp_path: Path) -> None:
    package = _tree(
        tmp_path,
        {
            "cli/shell.py": "from adk_actors.sessions.actor import Store\n",
            "sessions/client.py": "from adk_actors.sessions import actor\n",
        },
    )
    assert check(package) == []


@pytest.mark.parametrize("where", ["agents/model_check.py", "runtime/boot.py", "node.py", "cli/doctor.py"])
def test_product_code_importing_the_emulator_fails(tmp_path: Path, where: str) -> None:
    package = _tree(tmp_path, {where: "def f():\n    from adk_actors.emulator import serve\n"})
    problems = check(package)
    assert any(p.startswith(f"{where}:") and "imports adk_actors.emulator" in p for p in problems), problems


@pytest.mark.parametrize("where", ["devtools/provider.py", "cli/main.py", "cli/launch.py", "emulator/cli.py"])
def test_devtools_and_the_emulator_starting_cli_may_import_it(tmp_path: Path, where: str) -> None:
    package = _tree(tmp_path, {where: "from adk_actors.emulator import serve\n"})
    assert check(package) == []


def test_benchmark_code_outside_devtools_fails(tmp_path: Path) -> None:
    package = _tree(tmp_path, {"sessions/bench.py": "", "devtools/bench_sessions.py": ""})
    assert check(package) == ["sessions/bench.py: benchmark code outside adk_actors/devtools/"]
