"""The full-text index of a rebuild, built where the files are parsed.

Tokenizing every title, body and anchor list for FTS5 is the largest part of what the
inserting parent of a rebuild does. Instead each parser process runs its batch through
an FTS5 table of its own (in memory, contentless, the same columns and tokenizer as
``records_fts``) and sends the one segment that makes, in SQLite's own format: the
``%_data`` pages, the ``%_idx`` rows and the ``%_docsize`` rows. A thread of the parent
(:class:`SegmentMerger`) copies them into the shadow tables of a like FTS5 table in a
file beside the build, under segment ids of its own (:class:`SegmentCopier`), writes the
structure record (which segments exist) and the averages record (rows and tokens in
all), and lets FTS5's own ``optimize`` merge the segments into one while the parent
builds the other tables' indexes; the parent then copies that one segment into
``records_fts``. The index is the one a row-by-row insert and ``optimize`` make, term
for term and row for row (tests/test_segments.py holds the two to each other).

The records written (FTS5's ``fts5_index.c``): the structure record (rowid 10) is a
4-byte cookie, then varints: levels, segments, write counter, and per level the
segments in a merge, the segments, and per segment its id, first and last leaf page;
the averages record (rowid 1) is varints: rows, then tokens per column; a segment's
pages have rowids ``segid << 37 | …``. This legacy structure format is what FTS5
writes for every table but a ``contentless_delete=1`` one (which ``records_fts`` is
not). Anything else — a structure record not of that form, shadow tables SQLite
will not let a statement write (``SQLITE_DBCONFIG_DEFENSIVE``), an FTS5 configured
otherwise than by default — and the parent inserts the rows into ``records_fts``
itself, as before.
"""

from __future__ import annotations

import math
import queue
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from memidex.index.schema import TOKENIZER

__all__ = ["Segment", "SegmentCopier", "SegmentMerger", "SegmentWriter", "accepts_segments"]

Segment = tuple[list[tuple[int, bytes]], list[tuple[int, bytes, int]], list[tuple[int, bytes]]]
"""(``%_data`` rows, ``%_idx`` rows, ``%_docsize`` rows) of one batch's FTS5 table."""

_SEGID_SHIFT = 37  # FTS5_DATA_PAGE_B + FTS5_DATA_HEIGHT_B + FTS5_DATA_DLI_B
_AVERAGES_ROWID = 1
_STRUCTURE_ROWID = 10
_MAX_SEGID = 65535  # 16 bits of the page rowids
_MERGE_AT = 1000  # segments held before an intermediate optimize (FTS5 allows 2000)
_DEFAULT_CONFIG = [("version", 4)]


def _varint(v: int) -> bytes:
    """SQLite's varint: big-endian groups of 7 bits, a 9th byte of 8."""
    if v < 0:
        v += 1 << 64
    if v <= 0x7F:
        return bytes((v,))
    if v > 0x00FFFFFFFFFFFFFF:
        out = bytearray(9)
        out[8] = v & 0xFF
        v >>= 8
        for i in range(7, -1, -1):
            out[i] = (v & 0x7F) | 0x80
            v >>= 7
        return bytes(out)
    groups = []
    while v:
        groups.append((v & 0x7F) | 0x80)
        v >>= 7
    groups[0] &= 0x7F
    return bytes(reversed(groups))


def _varints(data: bytes, pos: int = 0) -> list[int]:
    """Every varint of ``data`` from ``pos``; ValueError when one is cut short."""
    out: list[int] = []
    n = len(data)
    while pos < n:
        v = 0
        for _ in range(8):
            if pos >= n:
                raise ValueError("a varint cut short")
            c = data[pos]
            pos += 1
            v = (v << 7) | (c & 0x7F)
            if c < 0x80:
                break
        else:
            if pos >= n:
                raise ValueError("a varint cut short")
            v = (v << 8) | data[pos]
            pos += 1
        out.append(v)
    return out


