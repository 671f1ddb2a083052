"""Running the documentation's Python blocks: how blocks are found, and the offline environment they run in.

A block runs as its own ``python -c`` subprocess (so the actor system it starts is its own) in a temporary
directory, against an in-process emulator: ``GEMINI_BASE_URL`` points at it, ``GEMINI_API_KEY`` is a placeholder,
``ADK_ADMIN_PORT`` is a free port from the reserved test range and ``ADK_DATA_DIR`` lies in the temporary
directory. Nothing of the developer's ``ADK_*`` or Gemini settings leaks in.

A block preceded by ``<!-- illustrative -->`` (on the line before its fence; blank lines in between allowed) is
not run: it shows a shape, a signature or an excerpt that needs context the page gives in prose.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port

ROOT = Path(__file__).resolve().parents[1]

ILLUSTRATIVE = "<!-- illustrative -->"
"""The marker of a block that is deliberately not run."""

_LEAKY = frozenset({"GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_BASE_URL"})


@dataclass(frozen=True, slots=True, kw_only=True)
class DocBlock:
    """One fenced block of a Markdown file."""

    path: Path
    """The Markdown file."""
    line: int
    """1-based line number of the opening fence."""
    language: str
    """The fence's info string (``python``, ``bash``, ... or ``""``)."""
    code: str
    """The block's text, without the fences."""
    illustrative: bool
    """Whether the nearest non-blank line above the fence is the illustrative marker."""

    @property
    def id(self) -> str:
        """``FILE.md:LINE``, for test ids and messages."""
        return f"{self.path.name}:{self.line}"


def fenced_blocks(path: Path) -> list[DocBlock]:
    """Every top-level fenced block of ``path``, in order.

    Raises:
        ValueError: a fence is never closed.
    """
    lines = path.read_text().splitlines()
    blocks = []
    index = 0
    while index < len(lines):
        opening = lines[index]
        if not opening.startswith("```"):
            index += 1
            continue
        above = next((text.strip() for text in reversed(lines[:index]) if text.strip()), "")
        end = next((i for i in range(index + 1, len(lines)) if lines[i].startswith("```")), None)
        if end is None:
            raise ValueError(f"{path.name}:{index + 1}: unclosed code fence")
        blocks.append(
            DocBlock(
                path=path,
                line=index + 1,
                language=opening[3:].strip(),
                code="".join(text + "\n" for text in lines[index + 1 : end]),
                illustrative=above == ILLUSTRATIVE,
            )
        )
        index = end + 1
    return blocks


def python_blocks(path: Path) -> list[DocBlock]:
    """The ```` ```python ```` blocks of ``path``."""
    return [block for block in fenced_blocks(path) if block.language == "python"]


@contextmanager
def docs_env(workdir: Path) -> Iterator[dict[str, str]]:
    """The environment of a documentation block: a running emulator and the ``ADK_*`` settings that point at it.

    The emulator runs the built-in script and stops when the context exits.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADK_") and k not in _LEAKY}
    with Emulator() as emu:
        env.update(
            GEMINI_BASE_URL=emu.base_url,
            GEMINI_API_KEY="docs-key",
            ADK_ADMIN_PORT=str(reserved_port()),
            ADK_DATA_DIR=str(workdir / "data"),
        )
        yield env


def run_block(code: str, workdir: Path, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as ``python -c`` in ``workdir`` under :func:`docs_env`; the completed process is returned."""
    with docs_env(workdir) as env:
        return subprocess.run(
            [sys.executable, "-c", code],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
            env=env,
        )
