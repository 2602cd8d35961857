"""The knowledge folder: paths, reading every record with per-file errors, staged writes.

Reading never writes. Every write of a record goes through :meth:`Store.stage` and
:meth:`Store.install`: a uniquely named file in ``staging/`` (``O_EXCL``), written,
fsynced, then ``os.replace``-d into ``records/<kind>/<id>.md`` and the folder fsynced, so
a reader sees the old bytes or the new, never a mix. ``os.replace`` appears nowhere else
in the package (an AST test keeps it so).
"""

from __future__ import annotations

import os
import secrets
import stat as stat_mod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memidex.config import Config
from memidex.errors import ConflictError, Problem, RecordError, UnsafePathError
from memidex.records.codec import content_hash, dump_record, parse_record_bytes
from memidex.records.ids import ID_RE
from memidex.records.model import KINDS, Policy, Record
from memidex.records.policy import parse_policies

__all__ = ["FileStat", "LoadedRecord", "StagedFile", "Store", "fsync_dir", "swap_into_place"]


@dataclass(frozen=True, slots=True)
class FileStat:
    """A record or policy file as the staleness check sees it."""

    relpath: str  # relative to the repository root, '/'-separated
    size: int
    mtime_ns: int
    ino: int


@dataclass(frozen=True, slots=True)
class LoadedRecord:
    relpath: str
    record: Record
    sha256: str
    stat: FileStat


@dataclass(frozen=True, slots=True)
class StagedFile:
    staged: Path
    target: Path
    sha256: str


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap_into_place(src: Path, dst: Path) -> None:
    """Atomically rename ``src`` over ``dst`` (same folder) and fsync the folder.

    Used for derived files (the index); records go through :meth:`Store.install`.
    """
    os.replace(src, dst)
    fsync_dir(dst.parent)