def _segments_of(structure: bytes) -> list[tuple[int, int, int]]:
    """(segment id, first leaf, last leaf) of every segment of a legacy-format structure
    record, oldest level first; ValueError for anything else."""
    if len(structure) < 7 or structure[4] == 0xFF:  # 0xFF: the V2 format's marker
        raise ValueError("not a legacy FTS5 structure record")
    values = _varints(structure, 4)
    n_levels, n_segments = values[0], values[1]
    pos, segments = 3, []
    for _ in range(n_levels):
        n_merge, n_seg = values[pos], values[pos + 1]
        if n_merge:
            raise ValueError("a merge under way")
        pos += 2
        for _ in range(n_seg):
            segid, first, last = values[pos : pos + 3]
            if not 0 < segid <= _MAX_SEGID or not 0 < first <= last:
                raise ValueError("a segment out of range")
            segments.append((segid, first, last))
            pos += 3
    if pos != len(values) or len(segments) != n_segments:
        raise ValueError("an FTS5 structure record of another shape")
    return segments


def _structure(cookie: bytes, levels: Sequence[Sequence[tuple[int, int, int]]],
               writes: int) -> bytes:
    parts = [cookie, _varint(len(levels)), _varint(sum(map(len, levels))), _varint(writes)]
    for level in levels:
        parts += [_varint(0), _varint(len(level))]
        parts += [_varint(v) for seg in level for v in seg]
    return b"".join(parts)


def _fts_table(name: str, content: str) -> str:
    return (f"CREATE VIRTUAL TABLE {name} USING fts5(title, body, anchors, content={content},"
            f" tokenize='{TOKENIZER}')")


