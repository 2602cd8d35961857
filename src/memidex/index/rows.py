"""What one record file contributes to the index: its rows, a pure function of its bytes.

The full path parses the file (:mod:`memidex.records.codec`), validates it, masks it for
the index (:func:`memidex.masking.index_view`) and projects it (:func:`record_row`,
:func:`history_rows`). A rebuild first offers each file to the canonical row reader
(:func:`memidex.index.rowread.canonical_rows`), which gives the same rows for a canonical
file without building a record, and takes the full path for any other.
"""

from __future__ import annotations

import json

from memidex.errors import RecordError
from memidex.masking import Masker, secrets_path
from memidex.records.ids import scope_json
from memidex.store.files import FileStat, LoadedRecord, Store

TYPE_CHECKING = False  # not typing's: the first search after an edit imports no typing
if TYPE_CHECKING:
    from typing import Any, NamedTuple

    from memidex.records.model import Record
else:
    from memidex.plain import NamedTuple

__all__ = ["FileRows", "file_rows", "history_rows", "masker_of", "record_row", "rows_of",
           "unreadable"]


class FileRows(NamedTuple):
    """Everything one record file contributes to the index (a tuple: cheap to pickle
    from a parser process)."""

    file: tuple[str, str, int, int, int, str]
    record: tuple[Any, ...] | None
    versions: tuple[tuple[Any, ...], ...]  # history_versions rows, without the rowid
    anchors: tuple[tuple[str, int], ...]  # (anchor, main)
    edges: tuple[tuple[str, str, str], ...]
    problems: tuple[tuple[str, int, str], ...]


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


def history_rows(r: Record) -> tuple[tuple[Any, ...], ...]:
    """One ``history_versions`` row per earlier version (without the record's rowid),
    what the file leaves out filled in as :meth:`HistoryEntry.resolved` says."""
    out = []
    for n, h in enumerate(r.history, start=1):
        trust, anchors, status = h.resolved(r)
        out.append((
            n, r.id, r.product, r.kind, status, h.valid.from_, h.valid.until, h.title, h.body,
            "\n".join((r.anchor, *(a for a in anchors if a != r.anchor))),
            trust.source, trust.confirmations, trust.contradictions, trust.last_confirmed,
        ))
    return tuple(out)


def _edges(r: Record) -> tuple[tuple[str, str, str], ...]:
    return tuple((r.id, rel, dst) for rel, dst in r.relations.edges())


def masker_of(store: Store) -> Masker:
    """The secrets the index masks (:func:`memidex.masking.index_view`), read once while
    the file does not change."""
    return Masker.load(secrets_path(store.config))


def unreadable(fs: FileStat, exc: OSError) -> FileRows:
    return FileRows((fs.relpath, "record", fs.size, fs.mtime_ns, fs.ino, ""), None, (), (),
                    (), ((fs.relpath, 0, f"cannot read: {exc.strerror}"),))


def file_rows(store: Store, fs: FileStat) -> FileRows:
    """Read and parse one record file into its rows (bad files give problem rows): the
    full path, as a refresh of a few files takes it."""
    try:
        data, st = store.read_with_stat(fs.relpath)
    except OSError as exc:
        return unreadable(fs, exc)
    return rows_of(fs.relpath, data, st.mtime_ns, st.ino, masker_of(store))


def rows_of(relpath: str, data: bytes, mtime_ns: int, ino: int, masker: Masker,
            sha: str | None = None) -> FileRows:
    """The rows of the file at ``relpath`` whose bytes are ``data`` by the full path (a
    rebuild offers a file to the canonical row reader first: ``memidex.index.build``).
    ``sha``: the bytes' content hash, when the caller computed it."""
    from memidex.records.codec import parse_record_bytes, recall

    if sha is None:
        from memidex.records.digest import content_hash

        sha = content_hash(data)
    frow = (relpath, "record", len(data), mtime_ns, ino, sha)
    record = recall(sha)  # written by this process a moment ago: no need to parse it
    if record is None:
        try:
            record = parse_record_bytes(data, relpath)
        except RecordError as exc:
            return FileRows(frow, None, (), (), (),
                            tuple((p.path, p.line, p.reason) for p in exc.problems))
    record = masker.for_index(record)  # masked (memidex.masking.index_view)
    lr = LoadedRecord(relpath, record, sha, FileStat(relpath, len(data), mtime_ns, ino))
    anchors = ((record.anchor, 1), *((a, 0) for a in record.anchors))
    return FileRows(frow, record_row(lr), history_rows(record), anchors, _edges(record), ())
