"""The rows of a run of record files, flattened for ``executemany``: what a rebuild's
parser processes make (:func:`parse_files`) and a refresh inserts (:func:`flatten` of
:func:`changed_rows`), and the statements that insert them (:func:`insert_batch`). Light
to import: a refresh of a few canonical files reads them without the record model."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from memidex.index.db import file_digest
from memidex.index.rows import FileRows, masker_of, rows_of, unreadable
from memidex.store.files import FileStat, Store

TYPE_CHECKING = False  # not typing's: the first search after an edit imports no typing
if TYPE_CHECKING:  # (segments: threading and queue, a rebuild's, not a refresh's)
    from typing import Any, NamedTuple

    from memidex.index.segments import Segment, SegmentMerger
    from memidex.masking import Masker
else:
    from memidex.plain import NamedTuple


__all__ = ["INSERT_ANCHOR", "INSERT_EDGE", "INSERT_FILE", "INSERT_FTS", "INSERT_POLICY",
           "INSERT_PROBLEM", "INSERT_RECORD", "INSERT_VERSION", "STAGE_ANCHOR", "Batch",
           "changed_rows", "flatten", "insert_batch", "parse_files"]


class Batch(NamedTuple):
    """The rows of a run of files, flattened for ``executemany`` (built where parsed)."""

    files: list[tuple[Any, ...]]
    records: list[tuple[Any, ...]]
    versions: list[tuple[Any, ...]]
    anchors: list[tuple[str, int, int]]
    edges: list[tuple[Any, ...]]
    problems: list[tuple[str, int, str]]
    fingerprint: int
    fts: Segment | None = None  # the records' FTS5 segment, made by a parser process


INSERT_RECORD = (
    "INSERT INTO records(rowid, id, path, kind, status, product, anchor, title, body, anchors,"
    " scope, source, confirmations, contradictions, last_confirmed, valid_from, valid_until,"
    " history) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
INSERT_VERSION = (
    "INSERT INTO history_versions(record_rowid, version, id, product, kind, status,"
    " valid_from, valid_until, title, body, anchors, source, confirmations, contradictions,"
    " last_confirmed) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
INSERT_FTS = "INSERT INTO records_fts(rowid, title, body, anchors) VALUES (?, ?, ?, ?)"
INSERT_FILE = "INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?)"
INSERT_ANCHOR = "INSERT OR IGNORE INTO anchors(anchor, record_rowid, main) VALUES (?,?,?)"
STAGE_ANCHOR = "INSERT INTO temp.staged_anchors(anchor, record_rowid, main) VALUES (?,?,?)"
INSERT_EDGE = "INSERT OR IGNORE INTO edges(record_rowid, src, rel, dst) VALUES (?,?,?,?)"
INSERT_PROBLEM = "INSERT INTO problems(path, line, reason) VALUES (?,?,?)"
INSERT_POLICY = "INSERT OR REPLACE INTO policies VALUES (?,?,?,?,?,?,?)"


def insert_batch(conn: sqlite3.Connection, batch: Batch, *, stage_anchors: bool = False,
                 segments: SegmentMerger | None = None,
                 indexed: AbstractSet[int] = frozenset()) -> None:
    """``stage_anchors``: into ``temp.staged_anchors`` (a rebuild), for one sorted insert
    at the end (:func:`_insert_staged_anchors`) — at 100,000 records the anchors' b-tree
    costs three times as much filled in record order. A batch's FTS5 segment, if it has
    one, goes to ``segments``. ``indexed``: rowids whose full-text entry and anchor rows
    are in the index already (a refresh kept them: the record's text did not change)."""
    conn.executemany(INSERT_FILE, batch.files)
    conn.executemany(INSERT_RECORD, batch.records)
    if batch.fts is not None and segments is not None:
        segments.put(batch.fts)
    else:
        # (rowid, title, body, anchors), built here: sent from a parser, the text would
        # cross the pipe twice
        conn.executemany(INSERT_FTS, [(r[0], r[7], r[8], r[9]) for r in batch.records
                                      if r[0] not in indexed])
    conn.executemany(INSERT_VERSION, batch.versions)
    anchors = batch.anchors if not indexed else \
        [a for a in batch.anchors if a[1] not in indexed]
    conn.executemany(STAGE_ANCHOR if stage_anchors else INSERT_ANCHOR, anchors)
    conn.executemany(INSERT_EDGE, batch.edges)
    conn.executemany(INSERT_PROBLEM, batch.problems)


def changed_rows(store: Store, fs: FileStat, masker: Masker,
                 data: bytes | None = None) -> FileRows:
    """The rows of one record file a refresh reloads (``masker``: :func:`masker_of` the
    store, read once by the caller; ``data``: the file's bytes, when the caller has them):
    a canonical file by the rebuild's row reader (:mod:`memidex.index.rowread`: no record
    model, no YAML reader), any other — and every file while a secrets file masks
    records — by the full path. Both give the same rows (property-tested). A file whose
    bytes this process wrote or parsed a moment ago (an ingest's: the codec recalls their
    record) takes the full path as the rebuild does (:func:`parse_files`): no parse then,
    and no row reader to compile."""
    from memidex.records.digest import content_hash

    mtime_ns, ino = fs.mtime_ns, fs.ino
    if data is None:
        try:
            data, st = store.read_with_stat(fs.relpath)
        except OSError as exc:
            return unreadable(fs, exc)
        mtime_ns, ino = st.mtime_ns, st.ino
    sha = content_hash(data)
    codec = sys.modules.get("memidex.records.codec")  # never imported: nothing to recall
    rows = None
    if not masker.secrets and (codec is None or codec.recall(sha) is None):
        from memidex.index.rowread import canonical_rows

        try:
            rows = canonical_rows(data.decode("utf-8"), fs.relpath)
        except UnicodeDecodeError:
            rows = None
    if rows is None:
        return rows_of(fs.relpath, data, mtime_ns, ino, masker, sha)
    record, vrows, arows, erows = rows
    frow = (fs.relpath, "record", len(data), mtime_ns, ino, sha)
    return FileRows(frow, record, tuple(vrows), tuple(arows), tuple(erows), ())


def flatten(rows: Sequence[FileRows], first_rowid: int, *, dense: bool,
            rowids: Mapping[str, int] | None = None) -> Batch:
    """Rows ready to insert. ``dense``: record rowids follow one another (a refresh);
    otherwise a file's rowid is ``first_rowid`` + its position (a rebuild: a file that
    does not parse leaves a gap, so rowids depend on nothing but the sorted paths).
    ``rowids``: the rowid a record keeps, by path (a refresh: all below ``first_rowid``)."""
    out = Batch([], [], [], [], [], [], 0)
    rowid = first_rowid
    fingerprint = 0
    for fr in rows:
        kept = rowids.get(fr.file[0]) if rowids and fr.record is not None else None
        if kept is not None:
            fingerprint ^= _add(out, fr, kept)
            continue
        fingerprint ^= _add(out, fr, rowid)
        if fr.record is not None or not dense:
            rowid += 1
    return out._replace(fingerprint=fingerprint)


def _add(out: Batch, fr: FileRows, rowid: int) -> int:
    """One file's rows into ``out`` (under ``rowid`` if a record); its fingerprint share."""
    out.problems.extend(fr.problems)
    if fr.record is not None:
        out.files.append((*fr.file, rowid))
        out.records.append((rowid, *fr.record))
        out.versions.extend((rowid, *v) for v in fr.versions)
        out.anchors.extend((a, rowid, main) for a, main in fr.anchors)
        out.edges.extend((rowid, *e) for e in fr.edges)
    else:
        out.files.append((*fr.file, None))
    return file_digest(fr.file[0], fr.file[5])


def parse_files(store: Store, files: Sequence[FileStat], start: int, end: int) -> Batch:
    """Files ``start:end`` parsed and flattened (a file's rowid: 1 + its position). A
    canonical file (:mod:`memidex.index.rowread`) goes straight to the batch's lists; any
    other takes the full path (:func:`memidex.index.rows.rows_of`)."""
    from memidex.index.rowread import FileReader, canonical_rows
    from memidex.records.codec import recall
    from memidex.records.digest import content_hash

    reader, masker = FileReader(str(store.root)), masker_of(store)
    out = Batch([], [], [], [], [], [], 0)
    frows, records, versions, anchors, edges = out[:5]
    fingerprint = 0
    try:
        for rowid, fs in enumerate(files[start:end], start=1 + start):
            relpath = fs.relpath
            try:
                data, st = reader.read(relpath)
            except OSError as exc:
                fingerprint ^= _add(out, unreadable(fs, exc), rowid)
                continue
            sha = content_hash(data)
            rows = None
            if not masker.secrets and recall(sha) is None:  # (recalled: the full path's)
                try:
                    rows = canonical_rows(data.decode("utf-8"), relpath)
                except UnicodeDecodeError:
                    pass
            if rows is None:
                fingerprint ^= _add(out, rows_of(relpath, data, st.st_mtime_ns, st.st_ino,
                                                 masker, sha), rowid)
                continue
            record, vrows, arows, erows = rows
            frows.append((relpath, "record", len(data), st.st_mtime_ns, st.st_ino, sha, rowid))
            records.append((rowid, *record))
            if vrows:
                versions += [(rowid, *v) for v in vrows]
            anchors += [(a, rowid, main) for a, main in arows]
            if erows:
                edges += [(rowid, *e) for e in erows]
            fingerprint ^= file_digest(relpath, sha)
    finally:
        reader.close()
    return out._replace(fingerprint=fingerprint)
