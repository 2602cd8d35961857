"""Bringing the index up to date with the files incrementally (SPEC §4).

:func:`detect_changes` asks the staleness check (:mod:`memidex.index.staleness`) which
files may differ, compares their stat and content hash with the ``files`` table, and
:func:`refresh` replaces just those files' rows inside one write transaction. Every row is
a pure function of one file's bytes (:func:`memidex.index.batches.changed_rows`: a
canonical file by the rebuild's row reader, without the record model; any other by the
full path), so a refresh leaves the same rows as a full rebuild (a hypothesis test checks
this). SQLite's errors
leave this module as :class:`memidex.errors.IndexUnavailableError` errors.

After an ingest the refresh is fed from the change set instead (:func:`landed`,
:func:`fed_by_landed`): the
files it wrote are the only ones looked at — no git call, no scan, which over a big
knowledge folder is most of an ingest's time — and they stay *named* in the snapshot, so
the next look by git looks at them again whatever happens to them meanwhile. The
snapshot's other claims are the last look's, unchanged: anything else that changed
since is still found by the next refresh, exactly as if this one had not run (and every
read refreshes before it answers).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat as stat_mod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

from memidex.errors import Problem
from memidex.index import maskmark, staleness
from memidex.index.db import (
    IndexDB,
    file_digest,
    in_chunks,
    translating,
    write_meta,
    xor_hex,
)
from memidex.index.staleness import RACY_NS, Snapshot, suspects
from memidex.masking import secrets_path
from memidex.plain import Plain
from memidex.store import visibility
from memidex.store.files import FileStat, Store

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Changes", "RefreshReport", "detect_changes", "fed_by_landed", "landed",
           "refresh"]


class RefreshReport(Plain):
    """What a refresh did. ``interrupted``: a change set whose install did not finish
    (its writer died, or is stuck): the files read may hold part of it until the next
    writer's recovery rolls it forward."""

    __slots__ = ("added", "changed", "deleted", "method", "interrupted")

    def __init__(self, added: list[str] | None = None, changed: list[str] | None = None,
                 deleted: list[str] | None = None, method: str = "stat",
                 interrupted: str | None = None) -> None:
        self.added: list[str] = [] if added is None else added
        self.changed: list[str] = [] if changed is None else changed
        self.deleted: list[str] = [] if deleted is None else deleted
        self.method = method
        self.interrupted = interrupted

    @property
    def touched(self) -> int:
        return len(self.added) + len(self.changed) + len(self.deleted)


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


def _stored_of(conn: sqlite3.Connection, paths: Sequence[str]) -> Stored:
    """The stored file rows of ``paths`` (those the index has), a statement a chunk."""
    out: Stored = {}
    for chunk, marks in in_chunks(paths):
        for row in conn.execute(f"{_FILE_COLS} WHERE path IN ({marks})", chunk):
            out[row[0]] = (row[1], row[2], row[3], row[4], row[5])
    return out


class Changes(Plain):
    """What differs from the index: files to (re)load, paths gone, scan problems
    (``problems``: the folder scan's, when a full scan ran)."""

    __slots__ = ("records", "policies", "deleted", "problems", "snapshot", "method")

    def __init__(self, records: list[FileStat] | None = None,
                 policies: list[FileStat] | None = None, deleted: list[str] | None = None,
                 problems: list[Problem] | None = None, snapshot: Snapshot | None = None,
                 method: str = "stat") -> None:
        self.records: list[FileStat] = [] if records is None else records
        self.policies: list[FileStat] = [] if policies is None else policies
        self.deleted: list[str] = [] if deleted is None else deleted
        self.problems = problems
        self.snapshot = snapshot
        self.method = method

    @property
    def empty(self) -> bool:
        return not (self.records or self.policies or self.deleted or self.problems is not None)


def _compare(store: Store, stored: Stored, current: list[FileStat], racy_after: int,
             policies_rel: str, out: Changes, *, verify: AbstractSet[str] = frozenset()
             ) -> None:
    """Sort ``current`` files against ``stored`` rows: changed ones into ``out``.

    A file whose stat matches is trusted unless it is too recent or in ``verify``. (The
    hashing is imported only when a file needs it: a search on an up-to-date index goes
    without ``hashlib``.)"""
    policy_prefix = policies_rel + "/"
    for fs in current:
        kind = "policy" if fs.relpath.startswith(policy_prefix) else "record"
        target = out.policies if kind == "policy" else out.records
        old = stored.get(fs.relpath)
        if old is None or old[0] != kind:
            target.append(fs)
            continue
        same_stat = (old[1], old[2], old[3]) == (fs.size, fs.mtime_ns, fs.ino)
        if same_stat and fs.mtime_ns < racy_after and fs.relpath not in verify:
            continue
        from memidex.records.digest import content_hash

        try:
            sha = content_hash(store.read_bytes(fs.relpath))
        except OSError:
            target.append(fs)
            continue
        if sha != old[4] or not same_stat:
            target.append(fs)


