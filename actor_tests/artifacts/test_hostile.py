"""Hostile artifact names and scope ids: traversal, NUL and control characters, 10k characters, unicode tricks,
backslashes and absolute paths are refused before anything is written, any name the rules accept round-trips,
and nothing ever lands outside the store's root (hypothesis, on the filesystem and in-memory adapters)."""

from __future__ import annotations

import shutil
import stat
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_actors.artifacts import (
    ArtifactScope,
    BaseArtifactService,
    FileArtifactService,
    InMemoryArtifactService,
    check_artifact_name,
)
from adk_actors.errors import ValidationError

SCOPE = ArtifactScope.session("app", "user-1", "session-1")

HOSTILE = {
    "../etc/passwd": "dot_segment",
    "a/../../b": "dot_segment",
    "./a": "dot_segment",
    "a/..": "dot_segment",
    "..": "dot_segment",
    "/etc/passwd": "absolute",
    "/": "absolute",
    "a//b": "empty_segment",
    "a/": "empty_segment",
    "a\x00b": "not_printable",
    "\x00": "not_printable",
    "a\nb": "not_printable",
    "a\tb": "not_printable",
    "\x7f": "not_printable",
    "a\u202eb": "not_printable",  # right-to-left override
    "a\u200bb": "not_printable",  # zero-width space
    "\ufeffa": "not_printable",  # byte-order mark
    "a\u2028b": "not_printable",  # line separator
    "\ud800": "not_printable",  # lone surrogate
    "e\u0301": "not_nfc",  # decomposed é
    "\u212b": "not_nfc",  # angstrom sign (NFC: Å)
    "..\\..\\windows": "backslash",
    "C:\\x": "backslash",
    "x" * 10_000: "too_long",
    "x" * 257: "too_long",
    "/".join("a" * 17): "too_many_segments",
    "": "empty",
}


@pytest.fixture
def tmp_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="adk-artifacts-hostile-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def assert_contained(parent: Path) -> None:
    """Only ``root`` sits in ``parent``; under it only real directories and files whose names we generate."""
    assert [p.name for p in parent.iterdir()] == ["root"]
    generated = {"scopes", "scope-slots", "names", "name-slots", "reservations", "versions", "tmp"}
    generated |= {"scope.json", "name.json"}
    for path in (parent / "root").rglob("*"):
        mode = path.lstat().st_mode
        assert stat.S_ISDIR(mode) or stat.S_ISREG(mode), path
        assert path.resolve().is_relative_to((parent / "root").resolve())
        entry = path.name
        assert entry in generated or (entry.isascii() and entry.isalnum() and len(entry) in (10, 64)), entry


@pytest.mark.parametrize(("name", "rule"), list(HOSTILE.items()), ids=lambda v: ascii(v)[:40])
def test_a_hostile_name_is_refused_before_anything_is_written(tmp_dir: Path, name: str, rule: str) -> None:
    services: list[BaseArtifactService] = [FileArtifactService(tmp_dir / "root"), InMemoryArtifactService()]
    before = sorted((tmp_dir / "root").rglob("*"))
    for service in services:
        calls = [
            lambda s: s.put(SCOPE, name, b"x"),
            lambda s: s.get(SCOPE, name),
            lambda s: s.list_versions(SCOPE, name),
            lambda s: s.delete(SCOPE, name),
        ]
        for call in calls:
            with pytest.raises(ValidationError) as excinfo:
                call(service)
            assert excinfo.value.reason == "invalid_artifact_name" and excinfo.value.details == {"rule": rule}
        assert service.list_names(SCOPE) == ([], None)
    assert sorted((tmp_dir / "root").rglob("*")) == before
    assert_contained(tmp_dir)


@pytest.mark.parametrize("value", ["", "a\x00b", "../x\n", "x" * 257, "\u202e", "\ud800"])
def test_hostile_scope_ids_are_refused(value: str) -> None:
    for build in (
        lambda: ArtifactScope.app(value),
        lambda: ArtifactScope.user("app", value),
        lambda: ArtifactScope.session("app", "user", value),
    ):
        with pytest.raises(ValidationError) as excinfo:
            build()
        assert excinfo.value.reason == "invalid_artifact_scope"


def accepted(name: str) -> bool:
    """The name rules, restated independently of the implementation."""
    segments = name.split("/")
    return (
        1 <= len(name) <= 256
        and name.isprintable()
        and "\\" not in name
        and unicodedata.normalize("NFC", name) == name
        and len(segments) <= 16
        and all(s not in ("", ".", "..") for s in segments)
    )


PIECES = st.sampled_from(["..", ".", "", "a", "é", "e\u0301", "\x00", "\\", "\u202e", " ", "~", "%2e%2e", "C:"])
NAMES = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=20).map("/".join),
    st.lists(PIECES, min_size=1, max_size=6).map("".join),
    st.builds(lambda head, tail: "/" + head + tail, st.text(max_size=10), PIECES),
)


def test_any_name_is_refused_or_round_trips_and_stays_inside_the_root(tmp_dir: Path) -> None:
    service = FileArtifactService(tmp_dir / "root", max_artifact_bytes=64)
    memory = InMemoryArtifactService(max_artifact_bytes=64)
    stored: set[str] = set()

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(name=NAMES, data=st.binary(max_size=64))
    def check(name: str, data: bytes) -> None:
        outcomes: list[Any] = []
        for svc in (service, memory):
            try:
                info = svc.put(SCOPE, name, data)
            except ValidationError as exc:
                assert exc.reason == "invalid_artifact_name"
                outcomes.append(exc.details["rule"])
            else:
                got = svc.get(SCOPE, name)
                assert (got.name, got.data, got.version) == (name, data, info.version)
                outcomes.append("stored")
        assert outcomes[0] == outcomes[1]
        assert (outcomes[0] == "stored") == accepted(name)
        if outcomes[0] == "stored":
            assert check_artifact_name(name) == name
            stored.add(name)

    check()
    names: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = service.list_names(SCOPE, limit=100, cursor=cursor)
        names.extend(page)
        if cursor is None:
            break
    assert names == sorted(stored) and stored
    assert_contained(tmp_dir)