class SegmentWriter:
    """In a parser process: one FTS5 segment for each batch of records, from an
    in-memory table emptied after each."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        self.conn.execute(_fts_table("f", "''"))
        # one segment a batch, however large: flushed at the commit only
        self.conn.execute("INSERT INTO f(f, rank) VALUES('hashsize', 1073741824)")

    def segment(self, rows: Iterable[tuple[int, str, str, str]]) -> Segment:
        """The segment of these (rowid, title, body, anchors) rows, rowids ascending."""
        c = self.conn
        c.execute("BEGIN")
        c.executemany("INSERT INTO f(rowid, title, body, anchors) VALUES (?,?,?,?)", rows)
        c.execute("COMMIT")
        out = (c.execute("SELECT id, block FROM f_data").fetchall(),
               c.execute("SELECT segid, term, pgno FROM f_idx").fetchall(),
               c.execute("SELECT id, sz FROM f_docsize").fetchall())
        c.execute("INSERT INTO f(f) VALUES('delete-all')")
        return out


def accepts_segments(conn: sqlite3.Connection) -> bool:
    """Whether the empty ``records_fts`` of ``conn`` can take copied segments: its shadow
    tables writable, its configuration the default one a :class:`SegmentWriter`'s has,
    its structure record of the legacy format."""
    try:
        conn.execute("DELETE FROM records_fts_docsize WHERE 0")  # refused when defensive
        config = conn.execute("SELECT k, v FROM records_fts_config ORDER BY k").fetchall()
        row = conn.execute("SELECT block FROM records_fts_data WHERE id = ?",
                           (_STRUCTURE_ROWID,)).fetchone()
        probe = sqlite3.connect(":memory:")
        try:
            probe.execute(_fts_table("f", "''"))
            their = probe.execute("SELECT k, v FROM f_config ORDER BY k").fetchall()
        finally:
            probe.close()
    except sqlite3.Error:
        return False
    if config != their or config != _DEFAULT_CONFIG or row is None:
        return False
    try:
        return _segments_of(bytes(row[0])) == []
    except ValueError:
        return False


class SegmentCopier:
    """The segments copied into the ``records_fts`` of ``conn``, then merged into one
    (:meth:`finish`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.segments: list[tuple[int, int, int]] = []  # in the structure, oldest first
        self.used: set[int] = set()
        self.copied = 0
        self.leaves = 0  # the write counter: leaf pages written (as FTS5 counts them)
        self.totals: list[int] = []  # rows, then tokens per column

    def _next_segid(self) -> int:
        segid = 1
        while segid in self.used:
            segid += 1
        if segid > _MAX_SEGID:
            raise ValueError("no FTS5 segment id left")
        self.used.add(segid)
        return segid

    def add(self, segment: Segment) -> None:
        data, idx, sizes = segment
        pages: list[tuple[int, bytes]] = []
        theirs: list[tuple[int, int, int]] = []
        averages: list[int] = []
        for rowid, block in data:
            if rowid == _STRUCTURE_ROWID:
                theirs = _segments_of(block)
            elif rowid == _AVERAGES_ROWID:
                averages = _varints(block)
            else:
                pages.append((rowid, block))
        if not theirs:
            return  # a batch of files none of which is a record
        if len(self.segments) + len(theirs) > _MERGE_AT:
            self._merge()
        shift: dict[int, int] = {}
        for segid, first, last in theirs:
            ours = self._next_segid()
            shift[segid] = (ours - segid) << _SEGID_SHIFT
            self.segments.append((ours, first, last))
        self.conn.executemany("INSERT INTO records_fts_data(id, block) VALUES (?, ?)",
                              [(r + shift[r >> _SEGID_SHIFT], b) for r, b in pages])
        self.conn.executemany("INSERT INTO records_fts_idx(segid, term, pgno) VALUES (?, ?, ?)",
                              [(s + (shift[s] >> _SEGID_SHIFT), t, p) for s, t, p in idx])
        self.conn.executemany("INSERT INTO records_fts_docsize(id, sz) VALUES (?, ?)", sizes)
        if len(averages) > len(self.totals):
            self.totals += [0] * (len(averages) - len(self.totals))
        for i, v in enumerate(averages):
            self.totals[i] += v
        self.copied += len(theirs)
        self.leaves += sum(last - first + 1 for _, first, last in theirs)

    def _write(self, levels: Sequence[Sequence[tuple[int, int, int]]]) -> None:
        (old,) = self.conn.execute("SELECT block FROM records_fts_data WHERE id = ?",
                                   (_STRUCTURE_ROWID,)).fetchone()
        self.conn.execute("UPDATE records_fts_data SET block = ? WHERE id = ?",
                          (_structure(bytes(old[:4]), levels, self.leaves), _STRUCTURE_ROWID))

    def _merge(self) -> None:
        """Every segment so far merged into one by FTS5 (which re-reads the structure
        record: what it cached, its writes dropped)."""
        self._write([self.segments])
        self.conn.execute("UPDATE records_fts_data SET block = ? WHERE id = ?",
                          (b"".join(map(_varint, self.totals)), _AVERAGES_ROWID))
        self.conn.execute("INSERT INTO records_fts(records_fts) VALUES('optimize')")
        (block,) = self.conn.execute("SELECT block FROM records_fts_data WHERE id = ?",
                                     (_STRUCTURE_ROWID,)).fetchone()
        self.segments = _segments_of(bytes(block))
        self.used = {s[0] for s in self.segments}

    def finish(self) -> None:
        """The segments merged into one, left at the level FTS5's automerge would have
        raised it to (4 segments a level: a later refresh's small segments merge among
        themselves long before they touch it)."""
        if not self.copied:
            return
        self._merge()
        if len(self.segments) == 1:
            level = 1 + max(1, math.ceil(math.log(self.copied, 4)))
            self._write([[] for _ in range(level)] + [self.segments])


class SegmentMerger:
    """The copied segments' own FTS5 table, in a file beside the build and a thread of
    its own: it takes the segments as the batches come (:meth:`put`), merges them while
    the parent builds the other tables' indexes (:meth:`finish`: SQLite lets go of the
    GIL while it works), and the parent then copies the merged index into
    ``records_fts`` in one pass (:meth:`copy_into`). The file is a build file: a killed
    rebuild's is removed by the next (:mod:`memidex.index.leftovers`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            self.conn.executescript(
                "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-32768;"
                "PRAGMA locking_mode=EXCLUSIVE;")
            self.conn.execute(_fts_table("records_fts", "''"))  # the same index, contentless
            self.conn.execute("BEGIN")
        except BaseException:
            self.conn.close()
            path.unlink(missing_ok=True)
            raise
        self.copier = SegmentCopier(self.conn)
        self.queue: queue.SimpleQueue[Segment | None] = queue.SimpleQueue()
        self.failure: BaseException | None = None
        self.abandoned = False
        # started with the first segment: after the parser processes are forked (a thread
        # running while a process forks can leave a lock held in the child)
        self.thread = threading.Thread(target=self._run, name="memidex-fts", daemon=True)

    def _run(self) -> None:
        ended = False
        try:
            while (segment := self.queue.get()) is not None:
                self.copier.add(segment)
            ended = True
            if self.abandoned:
                return
            self.copier.finish()
            self.conn.execute("COMMIT")
        except BaseException as exc:  # noqa: BLE001 - raised in the parent by copy_into
            self.failure = exc
            while not ended and self.queue.get() is not None:  # take the parent's puts
                pass

    def put(self, segment: Segment) -> None:
        if self.thread.ident is None:
            self.thread.start()
        self.queue.put(segment)

    def finish(self) -> None:
        """Start the merge (returns at once)."""
        if self.thread.ident is None:
            self.thread.start()
        self.queue.put(None)

    def copy_into(self, conn: sqlite3.Connection) -> int:
        """Wait for the merge, then copy the index into ``conn``'s empty ``records_fts``
        (outside a transaction: ATTACH needs that) and remove the file. Returns how many
        segments were copied from the parser processes."""
        self.thread.join()
        self.conn.close()
        if isinstance(self.failure, ValueError):  # a segment of a shape not known here
            raise sqlite3.DatabaseError(f"an FTS5 segment: {self.failure}")
        if self.failure is not None:
            raise self.failure
        if not self.copier.copied:  # not one record: the empty table stands
            self.path.unlink(missing_ok=True)
            return 0
        (old,) = conn.execute("SELECT block FROM records_fts_data WHERE id = ?",
                              (_STRUCTURE_ROWID,)).fetchone()
        cookie = bytes(old[:4])
        conn.execute("ATTACH DATABASE ? AS merged", (str(self.path),))
        try:
            conn.execute("BEGIN")
            conn.execute("DELETE FROM main.records_fts_data")
            conn.execute("INSERT INTO main.records_fts_data(id, block)"
                         " SELECT id, block FROM merged.records_fts_data ORDER BY id")
            conn.execute("INSERT INTO main.records_fts_idx(segid, term, pgno)"
                         " SELECT segid, term, pgno FROM merged.records_fts_idx")
            conn.execute("INSERT INTO main.records_fts_docsize(id, sz)"
                         " SELECT id, sz FROM merged.records_fts_docsize ORDER BY id")
            # the structure record under this table's configuration cookie
            (merged,) = conn.execute("SELECT block FROM main.records_fts_data WHERE id = ?",
                                     (_STRUCTURE_ROWID,)).fetchone()
            conn.execute("UPDATE main.records_fts_data SET block = ? WHERE id = ?",
                         (cookie + bytes(merged[4:]), _STRUCTURE_ROWID))
            conn.execute("COMMIT")
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.execute("DETACH DATABASE merged")
        self.path.unlink(missing_ok=True)
        return self.copier.copied

    def abandon(self) -> None:
        """After a failure elsewhere: stop the thread, remove the file."""
        self.abandoned = True  # no merge, should it not have started
        if self.thread.is_alive():
            self.queue.put(None)
            self.thread.join()
        self.conn.close()
        self.path.unlink(missing_ok=True)