def detect_changes(store: Store, db: IndexDB, *, generation: str | None = None) -> Changes:
    """Compare the files with what the index was built from (git or stat, then hash).

    ``generation``: the visibility generation read under the shared lock; a git answer
    prefetched under another generation (a change set landed since) is not used."""
    snap = Snapshot.from_json(db.meta().get("snapshot"))
    racy_after = (snap.scan_ns if snap else 0) - RACY_NS
    tops = [store.records_rel, store.policies_rel]
    conn = db.conn
    sus = suspects(str(store.root), tops, snap, generation=generation,
                   keep=lambda path: _watched(store, path))
    out = Changes(method=sus.method)
    if not sus.full:
        paths = sorted(p for p in sus.paths if _watched(store, p))
        found = _lstat_files(str(store.root), paths)
        if found is not None:  # (a symlink among them: the full scan judges it)
            stored = _stored_of(conn, paths)
            out.deleted.extend(p for p in paths if found.get(p) is None and p in stored)
            _compare(store, stored, [fs for fs in found.values() if fs is not None],
                     racy_after, store.policies_rel, out, verify=sus.verify)
            out.snapshot = sus.snapshot
            return out
    before = staleness.before_scan(str(store.root))
    records, policies, problems, dirs = store.scan_all()
    stored_all = _stored_files(conn)
    seen = {f.relpath for f in records} | {f.relpath for f in policies}
    _compare(store, stored_all, [*records, *policies], racy_after, store.policies_rel, out)
    out.deleted = sorted(p for p in stored_all if p not in seen)
    if _scan_problems_differ(conn, problems):
        out.problems = problems
    from memidex.index.build import full_snapshot

    out.snapshot = full_snapshot(store, [*records, *policies], dirs, before)
    out.method = out.snapshot.method
    return out


_LANDED: dict[str, set[str]] = {}
_WROTE: dict[str, dict[str, bytes]] = {}  # root -> path -> the bytes written there
_GIVEN: dict[str, dict[str, bytes]] = {}  # what _landed_changes hands to refresh
_FED: set[str] = set()


def landed(store: Store, paths: Iterable[str],
           data: Mapping[str, bytes] | None = None) -> None:
    """Note that this process just wrote the record files ``paths`` (root-relative) of
    ``store`` through one change set (an ingest's), for the refresh that follows it —
    only inside a :func:`fed_by_landed` block: a change set applied for someone else (a
    daemon's inbox item from another process) leaves nothing behind. ``data``: the bytes
    written (by path): the refresh builds those files' rows from them instead of reading
    the files back, when the file's size is theirs — the paths stay *named*, so the next
    look hashes what is on disk whatever happened to it meanwhile."""
    root = str(store.root)
    if root in _FED:
        _LANDED.setdefault(root, set()).update(paths)
        _WROTE.setdefault(root, {}).update(data or {})


@contextlib.contextmanager
def fed_by_landed(store: Store) -> Iterator[None]:
    """Within the block (an ingest and the refresh right after it), a :func:`refresh` of
    ``store``'s index looks at the files :func:`landed` named and nothing else (see the
    module doc) — unless the index's last look was not git's, or a watcher names the
    changes (a warm server's): then it looks as always. The notes are dropped at the end
    of the block, so no other refresh ever takes them."""
    root = str(store.root)
    _FED.add(root)
    try:
        yield
    finally:
        _FED.discard(root)
        _LANDED.pop(root, None)
        _WROTE.pop(root, None)
        _GIVEN.pop(root, None)


def _landed_changes(store: Store, db: IndexDB) -> Changes | None:
    """The changes of the files :func:`landed` named (taken), or None to look as always."""
    root = str(store.root)
    if root not in _FED:
        return None
    paths = _LANDED.pop(root, None)
    if not paths or staleness.is_watched(root):
        return None
    snap = Snapshot.from_json(db.meta().get("snapshot"))
    if snap is None or snap.method != "git":
        return None
    out = Changes(method="git")
    policy_prefix = store.policies_rel + "/"
    gone: list[str] = []
    for path in sorted(paths):
        fs = store.stat_file(path)
        if fs is None:
            gone.append(path)
        else:  # just written: reloaded, unread and unhashed here (its rows are a pure
            # function of its bytes: the ones written, or read back; reloading is never
            # wrong)
            (out.policies if path.startswith(policy_prefix) else out.records).append(fs)
    if gone:
        stored = _stored_of(db.conn, gone)
        out.deleted.extend(p for p in gone if p in stored)
    out.snapshot = snap.replace(named=sorted(set(snap.named) | paths))
    _GIVEN[root] = _WROTE.pop(root, {})
    return out


