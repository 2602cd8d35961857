"""The knowledge folder: paths, reading every record with per-file errors, staged writes.

Reading never writes. Every write of a record goes through :meth:`Store.stage` and
:meth:`Store.install`: a uniquely named file in ``staging/`` (``O_EXCL``), written,
fsynced, then ``os.replace``-d into ``records/<kind>/<id>.md`` and the folder fsynced, so
a reader sees the old bytes or the new, never a mix (the file operations are
:mod:`memidex.store.fsio`'s, the package's one implementation).
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
from collections.abc import Iterator
from pathlib import Path

from memidex.config import Config
from memidex.errors import ConfigError, ConflictError, Problem, RecordError, UnsafePathError
from memidex.plain import Frozen, Plain, set_field
from memidex.records.ids import ID_RE
from memidex.records.vocab import KINDS
from memidex.store import fsio

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from memidex.records.model import Policy, Record

__all__ = ["DirScan", "FileStat", "LoadedRecord", "StagedFile", "Store", "check_rel",
           "read_file"]


class FileStat(Frozen):
    """A record or policy file as the staleness check sees it (``relpath``: relative to
    the repository root, '/'-separated)."""

    __slots__ = ("relpath", "size", "mtime_ns", "ino")
    relpath: str
    size: int
    mtime_ns: int
    ino: int

    def __init__(self, relpath: str, size: int, mtime_ns: int, ino: int) -> None:
        set_field(self, "relpath", relpath)
        set_field(self, "size", size)
        set_field(self, "mtime_ns", mtime_ns)
        set_field(self, "ino", ino)


class DirScan(Plain):
    """What one folder holds right now."""

    __slots__ = ("rel", "mtime_ns", "missing", "files", "subdirs", "problems")

    def __init__(self, rel: str, mtime_ns: int = 0, missing: bool = False,
                 files: list[FileStat] | None = None, subdirs: list[str] | None = None,
                 problems: list[Problem] | None = None) -> None:
        self.rel = rel
        self.mtime_ns = mtime_ns
        self.missing = missing
        self.files: list[FileStat] = [] if files is None else files
        self.subdirs: list[str] = [] if subdirs is None else subdirs
        self.problems: list[Problem] = [] if problems is None else problems


class LoadedRecord(Frozen):
    """A record read from its file: where, what, the file's hash and stat."""

    __slots__ = ("relpath", "record", "sha256", "stat")
    relpath: str
    record: Record
    sha256: str
    stat: FileStat

    def __init__(self, relpath: str, record: Record, sha256: str, stat: FileStat) -> None:
        set_field(self, "relpath", relpath)
        set_field(self, "record", record)
        set_field(self, "sha256", sha256)
        set_field(self, "stat", stat)


