"""The README's Python blocks run as written (in a subprocess, so the system they start is their own), offline: the
model is the emulator (``GEMINI_BASE_URL``) and the node gets a free admin port (``ADK_ADMIN_PORT``); see
:mod:`actor_tests.docs_env`. The README links every page of ``docs/``, and every relative link of the README and
the docs resolves (the file exists; an anchor names a heading of it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actor_tests.docs_env import ROOT, DocBlock, fenced_blocks, python_blocks, run_block

BLOCKS = [block for block in python_blocks(ROOT / "README.md") if not block.illustrative]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

_INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.MULTILINE)
_CODE_SPAN = re.compile(r"(`+).+?\1", re.DOTALL)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def _without_blocks(path: Path) -> str:
    """The page with its fenced blocks blanked out."""
    lines = path.read_text().splitlines()
    for block in reversed(fenced_blocks(path)):
        end = block.line + block.code.count("\n")
        lines[block.line - 1 : end + 1] = [""] * (end + 2 - block.line)
    return "\n".join(lines)


def _prose(path: Path) -> str:
    """The page without its fenced blocks and code spans (links there are examples, not links)."""
    return _CODE_SPAN.sub("", _without_blocks(path))


def links(path: Path) -> list[str]:
    """Every link target of a Markdown page, inline and reference style, in order."""
    text = _prose(path)
    return [m.group(1) for m in _INLINE_LINK.finditer(text)] + [m.group(1) for m in _REFERENCE_LINK.finditer(text)]


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a page: lower case, punctuation dropped, spaces to hyphens, ``-N`` on repeats."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _without_blocks(path), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def broken_links(path: Path) -> list[str]:
    """The relative links of ``path`` that name a missing file or a missing heading."""
    broken = []
    for target in links(path):
        if _SCHEME.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists() or (anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)):
            broken.append(target)
    return broken


def test_the_readme_has_python_blocks_to_run() -> None:
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.id)
def test_readme_python_block_runs(block: DocBlock, tmp_path: Path) -> None:
    result = run_block(block.code, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_readme_links_every_doc_page() -> None:
    linked = {
        (README.parent / target.partition("#")[0]).resolve() for target in links(README) if not _SCHEME.match(target)
    }
    unlinked = sorted(page.name for page in PAGES[1:] if page.resolve() not in linked)
    assert unlinked == [], "add these docs/ pages to the README's Documentation list"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_link_checker_sees_broken_links_and_ignores_code(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A `code` heading\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [anchor](there.md#a-code-heading) [repeat](there.md#twice-1) [self](#top)\n"
        "# Top\n[gone](missing.md) [bad anchor](there.md#nope) [web](https://example.com/x)\n"
        "`[in code](nowhere.md)`\n\n```md\n[in a block](nowhere.md)\n```\n\n[ref]: also-missing.md\n"
    )
    assert broken_links(page) == ["missing.md", "there.md#nope", "also-missing.md"]