def _lstat_files(root: str, paths: Sequence[str]) -> dict[str, FileStat | None] | None:
    """Each path's stat (None: gone, or not a regular file), one ``lstat`` a path; None
    when one of them is a symlink."""
    out: dict[str, FileStat | None] = {}
    for path in paths:
        try:
            st = os.lstat(os.path.join(root, path))
        except OSError:
            out[path] = None
            continue
        mode = st.st_mode
        if stat_mod.S_ISLNK(mode):
            return None
        out[path] = FileStat(path, st.st_size, st.st_mtime_ns, st.st_ino) \
            if stat_mod.S_ISREG(mode) else None
    return out


def _watched(store: Store, path: str) -> bool:
    """A path a reported change can matter for: a record or a policy file, or (ending in
    ``/``) a folder the scan walks: one under the records folder, or the policies
    folder (not its sub-folders)."""
    if path[:1] == "." or "/." in path:  # (a hidden part: a look names thousands)
        return False
    if path.startswith(store.records_rel + "/") and path.endswith((".md", "/")) or \
            path == store.policies_rel + "/":
        return True
    folder = path.rsplit("/", 1)[0]
    return folder == store.policies_rel and path.endswith((".yaml", ".yml"))


def _scan_problems_differ(conn: sqlite3.Connection, problems: list[Problem]) -> bool:
    """Do the folder-scan problems (line 0, no file row) differ from the stored ones?"""
    rows = conn.execute(
        "SELECT path, line, reason FROM problems WHERE line = 0 AND path NOT IN "
        "(SELECT path FROM files)").fetchall()
    return sorted(rows) != sorted((p.path, p.line, p.reason) for p in problems)


def _delete_paths(conn: sqlite3.Connection, paths: Sequence[str],
                  found: set[str] | None = None,
                  texts: Mapping[str, tuple[str, str, str]] | None = None,
                  kept: dict[str, int] | None = None) -> int:
    """Remove every row the files ``paths`` contributed — a few statements for the whole
    batch, not ten a file; returns their fingerprint share (XORed; 0 for a file the index
    did not have). ``found``: gets each path that had rows (it was in the index).

    ``texts``: the (title, body, anchors) each file's new record row will have. A record
    whose old row has the same keeps its rowid (into ``kept``, by path): its full-text
    entry and its anchor rows — a pure function of those three and the rowid — stay as
    they are, the rest of its rows go (its record row too: its vector with it, as for any
    changed record); the caller inserts the new rows under that rowid. A confirm rewrites
    each record's trust and evidence, never its text."""
    fp = 0
    rowids: list[int] = []
    had: list[str] = []  # the paths with a file row (only they can have policy rows)
    path_of: dict[int, str] = {}
    for chunk, marks in in_chunks(paths):
        for path, sha, rowid in conn.execute(
                f"SELECT path, sha256, record_rowid FROM files WHERE path IN ({marks})", chunk):
            had.append(path)
            fp ^= file_digest(path, sha)
            if rowid is not None:
                rowids.append(rowid)
                path_of[rowid] = path
    if found is not None:
        found.update(had)
    for chunk, marks in in_chunks(rowids):
        recs = conn.execute(f"SELECT rowid, title, body, anchors FROM records WHERE rowid IN"
                            f" ({marks})", chunk).fetchall()
        if not recs:
            continue
        gone = recs
        if texts and kept is not None:
            gone = []
            for rec in recs:
                path = path_of[rec[0]]
                if texts.get(path) == rec[1:] and path not in kept:
                    kept[path] = rec[0]
                else:
                    gone.append(rec)
        conn.executemany("INSERT INTO records_fts(records_fts, rowid, title, body, anchors)"
                         " VALUES('delete', ?, ?, ?, ?)", gone)
        conn.executemany("DELETE FROM anchors WHERE anchor = ? AND record_rowid = ?",
                         [(a, rowid) for rowid, _t, _b, anchors in gone
                          for a in anchors.split("\n")])
        present = [rec[0] for rec in recs]  # (a file row naming no record row: no more)
        marks = ",".join("?" * len(present))
        conn.execute(f"DELETE FROM edges WHERE record_rowid IN ({marks})", present)
        conn.execute(f"DELETE FROM history_versions WHERE record_rowid IN ({marks})", present)
        conn.execute(f"DELETE FROM records WHERE rowid IN ({marks})", present)
    for chunk, marks in in_chunks(had):
        conn.execute(f"DELETE FROM policies WHERE path IN ({marks})", chunk)
        conn.execute(f"DELETE FROM files WHERE path IN ({marks})", chunk)
    for chunk, marks in in_chunks(paths):  # a file the index never had may have problems
        conn.execute(f"DELETE FROM problems WHERE path IN ({marks})", chunk)
    return fp


