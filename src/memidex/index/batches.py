"""The rows of a run of record files, flattened for ``executemany``: what a rebuild's
parser processes make (:func:`parse_files`) and a refresh inserts (:func:`flatten`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from memidex.index.db import file_digest
from memidex.index.rows import FileRows, masker_of, rows_of, unreadable
from memidex.index.segments import Segment
from memidex.store.files import FileStat, Store

__all__ = ["Batch", "flatten", "parse_files"]


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


def flatten(rows: Sequence[FileRows], first_rowid: int, *, dense: bool) -> Batch:
    """Rows ready to insert. ``dense``: record rowids follow one another (a refresh);
    otherwise a file's rowid is ``first_rowid`` + its position (a rebuild: a file that
    does not parse leaves a gap, so rowids depend on nothing but the sorted paths)."""
    out = Batch([], [], [], [], [], [], 0)
    rowid = first_rowid
    fingerprint = 0
    for fr in rows:
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
                                                 masker), rowid)
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
