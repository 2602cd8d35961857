"""Building the index from the files, in full or incrementally.

Every row is a pure function of one file's bytes, so applying a file's change twice, or
in any order, leaves the same rows as a full rebuild (a hypothesis test checks this).
A full rebuild writes a new file (no journal, no fsync until the end), creates the
secondary indexes after the load, then swaps it in under an exclusive lock on the old one.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from memidex import __version__
from memidex.errors import Problem, RecordError
from memidex.index.db import (
    BUSY_TIMEOUT_MS,
    IndexDB,
    apply_migrations,
    file_digest,
    xor_hex,
)
from memidex.index.schema import POST_LOAD, SCHEMA_VERSION, TOKENIZER
from memidex.records.ids import scope_json
from memidex.staleness import RACY_NS, Snapshot, suspects, take_snapshot
from memidex.store import FileStat, LoadedRecord, Store, swap_into_place

if TYPE_CHECKING:
    from memidex.records.model import Policy, Record

__all__ = [
    "BuildReport",
    "FileRows",
    "RefreshReport",
    "file_rows",
    "rebuild",
    "refresh",
    "Progress",
]

Progress = Callable[[int, int], None]
"""Called with (files done, files in all) during a rebuild."""

PARALLEL_MIN_FILES = 4000
CHUNK = 500


class FileRows(NamedTuple):
    """Everything one record file contributes to the index (a tuple: cheap to pickle
    from a parser process)."""

    file: tuple[str, str, int, int, int, str]
    record: tuple[Any, ...] | None
    anchors: tuple[tuple[str, int], ...]  # (anchor, main)
    edges: tuple[tuple[str, str, str], ...]
    problems: tuple[tuple[str, int, str], ...]


@dataclass
class BuildReport:
    records: int = 0
    policies: int = 0
    problems: list[Problem] = field(default_factory=list)
    seconds: float = 0.0
    path: str = ""


@dataclass
class RefreshReport:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    method: str = "stat"

    @property
    def touched(self) -> int:
        return len(self.added) + len(self.changed) + len(self.deleted)


def record_row(lr: LoadedRecord) -> tuple[Any, ...]:
    r = lr.record
    history = None
    if r.history:
        history = json.dumps(
            [{"from": h.valid.from_, "until": h.valid.until, "title": h.title, "body": h.body}
             for h in r.history],
            ensure_ascii=False, separators=(",", ":"),
        )
    return (
        r.id, lr.relpath, r.kind, r.status, r.product, r.anchor, r.title, r.body,
        "\n".join(r.all_anchors),
        scope_json(dict(r.scope)),
        r.trust.source, r.trust.confirmations, r.trust.contradictions, r.trust.last_confirmed,
        r.valid.from_, r.valid.until, history,
    )


def _edges(r: Record) -> tuple[tuple[str, str, str], ...]:
    return tuple((r.id, rel, dst) for rel, dst in r.relations.edges())


def file_rows(store: Store, fs: FileStat) -> FileRows:
    """Read and parse one record file into its rows (bad files give problem rows)."""
    try:
        data, fs = store.read_with_stat(fs.relpath)
    except OSError as exc:
        return FileRows((fs.relpath, "record", fs.size, fs.mtime_ns, fs.ino, ""), None, (), (),
                        ((fs.relpath, 0, f"cannot read: {exc.strerror}"),))
    from memidex.records.codec import parse_record_bytes
    from memidex.records.digest import content_hash

    sha = content_hash(data)
    frow = (fs.relpath, "record", len(data), fs.mtime_ns, fs.ino, sha)
    try:
        record = parse_record_bytes(data, fs.relpath)
    except RecordError as exc:
        return FileRows(frow, None, (), (), tuple((p.path, p.line, p.reason) for p in exc.problems))
    lr = LoadedRecord(fs.relpath, record, sha, fs)
    anchors = ((record.anchor, 1), *((a, 0) for a in record.anchors))
    return FileRows(frow, record_row(lr), anchors, _edges(record), ())


class Batch(NamedTuple):
    """The rows of a run of files, flattened for ``executemany`` (built where parsed)."""

    files: list[tuple[Any, ...]]
    records: list[tuple[Any, ...]]
    anchors: list[tuple[str, int, int]]
    edges: list[tuple[Any, ...]]
    problems: list[tuple[str, int, str]]
    fingerprint: int


def _flatten(rows: Sequence[FileRows], first_rowid: int, *, dense: bool) -> Batch:
    """Rows ready to insert. ``dense``: record rowids follow one another (a refresh);
    otherwise a file's rowid is ``first_rowid`` + its position (a rebuild: a file that
    does not parse leaves a gap, so rowids depend on nothing but the sorted paths)."""
    out = Batch([], [], [], [], [], 0)
    rowid = first_rowid
    for fr in rows:
        out.problems.extend(fr.problems)
        if fr.record is not None:
            out.files.append((*fr.file, rowid))
            out.records.append((rowid, *fr.record))
            out.anchors.extend((a, rowid, main) for a, main in fr.anchors)
            out.edges.extend((rowid, *e) for e in fr.edges)
        else:
            out.files.append((*fr.file, None))
        if fr.record is not None or not dense:
            rowid += 1
    fingerprint = 0
    for f in out.files:
        fingerprint ^= file_digest(f[0], f[5])
    return out._replace(fingerprint=fingerprint)


def _batch(store: Store, files: Sequence[FileStat], start: int, end: int) -> Batch:
    """Files ``start:end`` parsed and flattened (rowids from their positions)."""
    return _flatten([file_rows(store, fs) for fs in files[start:end]], 1 + start, dense=False)


# What the parser processes read, set in the parent just while they are forked (under a
# lock, should two threads rebuild): a chunk is then sent as two numbers, not as 500
# pickled file stats.
_FORKED: tuple[Store, Sequence[FileStat]] | None = None
_FORK_LOCK = threading.Lock()


def _forked_batch(span: tuple[int, int]) -> bytes:
    """A parser process's batch, in ``marshal`` form (half the cost of pickle for plain
    tuples and strings, on both sides of the pipe)."""
    import marshal

    assert _FORKED is not None
    return marshal.dumps(tuple(_batch(*_FORKED, *span)))


def _iter_batches(store: Store, files: Sequence[FileStat], jobs: int) -> Iterator[Batch]:
    """Batches in path order; parsed (and flattened) by a process pool when there are
    many files, so the parent only inserts."""
    global _FORKED
    # The first chunks are small, so that the parent starts inserting at once.
    spans = []
    i, size = 0, CHUNK // 8
    while i < len(files):
        spans.append((i, min(len(files), i + size)))
        i, size = i + size, min(CHUNK, size * 2)
    if jobs <= 1 or len(files) < PARALLEL_MIN_FILES:
        for start, end in spans:
            yield _batch(store, files, start, end)
        return
    import marshal
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    with _FORK_LOCK:
        _FORKED = (store, files)
        try:
            pool = ctx.Pool(jobs)  # the processes fork here, with _FORKED set
        finally:
            _FORKED = None
    with pool:
        for data in pool.imap(_forked_batch, spans):
            yield Batch(*marshal.loads(data))


_INSERT_RECORD = (
    "INSERT INTO records(rowid, id, path, kind, status, product, anchor, title, body, anchors,"
    " scope, source, confirmations, contradictions, last_confirmed, valid_from, valid_until,"
    " history) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
_INSERT_FTS = "INSERT INTO records_fts(rowid, title, body, anchors) VALUES (?, ?, ?, ?)"
_INSERT_FILE = "INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?)"
_INSERT_ANCHOR = "INSERT OR IGNORE INTO anchors(anchor, record_rowid, main) VALUES (?,?,?)"
_INSERT_EDGE = "INSERT OR IGNORE INTO edges(record_rowid, src, rel, dst) VALUES (?,?,?,?)"
_INSERT_PROBLEM = "INSERT INTO problems(path, line, reason) VALUES (?,?,?)"
_INSERT_POLICY = "INSERT OR REPLACE INTO policies VALUES (?,?,?,?,?,?,?)"


def _insert(conn: sqlite3.Connection, batch: Batch) -> None:
    conn.executemany(_INSERT_FILE, batch.files)
    conn.executemany(_INSERT_RECORD, batch.records)
    # (rowid, title, body, anchors), built here: sent from a parser, the text would
    # cross the pipe twice
    conn.executemany(_INSERT_FTS, [(r[0], r[7], r[8], r[9]) for r in batch.records])
    conn.executemany(_INSERT_ANCHOR, batch.anchors)
    conn.executemany(_INSERT_EDGE, batch.edges)
    conn.executemany(_INSERT_PROBLEM, batch.problems)


def _policy_rows(store: Store, files: Sequence[FileStat]) -> tuple[
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


def _write_meta(conn: sqlite3.Connection, values: dict[str, str]) -> None:
    conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                     sorted(values.items()))


def rebuild(store: Store, target: Path, *, jobs: int | None = None,
            progress: Progress | None = None) -> BuildReport:
    """Build the whole index into a new file and swap it in atomically."""
    import secrets

    started = time.perf_counter()
    scan_ns = time.time_ns()
    files, policy_files, scan_problems, dirs = store.scan_all(stat=False)
    # The staleness snapshot (git calls, ~0.4 s at 100k) runs in a thread while the files
    # are parsed — started once the parser processes exist, since forking while another
    # thread runs could copy a held lock into them.
    snapshot: list[Snapshot] = []
    snapper = threading.Thread(target=lambda: snapshot.append(
        _full_snapshot(store, [*files, *policy_files], dirs)), daemon=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.build-{os.getpid()}-{secrets.token_hex(4)}")
    conn = sqlite3.connect(tmp, isolation_level=None)
    report = BuildReport(path=str(target))
    try:
        conn.executescript(
            "PRAGMA auto_vacuum=INCREMENTAL;"  # so the pages 'optimize' frees can be returned
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-204800;"
            "PRAGMA temp_store=MEMORY; PRAGMA locking_mode=EXCLUSIVE;"
        )
        apply_migrations(conn)  # executescript: runs outside the load transaction
        conn.execute("BEGIN")
        total = len(files)
        done = 0
        fingerprint = 0
        workers = jobs if jobs is not None else (os.cpu_count() or 1)
        for batch in _iter_batches(store, files, workers):
            if snapper.ident is None:
                snapper.start()
            _insert(conn, batch)
            fingerprint ^= batch.fingerprint
            done += len(batch.files)
            if progress:
                progress(done, total)
        conn.executemany(_INSERT_PROBLEM, [(p.path, p.line, p.reason) for p in scan_problems])
        frows, prows, pproblems = _policy_rows(store, policy_files)
        conn.executemany(_INSERT_FILE, frows)
        for f in frows:
            fingerprint ^= file_digest(f[0], f[5])
        conn.executemany(_INSERT_POLICY, prows)
        conn.executemany(_INSERT_PROBLEM, pproblems)
        # One FTS segment instead of dozens: each query term then costs one b-tree probe,
        # not one per segment. Before the secondary indexes, which reuse the freed pages.
        conn.execute("INSERT INTO records_fts(records_fts) VALUES('optimize')")
        for statement in POST_LOAD.split(";"):
            if statement.strip():
                conn.execute(statement)
        _write_meta(conn, {
            "schema_version": str(SCHEMA_VERSION),
            "tokenizer": TOKENIZER,
            "memidex_version": __version__,
            "fingerprint": xor_hex(fingerprint),
            "built_at": str(scan_ns),
            "snapshot": _joined(snapper, snapshot).to_json(),
            "knowledge_dir": store.config.knowledge_dir,
            "policies_dir": store.config.policies_dir,
        })
        conn.execute("COMMIT")
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
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _swap(tmp, target)
    except BaseException:
        conn.close()
        tmp.unlink(missing_ok=True)
        raise
    report.seconds = time.perf_counter() - started
    return report


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


def _full_snapshot(store: Store, files: Sequence[FileStat], dirs: dict[str, int]
                   ) -> Snapshot:
    """The staleness snapshot after a scan of every file (``memidex.staleness``)."""
    return take_snapshot(str(store.root), [store.records_rel, store.policies_rel],
                         {f.relpath for f in files}, sorted(dirs))


_FILE_COLS = "SELECT path, kind, size, mtime_ns, ino, sha256 FROM files"
Stored = dict[str, tuple[str, int, int, int, str]]


def _stored_files(conn: sqlite3.Connection, prefix: str | None = None) -> Stored:
    """Stored file rows, all of them or those under the folder ``prefix``."""
    if prefix is None:
        rows = conn.execute(_FILE_COLS)
    else:
        rows = conn.execute(_FILE_COLS + " WHERE path > ? AND path < ?",
                            (prefix + "/", prefix + "/\U0010ffff"))
    return {row[0]: (row[1], row[2], row[3], row[4], row[5]) for row in rows}


def _stored_one(conn: sqlite3.Connection, path: str) -> Stored:
    rows = conn.execute(_FILE_COLS + " WHERE path = ?", (path,))
    return {row[0]: (row[1], row[2], row[3], row[4], row[5]) for row in rows}


@dataclass
class Changes:
    """What differs from the index: files to (re)load, paths gone, scan problems."""

    records: list[FileStat] = field(default_factory=list)
    policies: list[FileStat] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    problems: list[Problem] | None = None  # folder-scan problems, when a full scan ran
    snapshot: Snapshot | None = None
    method: str = "stat"

    @property
    def empty(self) -> bool:
        return not (self.records or self.policies or self.deleted or self.problems is not None)


def _compare(store: Store, stored: Stored, current: list[FileStat], racy_after: int,
             policies_rel: str, out: Changes, *, always_hash: bool = False) -> None:
    """Sort ``current`` files against ``stored`` rows: changed ones into ``out``.

    A file whose stat matches is trusted unless it is too recent or ``always_hash``."""
    for fs in current:
        kind = "policy" if fs.relpath.startswith(policies_rel + "/") else "record"
        target = out.policies if kind == "policy" else out.records
        old = stored.get(fs.relpath)
        if old is None or old[0] != kind:
            target.append(fs)
            continue
        same_stat = (old[1], old[2], old[3]) == (fs.size, fs.mtime_ns, fs.ino)
        if same_stat and fs.mtime_ns < racy_after and not always_hash:
            continue
        from memidex.records.digest import content_hash

        try:
            sha = content_hash(store.read_bytes(fs.relpath))
        except OSError:
            target.append(fs)
            continue
        if sha != old[4] or not same_stat:
            target.append(fs)


def detect_changes(store: Store, db: IndexDB) -> Changes:
    """Compare the files with what the index was built from (git or stat, then hash)."""
    snap = Snapshot.from_json(db.meta().get("snapshot"))
    racy_after = (snap.scan_ns if snap else 0) - RACY_NS
    tops = [store.records_rel, store.policies_rel]
    conn = db.conn
    sus = suspects(str(store.root), tops, snap)
    out = Changes(method=sus.method)
    if not sus.full:
        paths = sorted(p for p in sus.paths if _watched(store, p))
        if not any(os.path.islink(os.path.join(store.root, p)) for p in paths):
            for path in paths:
                fs = store.stat_file(path)
                stored = _stored_one(conn, path)
                if fs is None:
                    out.deleted.extend(stored)
                else:
                    _compare(store, stored, [fs], racy_after, store.policies_rel, out,
                             always_hash=path in sus.verify)
            out.deleted.sort()
            out.snapshot = sus.snapshot
            return out
    records, policies, problems, dirs = store.scan_all()
    stored_all = _stored_files(conn)
    seen = {f.relpath for f in records} | {f.relpath for f in policies}
    _compare(store, stored_all, [*records, *policies], racy_after, store.policies_rel, out)
    out.deleted = sorted(p for p in stored_all if p not in seen)
    if _scan_problems_differ(conn, problems):
        out.problems = problems
    out.snapshot = _full_snapshot(store, [*records, *policies], dirs)
    out.method = out.snapshot.method
    return out


def _watched(store: Store, path: str) -> bool:
    """A path a reported change can matter for: a record or a policy file."""
    if any(part.startswith(".") for part in path.split("/")):
        return False
    if path.startswith(store.records_rel + "/") and path.endswith(".md"):
        return True
    folder = path.rsplit("/", 1)[0]
    return folder == store.policies_rel and path.endswith((".yaml", ".yml"))


def _scan_problems_differ(conn: sqlite3.Connection, problems: list[Problem]) -> bool:
    """Do the folder-scan problems (line 0, no file row) differ from the stored ones?"""
    rows = conn.execute(
        "SELECT path, line, reason FROM problems WHERE line = 0 AND path NOT IN "
        "(SELECT path FROM files)").fetchall()
    return sorted(rows) != sorted((p.path, p.line, p.reason) for p in problems)


def _delete_path(conn: sqlite3.Connection, path: str) -> int:
    """Remove every row a file contributed; returns its fingerprint share (0 if none)."""
    row = conn.execute("SELECT sha256, record_rowid FROM files WHERE path = ?",
                       (path,)).fetchone()
    if row is None:
        conn.execute("DELETE FROM problems WHERE path = ?", (path,))
        return 0
    sha, rowid = row
    if rowid is not None:
        rec = conn.execute("SELECT title, body, anchors FROM records WHERE rowid = ?",
                           (rowid,)).fetchone()
        if rec is not None:
            title, body, anchors = rec
            conn.execute(
                "INSERT INTO records_fts(records_fts, rowid, title, body, anchors)"
                " VALUES('delete', ?, ?, ?, ?)", (rowid, title, body, anchors))
            conn.executemany("DELETE FROM anchors WHERE anchor = ? AND record_rowid = ?",
                             [(a, rowid) for a in anchors.split("\n")])
            conn.execute("DELETE FROM edges WHERE record_rowid = ?", (rowid,))
            conn.execute("DELETE FROM records WHERE rowid = ?", (rowid,))
    conn.execute("DELETE FROM policies WHERE path = ?", (path,))
    conn.execute("DELETE FROM problems WHERE path = ?", (path,))
    conn.execute("DELETE FROM files WHERE path = ?", (path,))
    return file_digest(path, sha)


def _racy(snap: Snapshot) -> bool:
    """Was something too recent to trust at that look (so a later look should be kept)?"""
    limit = snap.scan_ns - RACY_NS
    return snap.git_index_mtime >= limit or any(m >= limit for m in snap.dirs.values())


def refresh(store: Store, db: IndexDB) -> RefreshReport:
    """Bring the index up to date with the files, touching only what changed."""
    changes = detect_changes(store, db)
    report = RefreshReport(method=changes.method)
    conn = db.conn
    snapshot = changes.snapshot
    assert snapshot is not None
    if changes.empty:
        old = Snapshot.from_json(db.meta().get("snapshot"))
        if old is not None and old.same_state(snapshot) and not _racy(old):
            return report  # nothing changed, nothing to remember: no write at all
        with db.begin_write():
            _write_meta(conn, {"snapshot": snapshot.to_json()})
        return report
    stored_paths = {p for fs in (*changes.records, *changes.policies)
                    for p in _stored_one(conn, fs.relpath)}
    record_rows = [file_rows(store, fs) for fs in changes.records]
    frows, prows, pproblems = _policy_rows(store, changes.policies)
    with db.begin_write():
        fp = int(db.meta().get("fingerprint", "0"), 16)
        for path in changes.deleted:
            fp ^= _delete_path(conn, path)
        for fs in (*changes.records, *changes.policies):
            fp ^= _delete_path(conn, fs.relpath)
        if changes.problems is not None:
            conn.execute("DELETE FROM problems WHERE line = 0 AND path NOT IN "
                         "(SELECT path FROM files)")
            conn.executemany(_INSERT_PROBLEM, sorted({(p.path, p.line, p.reason)
                                                      for p in changes.problems}))
        next_rowid = int(conn.execute("SELECT coalesce(max(rowid), 0) + 1 FROM records")
                         .fetchone()[0])
        batch = _flatten(record_rows, next_rowid, dense=True)
        _insert(conn, batch)
        conn.executemany(_INSERT_FILE, frows)
        conn.executemany(_INSERT_POLICY, prows)
        conn.executemany(_INSERT_PROBLEM, pproblems)
        fp ^= batch.fingerprint
        for f in frows:
            fp ^= file_digest(f[0], f[5])
        _write_meta(conn, {"fingerprint": xor_hex(fp), "snapshot": snapshot.to_json()})
    for fs in (*changes.records, *changes.policies):
        (report.changed if fs.relpath in stored_paths else report.added).append(fs.relpath)
    report.deleted = changes.deleted
    return report