def _secrets_checked(store: Store, db: IndexDB) -> str | None:
    """:func:`memidex.index.maskmark.compare` of the secrets file with the index's mark:
    None (as it was), the mark to write (the same secrets), or :class:`MaskChanged`."""
    row = db.conn.execute("SELECT value FROM meta WHERE key = ?", (maskmark.KEY,)).fetchone()
    return maskmark.compare(secrets_path(store.config),
                            None if row is None else str(row[0]))


def _racy(snap: Snapshot) -> bool:
    """Was something too recent to trust at that look (so a later look should be kept)?"""
    limit = snap.scan_ns - RACY_NS
    return snap.git_index_mtime >= limit or any(m >= limit for m in snap.dirs.values())


@translating
def refresh(store: Store, db: IndexDB) -> RefreshReport:
    """Bring the index up to date with the files, touching only what changed.

    The files are read holding the visibility lock shared (:mod:`memidex.store.visibility`),
    so every change set is seen whole: all its files old or all new. (The build's row
    projection is imported only when something changed: a search on an up-to-date index
    does without it.)"""
    remarked = _secrets_checked(store, db)  # MaskChanged: rebuild, the facade's to do
    with visibility.shared(store.knowledge) as vis:
        changes = _landed_changes(store, db) or detect_changes(
            store, db, generation=vis.generation)
        given = _GIVEN.pop(str(store.root), {})  # bytes an ingest wrote a moment ago
        if not changes.empty:
            from memidex.index.batches import changed_rows
            from memidex.index.rows import masker_of

            masker = masker_of(store)  # one look at the secrets file, not one a file
            record_rows = []
            for fs in changes.records:
                data = given.get(fs.relpath)  # the bytes written, when still what is there
                record_rows.append(changed_rows(
                    store, fs, masker, data if data is not None and len(data) == fs.size
                    else None))
            frows: list[Any] = []
            prows: list[Any] = []
            pproblems: list[Any] = []
            if changes.policies:
                from memidex.index.build import policy_rows

                frows, prows, pproblems = policy_rows(store, changes.policies)
    report = RefreshReport(method=changes.method, interrupted=vis.interrupted)
    conn = db.conn

    snapshot = changes.snapshot
    assert snapshot is not None
    marks = {} if remarked is None else {maskmark.KEY: remarked}
    if changes.empty:
        old = Snapshot.from_json(db.meta().get("snapshot"))
        if old is not None and old.same_state(snapshot) and not _racy(old) and not marks:
            return report  # nothing changed, nothing to remember: no write at all
        if db.readonly:
            return report  # up to date; the new snapshot only saves the next look time
        try:
            with db.begin_write():
                write_meta(conn, {"snapshot": snapshot.to_json(), **marks})
        except sqlite3.OperationalError:
            pass  # read-only, locked or a full disk: the index is up to date all the same
        return report
    from memidex.index.batches import (
        INSERT_FILE,
        INSERT_POLICY,
        INSERT_PROBLEM,
        flatten,
        insert_batch,
    )

    stored_paths: set[str] = set()  # the changed files the index had (the others: added)
    with db.begin_write():
        fp = int(db.meta().get("fingerprint", "0"), 16)
        fp ^= _delete_paths(conn, changes.deleted)
        texts = {fr.file[0]: (fr.record[6], fr.record[7], fr.record[8])
                 for fr in record_rows if fr.record is not None}
        kept: dict[str, int] = {}  # path -> the rowid its record keeps (same text)
        fp ^= _delete_paths(conn, [fs.relpath for fs in (*changes.records,
                                                         *changes.policies)], stored_paths,
                            texts, kept)
        if changes.problems is not None:
            conn.execute("DELETE FROM problems WHERE line = 0 AND path NOT IN "
                         "(SELECT path FROM files)")
            conn.executemany(INSERT_PROBLEM, sorted({(p.path, p.line, p.reason)
                                                      for p in changes.problems}))
        next_rowid = max(int(conn.execute("SELECT coalesce(max(rowid), 0) + 1 FROM records")
                             .fetchone()[0]), max(kept.values(), default=0) + 1)
        batch = flatten(record_rows, next_rowid, dense=True, rowids=kept)
        insert_batch(conn, batch, indexed=frozenset(kept.values()))
        conn.executemany(INSERT_FILE, frows)
        conn.executemany(INSERT_POLICY, prows)
        conn.executemany(INSERT_PROBLEM, pproblems)
        fp ^= batch.fingerprint
        for f in frows:
            fp ^= file_digest(f[0], f[5])
        write_meta(conn, {"fingerprint": xor_hex(fp), "snapshot": snapshot.to_json(),
                          **marks})
    for fs in (*changes.records, *changes.policies):
        (report.changed if fs.relpath in stored_paths else report.added).append(fs.relpath)
    report.deleted = changes.deleted
    return report
