"""``FileArtifactService``: durable artifacts in a directory tree on one host.

Layout under the root (every directory a real one, opened relative to its parent without following symlinks)::

    scope-slots/<n>                      one exclusive slot per scope ever admitted (n = 1, 2, ...)
    scopes/<sha256 of scope>/
        scope.json                       the scope, checked on every use
        name-slots/<n>                   one exclusive slot per name ever admitted in this scope
        names/<sha256 of name>/
            name.json                    the scope and the name, checked on every use
            reservations/<version>       created exclusively (O_CREAT|O_EXCL) before any byte is written
            tmp/<version>.<random>       a version being written
            versions/<version>           header (scope, name, version, size, digest, MIME type, metadata) + bytes

Scopes and names only appear hashed in paths, so no name can reach outside the root. A version number is taken
by creating its reservation file exclusively, and reservations are never removed: two services on the same root
(in two processes, or one after a restart) never hand out the same number, and a version whose writer died or
that was deleted is never given out again. The bytes go to a temporary file that is flushed to disk and then
renamed into ``versions/``, so a version is either absent or complete. Slots bound the lifetime scopes and names
the same way: deleting does not give capacity back.

The adapter does not encrypt anything; use permissions (it creates directories 0700 and files 0600) and an
encrypted volume where confidentiality matters. Temporary files of writers that died stay in ``tmp/``; they are
never read.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import re
import secrets
import stat
import struct
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from adk_actors.artifacts.base import (
    DEFAULT_MAX_ARTIFACT_BYTES,
    DEFAULT_MAX_SCAN_ENTRIES,
    DEFAULT_MIME_TYPE,
    Artifact,
    ArtifactScope,
    ArtifactVersion,
    BytesLike,
    Capacities,
    Clock,
    MetadataValue,
    check_artifact_name,
    check_metadata,
    check_put,
    check_scope,
    check_version,
    digest_of,
    not_found,
    page_names,
    verified_artifact,
)
from adk_actors.content.parts import check_mime_type
from adk_actors.errors import AdkError, StorageError, ValidationError

__all__ = ["FileArtifactService"]

_DIR_MODE = 0o700
_FILE_MODE = 0o600
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_MAGIC = b"adk-artifact/1\n"
_HEADER_LEN = struct.Struct(">I")
_MAX_RECORD_BYTES = 64 * 1024
"""Bound on ``scope.json``, ``name.json`` and a version header."""
_NUMBER_RE = re.compile(r"[0-9]{10,19}")
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
_HEADER_KEYS = frozenset({"scope", "name", "version", "size", "digest", "mime_type", "metadata", "created_at"})


def _number_name(number: int) -> str:
    return f"{number:010d}"


def _canonical(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _scope_hash(scope: ArtifactScope) -> str:
    return hashlib.sha256(b"scope\x00" + _canonical(list(scope.key))).hexdigest()


def _name_hash(name: str) -> str:
    return hashlib.sha256(b"name\x00" + name.encode("utf-8")).hexdigest()


def _corrupt(rule: str, **details: Any) -> StorageError:
    return StorageError(
        "stored artifact data failed verification", reason="artifact_corrupt", details={"rule": rule, **details}
    )


def _symlink_refused(entry: str) -> StorageError:
    return StorageError("the artifact store refuses symbolic links", reason="symlink_refused", details={"entry": entry})


class FileArtifactService:
    """Artifacts in a directory tree; safe for several threads, processes and service instances on one root.

    Args:
        root: the store's directory; created (with its parents) when missing. It must be a real directory, not
            a symbolic link; so must every directory the service creates under it.
        max_artifact_bytes: bound on one version's bytes (``artifact_too_large`` above it).
        max_scan_entries: bound on one directory scan; the lifetime capacities derive from it
            (:class:`~adk_actors.artifacts.base.Capacities`): ``// 3`` versions per name, ``// 2`` names per
            scope and ``// 2`` scopes per root.
        clock: wall-clock seconds for ``created_at``.

    The service pickles as its root and options (a clock must be picklable too) and holds no open file between
    calls, so a copy sent to another process works on the same store.

    Raises:
        ConfigError: reason ``invalid_value`` for an option out of range.
        StorageError: ``symlink_refused`` (the root is a symbolic link), ``artifact_root_not_a_directory``, or
            ``artifact_io_error`` when the root cannot be created or opened.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES,
        max_scan_entries: int = DEFAULT_MAX_SCAN_ENTRIES,
        clock: Clock = time.time,
    ) -> None:
        self.root = Path(os.path.abspath(os.fspath(root)))
        self.capacities = Capacities(max_artifact_bytes=max_artifact_bytes, max_scan_entries=max_scan_entries)
        self._clock = clock
        with contextlib.suppress(OSError):
            # A failure here (a file or a dangling link in the way) is classified by opening the root below.
            os.makedirs(self.root, mode=_DIR_MODE, exist_ok=True)
        with self._guard("open"), self._open_root() as root_fd:
            for top in ("scopes", "scope-slots"):
                os.close(self._make_dir(root_fd, top, top))

    def __repr__(self) -> str:
        return f"FileArtifactService({str(self.root)!r}, max_artifact_bytes={self.capacities.max_artifact_bytes})"

    def __reduce__(self) -> tuple[Any, ...]:
        caps = self.capacities
        return (_reopen, (type(self), str(self.root), caps.max_artifact_bytes, caps.max_scan_entries, self._clock))

    # -- the contract ------------------------------------------------------------------------------------------

    def put(
        self,
        scope: ArtifactScope,
        name: str,
        data: BytesLike,
        *,
        mime_type: str = DEFAULT_MIME_TYPE,
        metadata: Mapping[str, MetadataValue] | None = None,
    ) -> ArtifactVersion:
        """Store ``data`` as the next version of ``name`` in ``scope`` (see ``BaseArtifactService.put``).

        The version number is reserved durably before the bytes are written; if anything fails after that, the
        number stays spent.
        """
        raw, meta = check_put(scope, name, data, mime_type, metadata, self.capacities.max_artifact_bytes)
        digest = digest_of(raw)  # before the reservation: keep the window a crash can interrupt short
        with self._guard("put"), contextlib.ExitStack() as stack:
            root_fd = stack.enter_context(self._open_root())
            scope_fd = self._admit_scope(stack, root_fd, scope)
            name_fd = self._admit_name(stack, scope_fd, scope, name)
            reservations = self._enter(stack, self._make_dir(name_fd, "reservations", "reservations"))
            number = self._claim(
                reservations,
                self.capacities.max_versions_per_name,
                lambda: self.capacities.version_capacity_error(scope, name),
            )
            info = ArtifactVersion(
                scope=scope,
                name=name,
                version=number,
                digest=digest,
                size=len(raw),
                mime_type=mime_type,
                metadata=meta,
                created_at=float(self._clock()),
            )
            self._write_version(name_fd, number, _encode(info, raw))
        return info

    def get(self, scope: ArtifactScope, name: str, version: int | None = None) -> Artifact:
        """A version with its bytes, verified (see ``BaseArtifactService.get``).

        Raises:
            StorageError: ``artifact_not_found``; ``artifact_corrupt`` when the stored scope, name, version, size
                or digest does not match; ``symlink_refused``.
        """
        check_scope(scope)
        check_artifact_name(name)
        if version is not None:
            check_version(version)
        with self._guard("get"), contextlib.ExitStack() as stack:
            versions = self._versions_dir(stack, scope, name)
            if versions is not None:
                candidates = [version] if version is not None else sorted(self._numbers(versions), reverse=True)
                for number in candidates:
                    # A version deleted between the listing and the read is skipped, not reported as corrupt.
                    found = self._read_version(versions, scope, name, number, with_data=True)
                    if found is not None:
                        assert isinstance(found, Artifact)
                        return found
        raise not_found(scope, name, version)

    def list_names(
        self, scope: ArtifactScope, *, limit: int = 100, cursor: str | None = None
    ) -> tuple[list[str], str | None]:
        """A page of names with at least one stored version (see ``BaseArtifactService.list_names``)."""
        check_scope(scope)
        names: list[str] = []
        with self._guard("list_names"), contextlib.ExitStack() as stack:
            scope_fd = self._scope_dir(stack, scope)
            names_fd = self._find_dir(scope_fd, "names", "names") if scope_fd is not None else None
            if names_fd is not None:
                stack.callback(os.close, names_fd)
                for entry in self._entries(names_fd):
                    name = self._live_name(names_fd, entry, scope)
                    if name is not None:
                        names.append(name)
        return page_names(names, limit, cursor)

    def list_versions(self, scope: ArtifactScope, name: str) -> list[ArtifactVersion]:
        """The stored versions of ``name``, oldest first (see ``BaseArtifactService.list_versions``).

        Each header is checked against the scope, name, version and file size; ``get`` checks the digest too.
        """
        check_scope(scope)
        check_artifact_name(name)
        out: list[ArtifactVersion] = []
        with self._guard("list_versions"), contextlib.ExitStack() as stack:
            versions = self._versions_dir(stack, scope, name)
            if versions is not None:
                for number in sorted(self._numbers(versions)):
                    found = self._read_version(versions, scope, name, number, with_data=False)
                    if found is not None:
                        out.append(found)
        return out

    def delete(self, scope: ArtifactScope, name: str, version: int | None = None) -> int:
        """Delete one version or all; returns the count (see ``BaseArtifactService.delete``).

        The reservations stay, so deleted numbers are never given out again.
        """
        check_scope(scope)
        check_artifact_name(name)
        if version is not None:
            check_version(version)
        count = 0
        with self._guard("delete"), contextlib.ExitStack() as stack:
            versions = self._versions_dir(stack, scope, name)
            if versions is None:
                return 0
            for number in [version] if version is not None else self._numbers(versions):
                try:
                    os.unlink(_number_name(number), dir_fd=versions)
                except FileNotFoundError:  # already gone (a concurrent delete)
                    continue
                count += 1
            if count:
                os.fsync(versions)
        return count

    # -- writing a version ---------------------------------------------------------------------------------------

    def _write_version(self, name_fd: int, number: int, blob: bytes) -> None:
        """Write a reserved version: a temporary file, flushed, then renamed into ``versions/``."""
        with contextlib.ExitStack() as stack:
            tmp = self._enter(stack, self._make_dir(name_fd, "tmp", "tmp"))
            versions = self._enter(stack, self._make_dir(name_fd, "versions", "versions"))
            temp_name = f"{_number_name(number)}.{secrets.token_hex(8)}"
            try:
                self._write_file(tmp, temp_name, blob)
                os.rename(temp_name, _number_name(number), src_dir_fd=tmp, dst_dir_fd=versions)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp_name, dir_fd=tmp)
                raise
            os.fsync(versions)

    # -- directories -------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _guard(self, op: str) -> Iterator[None]:
        """Turn an unexpected OS error into a ``StorageError`` naming the operation and the errno only."""
        try:
            yield
        except AdkError:
            raise
        except OSError as exc:
            code = errno.errorcode.get(exc.errno or 0, "unknown")
            raise StorageError(
                "the artifact store failed", reason="artifact_io_error", details={"op": op, "errno": code}
            ) from None

    @contextlib.contextmanager
    def _open_root(self) -> Iterator[int]:
        try:
            fd = os.open(self.root, _OPEN_DIR)
        except OSError as exc:
            try:
                mode = os.lstat(self.root).st_mode
            except OSError:
                mode = None
            if mode is not None and stat.S_ISLNK(mode):
                raise _symlink_refused("root") from None
            if mode is None or not stat.S_ISDIR(mode) or exc.errno in (errno.ENOTDIR, errno.ENOENT):
                raise StorageError(
                    "the artifact root is not a directory", reason="artifact_root_not_a_directory", details={}
                ) from None
            raise
        try:
            yield fd
        finally:
            os.close(fd)

    @staticmethod
    def _enter(stack: contextlib.ExitStack, fd: int) -> int:
        stack.callback(os.close, fd)
        return fd

    def _make_dir(self, parent: int, entry: str, role: str) -> int:
        """Open ``entry`` under ``parent`` as a real directory, creating it when missing."""
        try:
            os.mkdir(entry, _DIR_MODE, dir_fd=parent)
        except FileExistsError:
            pass
        else:
            os.fsync(parent)
        fd = self._find_dir(parent, entry, role)
        if fd is None:  # directories are never removed: only someone else's hand does that
            raise _corrupt("directory_vanished", entry=role)
        return fd

    def _find_dir(self, parent: int, entry: str, role: str) -> int | None:
        """Open ``entry`` under ``parent`` as a real directory, or ``None`` when it does not exist."""
        try:
            return os.open(entry, _OPEN_DIR, dir_fd=parent)
        except FileNotFoundError:
            return None
        except OSError:
            mode = os.stat(entry, dir_fd=parent, follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                raise _symlink_refused(role) from None
            if not stat.S_ISDIR(mode):
                raise _corrupt("not_a_directory", entry=role) from None
            raise

    def _entries(self, dir_fd: int) -> list[str]:
        """The entries of a directory (temporary ones skipped), refusing to visit more than the scan bound."""
        limit = self.capacities.max_scan_entries
        out: list[str] = []
        with os.scandir(dir_fd) as it:
            for item in it:
                if item.name.startswith("."):
                    continue
                if len(out) >= limit:
                    raise StorageError(
                        "a directory of the artifact store holds more entries than the scan bound",
                        reason="artifact_scan_limit_reached",
                        details={"max_scan_entries": limit},
                    )
                out.append(item.name)
        return out

    def _numbers(self, dir_fd: int) -> list[int]:
        return [int(e) for e in self._entries(dir_fd) if _NUMBER_RE.fullmatch(e) and _number_name(int(e)) == e]

    def _claim(self, slots: int, capacity: int, full: Callable[[], StorageError], content: bytes = b"") -> int:
        """Take the lowest free number above every number taken in ``slots``, by exclusive creation."""
        number = max(self._numbers(slots), default=0) + 1
        while True:
            if number > capacity:
                raise full()
            if self._create_exclusive(slots, _number_name(number), content):
                return number
            number += 1

    # -- admission ---------------------------------------------------------------------------------------------

    def _admit_scope(self, stack: contextlib.ExitStack, root_fd: int, scope: ArtifactScope) -> int:
        scopes = self._enter(stack, self._make_dir(root_fd, "scopes", "scopes"))
        digest = _scope_hash(scope)
        fd = self._find_dir(scopes, digest, "scope")
        if fd is None:
            slots = self._enter(stack, self._make_dir(root_fd, "scope-slots", "scope-slots"))
            self._claim(slots, self.capacities.max_scopes, self.capacities.scope_capacity_error, digest.encode())
            fd = self._make_dir(scopes, digest, "scope")
        self._enter(stack, fd)
        self._ensure_record(fd, "scope.json", {"format": 1, "scope": list(scope.key)}, create=True)
        return fd

    def _admit_name(self, stack: contextlib.ExitStack, scope_fd: int, scope: ArtifactScope, name: str) -> int:
        names = self._enter(stack, self._make_dir(scope_fd, "names", "names"))
        digest = _name_hash(name)
        fd = self._find_dir(names, digest, "name")
        if fd is None:
            slots = self._enter(stack, self._make_dir(scope_fd, "name-slots", "name-slots"))
            self._claim(
                slots,
                self.capacities.max_names_per_scope,
                lambda: self.capacities.name_capacity_error(scope),
                digest.encode(),
            )
            fd = self._make_dir(names, digest, "name")
        self._enter(stack, fd)
        self._ensure_record(fd, "name.json", _name_record(scope, name), create=True)
        return fd

    def _scope_dir(self, stack: contextlib.ExitStack, scope: ArtifactScope) -> int | None:
        """The scope's directory for reading, or ``None`` when the scope never stored anything."""
        root_fd = stack.enter_context(self._open_root())
        scopes = self._find_dir(root_fd, "scopes", "scopes")
        if scopes is None:
            return None
        self._enter(stack, scopes)
        fd = self._find_dir(scopes, _scope_hash(scope), "scope")
        if fd is None:
            return None
        self._enter(stack, fd)
        record = {"format": 1, "scope": list(scope.key)}
        return fd if self._ensure_record(fd, "scope.json", record, create=False) else None

    def _versions_dir(self, stack: contextlib.ExitStack, scope: ArtifactScope, name: str) -> int | None:
        """The ``versions/`` directory of ``name`` for reading, or ``None`` when the name never stored anything."""
        scope_fd = self._scope_dir(stack, scope)
        if scope_fd is None:
            return None
        names = self._find_dir(scope_fd, "names", "names")
        if names is None:
            return None
        self._enter(stack, names)
        name_fd = self._find_dir(names, _name_hash(name), "name")
        if name_fd is None:
            return None
        self._enter(stack, name_fd)
        if not self._ensure_record(name_fd, "name.json", _name_record(scope, name), create=False):
            return None
        versions = self._find_dir(name_fd, "versions", "versions")
        return self._enter(stack, versions) if versions is not None else None

    def _live_name(self, names_fd: int, entry: str, scope: ArtifactScope) -> str | None:
        """The name stored under ``entry`` if it has at least one stored version."""
        with contextlib.ExitStack() as stack:
            name_fd = self._find_dir(names_fd, entry, "name")
            if name_fd is None:
                return None
            self._enter(stack, name_fd)
            raw = self._read_small(name_fd, "name.json", "name.json")
            if raw is None:
                return None  # an admission that did not finish: nothing was stored under it
            record = _parse_record(raw, "name.json")
            name = record.get("name")
            if (
                not isinstance(name, str)
                or record != _name_record(scope, name)
                or _name_hash(name) != entry
                or not _valid_name(name)
            ):
                raise _corrupt("record_mismatch", entry="name.json")
            versions = self._find_dir(name_fd, "versions", "versions")
            if versions is None:
                return None
            self._enter(stack, versions)
            return name if self._numbers(versions) else None

    # -- files -------------------------------------------------------------------------------------------------

    def _create_exclusive(self, dir_fd: int, entry: str, content: bytes) -> bool:
        """Create ``entry`` only if it does not exist, durably; ``False`` when someone else holds it."""
        try:
            fd = os.open(entry, _CREATE, _FILE_MODE, dir_fd=dir_fd)
        except FileExistsError:
            return False
        try:
            _write_all(fd, content)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.fsync(dir_fd)
        return True

    def _write_file(self, dir_fd: int, entry: str, content: bytes) -> None:
        fd = os.open(entry, _CREATE, _FILE_MODE, dir_fd=dir_fd)
        try:
            _write_all(fd, content)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _read_small(self, dir_fd: int, entry: str, role: str) -> bytes | None:
        try:
            fd = os.open(entry, _OPEN_READ, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _symlink_refused(role) from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise _corrupt("not_a_file", entry=role)
            data = _read_up_to(fd, _MAX_RECORD_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > _MAX_RECORD_BYTES:
            raise _corrupt("record_too_large", entry=role)
        return data

    def _ensure_record(self, dir_fd: int, entry: str, expected: dict[str, Any], *, create: bool) -> bool:
        """Check ``entry`` holds ``expected``; write it when missing and ``create`` (``False``: it is missing)."""
        raw = self._read_small(dir_fd, entry, entry)
        if raw is None:
            if not create:
                return False
            # Concurrent writers write the same bytes, and each rename is atomic.
            temp = f".{entry}.{secrets.token_hex(8)}"
            try:
                self._write_file(dir_fd, temp, _canonical(expected))
                os.rename(temp, entry, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=dir_fd)
                raise
            os.fsync(dir_fd)
            return True
        if _parse_record(raw, entry) != expected:
            raise _corrupt("record_mismatch", entry=entry)
        return True

    def _read_version(
        self, versions: int, scope: ArtifactScope, name: str, number: int, *, with_data: bool
    ) -> ArtifactVersion | None:
        """Read and verify one version; ``None`` when it is not there."""
        where = {"scope": scope.describe(), "name": name, "version": number}
        try:
            fd = os.open(_number_name(number), _OPEN_READ, dir_fd=versions)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _symlink_refused("version") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _corrupt("not_a_file", **where)
            prefix = _read_up_to(fd, len(_MAGIC) + _HEADER_LEN.size)
            if len(prefix) != len(_MAGIC) + _HEADER_LEN.size or not prefix.startswith(_MAGIC):
                raise _corrupt("bad_header", **where)
            (header_len,) = _HEADER_LEN.unpack(prefix[len(_MAGIC) :])
            if header_len > _MAX_RECORD_BYTES:
                raise _corrupt("bad_header", **where)
            header_raw = _read_up_to(fd, header_len)
            if len(header_raw) != header_len:
                raise _corrupt("bad_header", **where)
            info = _decode_header(header_raw, scope, name, number, where)
            if st.st_size != len(prefix) + header_len + info.size:
                raise _corrupt("size_mismatch", **where)
            if not with_data:
                return info
            data = _read_up_to(fd, info.size + 1)
        finally:
            os.close(fd)
        return verified_artifact(info, data, **where)


def _reopen(
    cls: type[FileArtifactService], root: str, max_artifact_bytes: int, max_scan_entries: int, clock: Clock
) -> FileArtifactService:
    return cls(root, max_artifact_bytes=max_artifact_bytes, max_scan_entries=max_scan_entries, clock=clock)


def _valid_name(name: str) -> bool:
    try:
        check_artifact_name(name)
    except ValidationError:
        return False
    return True


def _name_record(scope: ArtifactScope, name: str) -> dict[str, Any]:
    return {"format": 1, "scope": list(scope.key), "name": name}


def _parse_record(raw: bytes, entry: str) -> dict[str, Any]:
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _corrupt("record_unreadable", entry=entry) from None
    if not isinstance(record, dict):
        raise _corrupt("record_unreadable", entry=entry)
    return record


def _write_all(fd: int, content: bytes) -> None:
    view = memoryview(content)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_up_to(fd: int, count: int) -> bytes:
    chunks: list[bytes] = []
    left = count
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _encode(info: ArtifactVersion, data: bytes) -> bytes:
    header = _canonical(
        {
            "scope": list(info.scope.key),
            "name": info.name,
            "version": info.version,
            "size": info.size,
            "digest": info.digest,
            "mime_type": info.mime_type,
            "metadata": info.metadata,
            "created_at": info.created_at,
        }
    )
    return _MAGIC + _HEADER_LEN.pack(len(header)) + header + data


def _decode_header(raw: bytes, scope: ArtifactScope, name: str, number: int, where: dict[str, Any]) -> ArtifactVersion:
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _corrupt("bad_header", **where) from None
    if not isinstance(header, dict) or set(header) != _HEADER_KEYS:
        raise _corrupt("bad_header", **where)
    if header["scope"] != list(scope.key):
        raise _corrupt("scope_mismatch", **where)
    if header["name"] != name:
        raise _corrupt("name_mismatch", **where)
    if header["version"] != number or isinstance(header["version"], bool):
        raise _corrupt("version_mismatch", **where)
    size, digest, created_at = header["size"], header["digest"], header["created_at"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise _corrupt("bad_header", **where)
    if not isinstance(digest, str) or not _DIGEST_RE.fullmatch(digest):
        raise _corrupt("bad_header", **where)
    if isinstance(created_at, bool) or not isinstance(created_at, int | float) or not math.isfinite(created_at):
        raise _corrupt("bad_header", **where)
    try:
        mime_type = check_mime_type(header["mime_type"])
        metadata = check_metadata(header["metadata"])
    except ValidationError:
        raise _corrupt("bad_header", **where) from None
    return ArtifactVersion(
        scope=scope,
        name=name,
        version=number,
        digest=digest,
        size=size,
        mime_type=mime_type,
        metadata=metadata,
        created_at=float(created_at),
    )