class StagedFile(Frozen):
    """A file written in ``staging/``, to be installed at ``target`` (both absolute paths
    as plain strings: a change set stages hundreds, and pathlib costs ~10 us a path)."""

    __slots__ = ("staged", "target", "sha256")
    staged: str
    target: str
    sha256: str

    def __init__(self, staged: str, target: str, sha256: str) -> None:
        set_field(self, "staged", staged)
        set_field(self, "target", target)
        set_field(self, "sha256", sha256)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def read_file(path: str | Path) -> bytes:
    """A whole file's bytes through ``os`` (open, read to the end, close): the built-in
    ``open``'s buffered reader costs ~3 us more a file, and a change set reads hundreds."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, _READ_SIZE)
        if not data:
            return data
        chunks = [data]
        while chunk := os.read(fd, _READ_SIZE):  # (a regular file reads short only at EOF)
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


_READ_SIZE = 1 << 16


def _record_name(kind: str, record_id: str) -> str:
    """``<kind>/<id>.md`` within the records folder; refuses an unknown kind or anything
    but a record id (so neither can hold a ``/`` or leave the folder)."""
    if kind not in KINDS:
        raise UnsafePathError(f"unknown record kind {kind!r}")
    if not ID_RE.fullmatch(record_id):
        raise UnsafePathError(f"{record_id!r} is not a record id")
    return f"{kind}/{record_id}.md"


def check_rel(relpath: str) -> str:
    """The one path-escape check: ``relpath`` must be relative and free of ``..`` parts
    (and NUL). Returns it unchanged, or raises :class:`UnsafePathError`."""
    if relpath.startswith("/") or "/../" in f"/{relpath}/" or "\0" in relpath:
        raise UnsafePathError(f"{relpath!r} leaves the repository")
    return relpath


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
        self._root_prefix = f"{self.root}/" if os.sep == "/" else ""
        self._rels: dict[str, tuple[Path, str]] = {}  # records_rel, policies_rel: memo

    # --- paths ---------------------------------------------------------------------

    def rel(self, path: Path | str) -> str:
        """``path`` relative to the repository root, '/'-separated (an absolute path
        outside it: as it is)."""
        prefix = self._root_prefix
        text = os.fspath(path)
        if prefix and text.startswith(prefix) and "//" not in text and "/./" not in text \
                and not text.endswith(("/", "/.")):
            return text[len(prefix):]  # what relative_to gives, without building parts
        path = Path(path)
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()

    def _rel_of(self, key: str, folder: Path) -> str:
        memo = self._rels.get(key)
        if memo is None or memo[0] is not folder:  # (the attribute was replaced)
            memo = (folder, self.rel(folder))
            self._rels[key] = memo
        return memo[1]

    def record_rel(self, kind: str, record_id: str) -> str:
        """``self.rel(self.record_path(kind, record_id))``, refusing the same, built as a
        string (the writer's hot path)."""
        return f"{self.records_rel}/{_record_name(kind, record_id)}"

    def abs_of(self, relpath: str) -> str:
        """:meth:`abspath` as a string (no pathlib), refusing the same escapes."""
        return os.path.join(self.root, check_rel(relpath))

    def record_path(self, kind: str, record_id: str) -> Path:
        """``records/<kind>/<id>.md``; refuses anything that could leave the folder."""
        return self.records_dir / _record_name(kind, record_id)  # (one join)

    def abspath(self, relpath: str) -> Path:
        """A stored root-relative path back to a file, refusing escapes."""
        return self.root / check_rel(relpath)

    def record_file(self, relpath: str) -> Path:
        """A root-relative path that must name a record file (``*.md``) whose folder,
        symlinks resolved, is inside the records folder: what the writer may replace."""
        path = self.abspath(relpath)
        records = self.records_dir.resolve()
        if not path.name.endswith(".md") or not path.parent.resolve().is_relative_to(records):
            raise UnsafePathError(f"{relpath!r} is not a record file of this knowledge folder")
        return path

    def check_write_folders(self, kind: str | None = None) -> None:
        """Before a write creates anything (the lease, the journal, a staged file): the
        knowledge folder must be inside the repository, and ``records/``, ``records/<kind>``,
        ``staging/``, ``queue/`` and ``index/`` inside it — symlinks resolved, for the
        folders that exist. Raises :class:`ConfigError` or :class:`UnsafePathError`."""
        root = os.path.realpath(self.root)
        knowledge = os.path.realpath(self.knowledge)
        if not _within(knowledge, root) or knowledge == root:
            raise ConfigError(
                f"the knowledge folder {self.config.knowledge_dir} is outside the repository "
                f"({knowledge}); memidex writes records only inside {root}",
                hint="set `knowledge_dir` in memidex.toml to a folder inside the repository")
        folders = [self.records_dir, self.staging_dir, self.queue_dir, self.index_dir]
        if kind is not None:
            folders.insert(1, self.records_dir / kind)
        for folder in folders:
            self._check_inside(folder, knowledge)
        self.check_state_folder()

    def check_state_folder(self) -> None:
        """The state folder (``state_dir``: run state, working memory, the warm server's
        socket) must be inside the repository, symlinks resolved: nothing memidex keeps
        for itself is written through a link elsewhere. Raises :class:`UnsafePathError`."""
        folder = self.config.state_path
        if not os.path.lexists(folder):
            return
        root = os.path.realpath(self.root)
        real = os.path.realpath(folder)
        if not _within(real, root) or real == root:
            raise UnsafePathError(f"{self.config.state_dir} leads outside the repository "
                                  f"(to {real}); nothing was written",
                                  hint="replace the symlink with a real folder")

    def _check_inside(self, folder: Path | str, knowledge: str) -> None:
        if not os.path.lexists(folder):
            return
        real = os.path.realpath(folder)
        if not _within(real, knowledge):
            raise UnsafePathError(f"{self.rel(folder)} leads outside the knowledge folder "
                                  f"(to {real}); nothing was written",
                                  hint="replace the symlink with a real folder")

    # --- reading -------------------------------------------------------------------

    @property
    def records_rel(self) -> str:
        return self._rel_of("records", self.records_dir)

    @property
    def policies_rel(self) -> str:
        return self._rel_of("policies", self.policies_dir)

    def scan_dir(self, rel: str, *, stat: bool = True) -> DirScan:
        """One folder (not recursive): its record or policy files, sub-folders and mtime.

        Folders under ``records/`` hold ``*.md`` records; the policies folder holds
        ``*.yaml``/``*.yml``. Hidden entries are skipped; a symlink that leads outside the
        records folder is a problem, never followed.
        """
        policies = rel == self.policies_rel
        suffixes = (".yaml", ".yml") if policies else (".md",)
        full = os.path.join(self.root, rel)
        scan = DirScan(rel)
        try:
            scan.mtime_ns = os.stat(full).st_mtime_ns
            entries = list(os.scandir(full))
        except FileNotFoundError:
            scan.missing = True
            return scan
        except OSError as exc:
            scan.problems.append(Problem(rel, 0, f"cannot read folder: {exc.strerror}"))
            return scan
        base = None
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            child = f"{rel}/{name}"
            try:
                if entry.is_symlink():
                    if base is None:
                        base = os.path.realpath(self.records_dir) + os.sep
                    if not os.path.realpath(entry.path).startswith(base):
                        scan.problems.append(Problem(
                            child, 0, "symlink points outside the records folder"))
                        continue
                if entry.is_dir():
                    if not policies and not entry.is_symlink():
                        scan.subdirs.append(child)
                    continue
                if not name.endswith(suffixes):
                    continue
                if not stat:  # the caller stats each file as it reads it (a rebuild)
                    if entry.is_file():
                        scan.files.append(FileStat(child, 0, 0, 0))
                    continue
                st = entry.stat()
            except OSError as exc:
                scan.problems.append(Problem(child, 0, f"cannot read: {exc.strerror}"))
                continue
            if stat_mod.S_ISREG(st.st_mode):
                scan.files.append(FileStat(child, st.st_size, st.st_mtime_ns, st.st_ino))
        return scan

    def stat_file(self, relpath: str) -> FileStat | None:
        """A single record or policy file's stat, or None if it is gone (or not one)."""
        try:
            st = os.stat(os.path.join(self.root, relpath))
        except OSError:
            return None
        if not stat_mod.S_ISREG(st.st_mode):
            return None
        return FileStat(relpath, st.st_size, st.st_mtime_ns, st.st_ino)

    def scan_all(self, *, stat: bool = True
                 ) -> tuple[list[FileStat], list[FileStat], list[Problem], dict[str, int]]:
        """(record files, policy files, problems, every folder's mtime), paths sorted.

        ``stat=False`` leaves the record files' size, mtime and inode at 0, for a caller
        that stats each file as it reads it (:meth:`read_with_stat`)."""
        records: list[FileStat] = []
        problems: list[Problem] = []
        dirs: dict[str, int] = {}
        stack = [self.records_rel]
        while stack:
            scan = self.scan_dir(stack.pop(), stat=stat)
            if scan.missing:
                continue
            dirs[scan.rel] = scan.mtime_ns
            records.extend(scan.files)
            problems.extend(scan.problems)
            stack.extend(scan.subdirs)
        pscan = self.scan_dir(self.policies_rel)
        if not pscan.missing:
            dirs[pscan.rel] = pscan.mtime_ns
        problems.extend(pscan.problems)
        records.sort(key=lambda f: f.relpath)
        pscan.files.sort(key=lambda f: f.relpath)
        problems.sort(key=lambda p: (p.path, p.line, p.reason))
        return records, pscan.files, problems, dirs

    def scan_records(self) -> tuple[list[FileStat], list[Problem]]:
        """Every ``*.md`` under ``records/`` (sorted), and symlinks that escape it."""
        records, _, problems, _ = self.scan_all()
        return records, problems

    def scan_policies(self) -> list[FileStat]:
        scan = self.scan_dir(self.policies_rel)
        return sorted(scan.files, key=lambda f: f.relpath)

    def read_with_stat(self, relpath: str) -> tuple[bytes, FileStat]:
        """The bytes of a file and the stat of exactly the file they were read from."""
        with open(os.path.join(self.root, check_rel(relpath)), "rb") as f:
            st = os.fstat(f.fileno())
            data = f.read()
        return data, FileStat(relpath, st.st_size, st.st_mtime_ns, st.st_ino)

    def read_bytes(self, relpath: str) -> bytes:
        """The bytes of a root-relative file (the hot path: no pathlib)."""
        return read_file(os.path.join(self.root, check_rel(relpath)))

    def load(self, fs: FileStat) -> LoadedRecord:
        """Parse one record file; :class:`RecordError` when it is bad (the file is untouched)."""
        from memidex.records.codec import content_hash, parse_record_bytes

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
        from memidex.records.digest import content_hash
        from memidex.records.policy import parse_policies

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

    def current_hash(self, target: Path | str, *, absent: bool = False) -> str | None:
        """The content hash of the file at ``target`` (an absolute path), None if missing.
        ``absent``: the caller expects no file there (a new record): one ``access(2)``
        says so, without the cost of an open that fails (~1.5 us of exception a file)."""
        from memidex.records.digest import content_hash

        if absent and not os.access(target, os.F_OK):  # (a dangling link: None either way)
            return None
        try:
            return content_hash(read_file(target))
        except FileNotFoundError:
            return None

    # --- writing -------------------------------------------------------------------

    def stage(self, record: Record, *, durable: bool = True) -> StagedFile:
        """Write ``record`` canonically to a unique file in ``staging/`` and fsync it
        (``durable=False``: the caller makes a batch durable, :func:`fsio.sync_files`)."""
        from memidex.records.codec import dump_record

        relpath = self.record_rel(record.kind, record.id)
        return self._stage(relpath, record.id, dump_record(record).encode("utf-8"), durable)

    def stage_bytes(self, relpath: str, data: bytes, *, durable: bool = True,
                    checked: set[str] | None = None, sha256: str | None = None,
                    unique: str | None = None) -> StagedFile:
        """Stage the canonical bytes of the record file at ``relpath`` (the writer's own
        encoding of a record it was handed; a journal replayed after a crash goes through
        :meth:`stage` instead, so what it installs is parsed first). ``checked``: folders
        a batch already found inside the knowledge folder (each is resolved once);
        ``sha256``: the content hash of ``data``, when the caller computed it; ``unique``:
        what makes the staged file's name unique (default: the pid and 4 random bytes)."""
        parts = relpath.rsplit("/", 2)
        kind = parts[-2] if len(parts) == 3 else ""
        rid = parts[-1].removesuffix(".md")
        if self.record_rel(kind, rid) != relpath:  # (refuses a bad kind or id as well)
            raise UnsafePathError(f"{relpath!r} is not a record file of this knowledge folder")
        return self._stage(relpath, rid, data, durable, checked, sha256, unique)

    def _stage(self, relpath: str, name: str, data: bytes, durable: bool,
               checked: set[str] | None = None, sha256: str | None = None,
               unique: str | None = None) -> StagedFile:
        target = self.abs_of(relpath)
        staging = os.fspath(self.staging_dir)
        knowledge = ""  # resolved once a folder needs checking (not per file of a batch)
        fresh = checked is None or staging not in checked
        for folder in (staging, os.path.dirname(target)):
            if checked is None or folder not in checked:
                knowledge = knowledge or os.path.realpath(self.knowledge)
                self._check_inside(folder, knowledge)
                if checked is not None:
                    checked.add(folder)
        if fresh:  # made by the batch's first file, then there
            os.makedirs(staging, exist_ok=True)
        # a unique name (fsio.temp_name's, without pathlib): O_EXCL refuses any other
        if unique is None:
            unique = f"{os.getpid()}.{os.urandom(4).hex()}"
        staged = f"{staging}/{name}.{unique}.md"
        fsio.write_new(staged, data, durable=durable)
        if sha256 is None:
            from memidex.records.codec import content_hash

            sha256 = content_hash(data)
        return StagedFile(staged, target, sha256)

    def install(self, staged: StagedFile, *, expected: str | None | bool = False,
                sync_folder: bool = True, made: set[str] | None = None) -> None:
        """Move a staged file into place atomically and fsync its folder (``sync_folder=
        False``: the caller fsyncs the folders of a batch once).

        ``expected`` guards against clobbering a person's edit: the content hash the
        caller read (``None`` = the file must not exist yet); ``False`` skips the check.
        ``made``: folders a batch already made sure exist (each is made once).
        """
        if expected is not False:
            now = self.current_hash(staged.target, absent=expected is None)
            if now != expected:
                self.discard(staged)
                raise ConflictError(
                    f"{self.rel(staged.target)} changed on disk since it was read; not replaced"
                )
        folder = os.path.dirname(staged.target)
        if made is None or folder not in made:
            os.makedirs(folder, exist_ok=True)
            if made is not None:
                made.add(folder)
        fsio.swap_into_place(staged.staged, staged.target, sync_folder=sync_folder)

    def discard(self, staged: StagedFile) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged.staged)

    def remove(self, relpath: str, *, sync_folder: bool = True) -> None:
        path = self.abspath(relpath)
        path.unlink()
        if sync_folder:
            fsio.fsync_dir(path.parent)
