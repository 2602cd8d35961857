"""Building the index from the files, in full or incrementally.

Every row is a pure function of one file's bytes, so applying a file's change twice, or
in any order, leaves the same rows as a full rebuild (a hypothesis test checks this).
A full rebuild writes a new file (no journal, no fsync until the end), creates the
secondary indexes after the load, then swaps it in under an exclusive lock on the old one.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex._version import __version__
from memidex.errors import MemidexError, Problem, RecordError
from memidex.index.batches import (
    INSERT_FILE,
    INSERT_POLICY,
    INSERT_PROBLEM,
    Batch,
    flatten,
    insert_batch,
    parse_files,
)
from memidex.index.db import (
    BUSY_TIMEOUT_MS,
    apply_migrations,
    create_schema,
    file_digest,
    write_meta,
    xor_hex,
)
from memidex.index.leftovers import clear_target, remove_stale_builds, stale_builds
from memidex.index.maskmark import KEY as MASK_KEY
from memidex.index.maskmark import mark
from memidex.index.rows import FileRows, file_rows, history_rows, record_row
from memidex.index.schema import POST_LOAD, SCHEMA_VERSION, TOKENIZER
from memidex.index.segments import SegmentMerger, SegmentWriter, accepts_segments
from memidex.index.staleness import Before, Snapshot, before_scan, take_snapshot
from memidex.masking import secrets_path
from memidex.store.files import FileStat, Store
from memidex.store.fsio import fsync_file, swap_into_place

if TYPE_CHECKING:
    from memidex.records.model import Policy

__all__ = [
    "BuildReport",
    "record_row",
    "FileRows",
    "clear_target",
    "remove_stale_builds",
    "stale_builds",
    "history_rows",
    "file_rows",
    "rebuild",
    "upgrade",
    "Progress",
    "flatten",
    "full_snapshot",
    "insert_batch",
    "policy_rows",
    "write_meta",
]

Progress = Callable[[int, int], None]
"""Called with (files done, files in all) during a rebuild."""

PARALLEL_MIN_FILES = 4000
CHUNK = 500


@dataclass
class BuildReport:
    records: int = 0
    policies: int = 0
    problems: list[Problem] = field(default_factory=list)
    seconds: float = 0.0
    path: str = ""
    moved_aside: str | None = None  # what was in the index's place, moved aside
    stale_builds_removed: list[str] = field(default_factory=list)

    def to_json(self, relpath: str) -> dict[str, Any]:
        """``rebuild-index --json``: ``relpath`` (the index, relative to the root, like
        every other command's paths) and the file problems under ``errors`` like
        ``check`` and ``doctor``."""
        return {"path": relpath, "records": self.records, "policies": self.policies,
                "seconds": round(self.seconds, 3),
                "errors": [p.as_dict() for p in self.problems]}


# What the parser processes read, set in the parent just while they are forked (under a
# lock, should two threads rebuild): a chunk is then sent as two numbers, not as 500
# pickled file stats. The third: whether they make the batches' FTS5 segments; the
# fourth: the path their batches are written under (:func:`_forked_batch`).
_FORKED: tuple[Store, Sequence[FileStat], bool, str] | None = None
_FORK_LOCK = threading.Lock()
_WRITER: list[SegmentWriter] = []  # a parser process's own


def _forked_batch(span: tuple[int, int]) -> str:
    """A parser process's batch, with its FTS5 segment when asked, written in ``marshal``
    form (half the cost of pickle for plain tuples and strings) to a file beside the
    build; returns the file's path. Sent through the pool's pipe, a batch (~200 KB) made
    the process wait until the parent's result thread got the GIL to drain it: ~7 ms a
    batch, a tenth of its time. A write into the page cache never waits."""
    import marshal

    assert _FORKED is not None
    store, files, segments, parts = _FORKED
    batch = parse_files(store, files, *span)
    if segments:
        if not _WRITER:
            _WRITER.append(SegmentWriter())
        batch = batch._replace(fts=_WRITER[0].segment(
            [(r[0], r[7], r[8], r[9]) for r in batch.records]))
    path = f"{parts}{span[0]}"
    data = memoryview(marshal.dumps(tuple(batch)))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
    return path


def _take_batch(path: str) -> Batch:
    """A batch a parser process wrote (:func:`_forked_batch`), read and its file removed."""
    import marshal

    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    return Batch(*marshal.loads(data))


def _remove_parts(parts: str) -> None:
    """The batch files a failed rebuild left (the parser processes are gone by then)."""
    import glob

    for path in glob.glob(f"{glob.escape(parts)}*"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _parallel(files: Sequence[FileStat], jobs: int) -> bool:
    return jobs > 1 and len(files) >= PARALLEL_MIN_FILES


def _iter_batches(store: Store, files: Sequence[FileStat], jobs: int, *,
                  segments: bool = False, parts: str = "") -> Generator[Batch, None, None]:
    """Batches in path order; parsed (and flattened) by a process pool when there are
    many files, so the parent only inserts — with their FTS5 segments (``segments``:
    :mod:`memidex.index.segments`) made there too. ``parts``: the path prefix of the
    files the pool's batches cross in (a build file's name: a killed rebuild's are
    removed by the next, :mod:`memidex.index.leftovers`)."""
    global _FORKED
    # The first chunks are small, so that the parent starts inserting at once.
    spans = []
    i, size = 0, CHUNK // 8
    while i < len(files):
        spans.append((i, min(len(files), i + size)))
        i, size = i + size, min(CHUNK, size * 2)
    if not _parallel(files, jobs):
        for start, end in spans:
            yield parse_files(store, files, start, end)
        return
    import multiprocessing

    from memidex.index.rowread import prepare

    assert parts, "a parallel parse writes its batches to files"
    prepare()  # once here, inherited by every parser process, not once in each
    ctx = multiprocessing.get_context("fork")
    with _FORK_LOCK:
        _FORKED = (store, files, segments, parts)
        try:
            # the processes fork here, with _FORKED set; Ctrl-C is the parent's to handle
            pool = ctx.Pool(jobs, initializer=_ignore_sigint)
        finally:
            _FORKED = None
    # A few chunks in flight, not all: the parsers outrun the inserting parent, and
    # results nobody has taken yet would pile up in its memory.
    try:
        with pool:
            todo = iter(spans)
            pending = deque(pool.apply_async(_forked_batch, (span,))
                            for span in itertools.islice(todo, 2 * jobs + 2))
            while pending:
                path = pending.popleft().get()
                for span in itertools.islice(todo, 1):
                    pending.append(pool.apply_async(_forked_batch, (span,)))
                yield _take_batch(path)
    finally:  # the pool is gone (terminated): no process writes another batch file
        _remove_parts(parts)


def _insert_staged_anchors(conn: sqlite3.Connection) -> None:
    """The staged anchor rows in key order (the first of two equal keys, as inserting
    them in record order would keep — there are none: a record's anchors are a set)."""
    conn.execute("INSERT OR IGNORE INTO anchors(anchor, record_rowid, main) SELECT anchor,"
                 " record_rowid, main FROM temp.staged_anchors"
                 " ORDER BY anchor, record_rowid, rowid")
    conn.execute("DROP TABLE temp.staged_anchors")


def policy_rows(store: Store, files: Sequence[FileStat]) -> tuple[
        list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[str, int, str]]]:
    """(file rows, policy rows, problem rows) for policy files."""
    from memidex.records.digest import content_hash
    from memidex.records.policy import parse_policies

    frows: list[tuple[Any, ...]] = []
    prows: list[tuple[Any, ...]] = []
    problems: list[tuple[str, int, str]] = []
    for fs in files:
        try:
            data = store.read_bytes(fs.relpath)
        except OSError as exc:
            problems.append((fs.relpath, 0, f"cannot read: {exc.strerror}"))
            continue
        frows.append((fs.relpath, "policy", len(data), fs.mtime_ns, fs.ino, content_hash(data),
                      None))
        try:
            policies = parse_policies(data, fs.relpath)
        except RecordError as exc:
            problems.extend((p.path, p.line, p.reason) for p in exc.problems)
            continue
        prows.extend(_policy_row(p) for p in policies)
    return frows, prows, problems