class Store:
    """Paths and file I/O of one repository's knowledge folder and policies."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.root = config.root
        self.knowledge = config.knowledge_path
        self.records_dir = self.knowledge / "records"
        self.staging_dir = self.knowledge / "staging"
        self.queue_dir = self.knowledge / "queue"
        self.index_dir = self.knowledge / "index"
        self.policies_dir = config.policies_path

    # --- paths ---------------------------------------------------------------------

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()

    def record_path(self, kind: str, record_id: str) -> Path:
        """``records/<kind>/<id>.md``; refuses anything that could leave the folder."""
        if kind not in KINDS:
            raise UnsafePathError(f"unknown record kind {kind!r}")
        if not ID_RE.fullmatch(record_id):
            raise UnsafePathError(f"{record_id!r} is not a record id")
        return self.records_dir / kind / f"{record_id}.md"

    def abspath(self, relpath: str) -> Path:
        """A stored root-relative path back to a file, refusing escapes."""
        if relpath.startswith("/") or ".." in relpath.split("/"):
            raise UnsafePathError(f"{relpath!r} leaves the repository")
        return self.root / relpath

    # --- reading -------------------------------------------------------------------

    def scan_records(self) -> tuple[list[FileStat], list[Problem]]:
        """Every ``*.md`` under ``records/`` (sorted), and symlinks that escape it."""
        out: list[FileStat] = []
        problems: list[Problem] = []
        if not self.records_dir.is_dir():
            return out, problems
        base = self.records_dir.resolve()
        stack = [self.records_dir]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError as exc:
                problems.append(Problem(self.rel(folder), 0, f"cannot read folder: {exc}"))
                continue
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                path = Path(entry.path)
                if entry.is_symlink():
                    target = path.resolve()
                    if not target.is_relative_to(base):
                        problems.append(Problem(self.rel(path), 0,
                                                "symlink points outside the records folder"))
                        continue
                if entry.is_dir():
                    if not entry.is_symlink():
                        stack.append(path)
                    continue
                if not name.endswith(".md"):
                    continue
                try:
                    st = entry.stat()
                except OSError as exc:
                    problems.append(Problem(self.rel(path), 0, f"cannot read: {exc}"))
                    continue
                if not stat_mod.S_ISREG(st.st_mode):
                    continue
                out.append(FileStat(self.rel(path), st.st_size, st.st_mtime_ns, st.st_ino))
        out.sort(key=lambda f: f.relpath)
        return out, problems

    def scan_policies(self) -> list[FileStat]:
        if not self.policies_dir.is_dir():
            return []
        out = []
        for entry in os.scandir(self.policies_dir):
            if entry.name.startswith(".") or not entry.name.endswith((".yaml", ".yml")):
                continue
            if entry.is_file():
                st = entry.stat()
                out.append(FileStat(self.rel(Path(entry.path)), st.st_size, st.st_mtime_ns,
                                    st.st_ino))
        out.sort(key=lambda f: f.relpath)
        return out

    def read_bytes(self, relpath: str) -> bytes:
        return self.abspath(relpath).read_bytes()

    def load(self, fs: FileStat) -> LoadedRecord:
        """Parse one record file; :class:`RecordError` when it is bad (the file is untouched)."""
        try:
            data = self.read_bytes(fs.relpath)
        except OSError as exc:
            raise RecordError([Problem(fs.relpath, 0, f"cannot read: {exc.strerror}")]) from None
        record = parse_record_bytes(data, fs.relpath)
        return LoadedRecord(fs.relpath, record, content_hash(data), fs)

    def iter_records(self, files: list[FileStat] | None = None
                     ) -> Iterator[LoadedRecord | Problem]:
        """Each record file in path order: a loaded record, or the first problem in it."""
        if files is None:
            files, problems = self.scan_records()
            yield from problems
        for fs in files:
            try:
                yield self.load(fs)
            except RecordError as exc:
                yield from exc.problems

    def load_policies(self, files: list[FileStat] | None = None
                      ) -> tuple[list[tuple[FileStat, str, list[Policy]]], list[Problem]]:
        """Every policy file: (stat, content hash, policies), plus the files that are bad."""
        out: list[tuple[FileStat, str, list[Policy]]] = []
        problems: list[Problem] = []
        for fs in self.scan_policies() if files is None else files:
            try:
                data = self.read_bytes(fs.relpath)
                out.append((fs, content_hash(data), parse_policies(data, fs.relpath)))
            except RecordError as exc:
                problems.extend(exc.problems)
            except OSError as exc:
                problems.append(Problem(fs.relpath, 0, f"cannot read: {exc.strerror}"))
        return out, problems

    def current_hash(self, target: Path) -> str | None:
        try:
            return content_hash(target.read_bytes())
        except FileNotFoundError:
            return None

    # --- writing -------------------------------------------------------------------

    def stage(self, record: Record) -> StagedFile:
        """Write ``record`` canonically to a unique file in ``staging/`` and fsync it."""
        target = self.record_path(record.kind, record.id)
        data = dump_record(record).encode("utf-8")
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        staged = self.staging_dir / f"{record.id}.{os.getpid()}.{secrets.token_hex(6)}.md"
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            staged.unlink(missing_ok=True)
            raise
        os.close(fd)
        return StagedFile(staged, target, content_hash(data))

    def install(self, staged: StagedFile, *, expected: str | None | bool = False) -> None:
        """Move a staged file into place atomically and fsync its folder.

        ``expected`` guards against clobbering a person's edit: the content hash the
        caller read (``None`` = the file must not exist yet); ``False`` skips the check.
        """
        if expected is not False:
            now = self.current_hash(staged.target)
            if now != expected:
                self.discard(staged)
                raise ConflictError(
                    f"{self.rel(staged.target)} changed on disk since it was read; not replaced"
                )
        staged.target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged.staged, staged.target)
        fsync_dir(staged.target.parent)

    def discard(self, staged: StagedFile) -> None:
        staged.staged.unlink(missing_ok=True)

    def write_record(self, record: Record, *, expected: str | None | bool = False) -> bool:
        """Stage and install ``record``; returns False (and writes nothing) if unchanged."""
        target = self.record_path(record.kind, record.id)
        try:
            existing = parse_record_bytes(target.read_bytes(), self.rel(target))
        except (FileNotFoundError, RecordError):
            existing = None
        if existing == record:
            return False
        staged = self.stage(record)
        self.install(staged, expected=expected)
        return True

    def remove(self, relpath: str) -> None:
        path = self.abspath(relpath)
        path.unlink()
        fsync_dir(path.parent)