def _policy_row(p: Policy) -> tuple[Any, ...]:
    return (p.id, p.path, p.line, p.rule, p.severity, json.dumps(list(p.products)),
            json.dumps(list(p.anchors)))


def rebuild(store: Store, target: Path, *, jobs: int | None = None,
            progress: Progress | None = None) -> BuildReport:
    """Build the whole index into a new file and swap it in atomically."""
    import secrets

    started = time.perf_counter()
    before = before_scan(str(store.root))
    # before a record is read: secrets changed meanwhile make the next look rebuild again
    secrets_mark = mark(secrets_path(store.config))
    files, policy_files, scan_problems, dirs = store.scan_all(stat=False)
    # The staleness snapshot (git calls, ~0.4 s at 100k) runs in a thread while the files
    # are parsed — started once the parser processes exist, since forking while another
    # thread runs could copy a held lock into them.
    snapshot: list[Snapshot] = []
    snapper = threading.Thread(target=lambda: snapshot.append(
        full_snapshot(store, [*files, *policy_files], dirs, before)), daemon=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    report = BuildReport(path=str(target))
    report.moved_aside = clear_target(target)
    report.stale_builds_removed = remove_stale_builds(target)
    tmp = target.with_name(f".{target.name}.build-{os.getpid()}-{secrets.token_hex(4)}")
    merger: SegmentMerger | None = None  # the FTS index, built beside (parser pool only)
    batches: Generator[Batch, None, None] | None = None
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
    except sqlite3.Error as exc:
        raise _build_error(exc, target) from None
    try:
        conn.executescript(
            "PRAGMA auto_vacuum=INCREMENTAL;"  # so the pages 'optimize' frees can be returned
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-204800;"
            "PRAGMA temp_store=MEMORY; PRAGMA locking_mode=EXCLUSIVE;"
        )
        create_schema(conn)  # executescript: runs outside the load transaction
        conn.execute("CREATE TEMP TABLE staged_anchors(anchor TEXT NOT NULL,"
                     " record_rowid INTEGER NOT NULL, main INTEGER NOT NULL)")
        conn.execute("BEGIN")
        total = len(files)
        done = 0
        fingerprint = 0
        workers = jobs if jobs is not None else (os.cpu_count() or 1)
        if _parallel(files, workers) and accepts_segments(conn):
            merger = SegmentMerger(tmp.with_name(f"{tmp.name}.fts"))
        batches = _iter_batches(store, files, workers, segments=merger is not None,
                                parts=f"{tmp}.part-")
        for batch in batches:
            if snapper.ident is None:
                snapper.start()
            insert_batch(conn, batch, stage_anchors=True, segments=merger)
            fingerprint ^= batch.fingerprint
            done += len(batch.files)
            if progress:
                progress(done, total)
        if merger is not None:
            merger.finish()  # merging in its thread while the rest is built here
        _insert_staged_anchors(conn)
        conn.executemany(INSERT_PROBLEM, [(p.path, p.line, p.reason) for p in scan_problems])
        frows, prows, pproblems = policy_rows(store, policy_files)
        conn.executemany(INSERT_FILE, frows)
        for f in frows:
            fingerprint ^= file_digest(f[0], f[5])
        conn.executemany(INSERT_POLICY, prows)
        conn.executemany(INSERT_PROBLEM, pproblems)
        # One FTS segment instead of dozens: each query term then costs one b-tree probe,
        # not one per segment. Before the secondary indexes, which reuse the freed pages.
        if merger is None:
            conn.execute("INSERT INTO records_fts(records_fts) VALUES('optimize')")
        for statement in POST_LOAD.split(";"):
            if statement.strip():
                conn.execute(statement)
        write_meta(conn, {
            "schema_version": str(SCHEMA_VERSION),
            "tokenizer": TOKENIZER,
            "memidex_version": __version__,
            "fingerprint": xor_hex(fingerprint),
            "built_at": str(before.scan_ns),
            "snapshot": _joined(snapper, snapshot).to_json(),
            "knowledge_dir": store.config.knowledge_dir,
            "policies_dir": store.config.policies_dir,
            MASK_KEY: secrets_mark,
        })
        conn.execute("COMMIT")
        if merger is not None:
            merger.copy_into(conn)
            merger = None
        # Give back the pages 'optimize' freed (executescript steps it to the end; a plain
        # execute frees one page).
        conn.executescript("PRAGMA incremental_vacuum;")
        conn.execute("PRAGMA journal_mode=DELETE")
        report.records = int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
        report.policies = len(prows)
        report.problems = [Problem(*p) for p in conn.execute(
            "SELECT path, line, reason FROM problems ORDER BY path, line")]
        conn.close()
        if progress:
            progress(done, total)
        fsync_file(tmp)
        _swap(tmp, target)
    except BaseException as exc:
        if batches is not None:
            batches.close()  # the parser processes stopped, their batch files removed
        if merger is not None:
            merger.abandon()
        conn.close()
        tmp.unlink(missing_ok=True)
        if isinstance(exc, (sqlite3.Error, OSError)) and not isinstance(exc, BrokenPipeError):
            raise _build_error(exc, target) from None  # (a closed stdout: the CLI's to say)
        raise
    report.seconds = time.perf_counter() - started
    return report


def _build_error(exc: sqlite3.Error | OSError, target: Path) -> MemidexError:
    """A SQLite error while building: the disk's fault (full, I/O) or the index's; an
    ``OSError`` (a parser process writing its batch, the fsync, the swap): the disk's."""
    from memidex.errors import NoSpaceError, from_os_error, from_sqlite_error
    from memidex.index.db import sqlite_error

    if isinstance(exc, OSError):
        plain = from_os_error(exc)
        if not isinstance(plain, NoSpaceError):
            return plain
        message = f"no space left on the device while building the index in {target.parent}"
    else:
        failure = from_sqlite_error(exc, target.parent, what="while building the index")
        if not isinstance(failure, NoSpaceError):
            return failure or sqlite_error(exc)
        message = failure.message
    return NoSpaceError(message, hint="free some space, then run `memidex knowledge"
                        " rebuild-index` again; the old index and the records are intact")


def upgrade(store: Store, target: Path, pending: Sequence[str] | None, *,
            jobs: int | None = None) -> str:
    """Bring an index built by an earlier memidex up to date: apply the ``pending``
    migrations in place, or rebuild it when one of them changes what the rows hold
    (:data:`memidex.index.schema.REBUILT_BY`) — or when ``pending`` is None: the index
    was masked with other secrets (:mod:`memidex.index.maskmark`). Returns
    ``"migrated"`` or ``"rebuilt"``."""
    from memidex.index.db import translated
    from memidex.index.schema import REBUILT_BY

    with translated():  # SQLite's errors leave as IndexUnavailableError
        if pending is None or REBUILT_BY & set(pending):
            rebuild(store, target, jobs=jobs)
            return "rebuilt"
        conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            apply_migrations(conn)
            for statement in POST_LOAD.split(";"):
                if statement.strip():
                    conn.execute(statement)
            write_meta(conn, {"schema_version": str(SCHEMA_VERSION),
                              "memidex_version": __version__})
        finally:
            conn.close()
        return "migrated"


def _swap(new: Path, target: Path) -> None:
    """Rename ``new`` over ``target`` while holding an exclusive lock on the old file."""
    if not target.exists():
        swap_into_place(new, target)
        return
    old = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        try:
            old.execute("BEGIN EXCLUSIVE")  # also rolls back a hot journal of the old file
        except sqlite3.DatabaseError:
            pass  # garbage or locked past the timeout: it is being replaced either way
        swap_into_place(new, target)
    finally:
        old.close()
    Path(f"{target}-journal").unlink(missing_ok=True)


# --- incremental ---------------------------------------------------------------------


def _joined(thread: threading.Thread, result: list[Snapshot]) -> Snapshot:
    if thread.ident is None:
        thread.start()  # no files were parsed
    thread.join()
    return result[0] if result else Snapshot(method="stat")


def full_snapshot(store: Store, files: Sequence[FileStat], dirs: dict[str, int],
                  before: Before) -> Snapshot:
    """The staleness snapshot after a scan of every file (``memidex.index.staleness``):
    ``dirs``, each folder's mtime as the scan saw it before listing it; ``before``, read
    before the scan."""
    return take_snapshot(str(store.root), [store.records_rel, store.policies_rel],
                         {f.relpath for f in files}, dirs, before)
