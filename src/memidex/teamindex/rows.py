"""The rows of committed record files for the team index: each file through the local
index's projection (:func:`memidex.index.build.record_row`), so both indexes hold the
same values; many files parsed by a pool of forked processes, in path order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memidex.errors import RecordError
from memidex.masking import Masker
from memidex.teamindex.gitread import Blob, BlobReader

__all__ = ["CHUNK", "PARALLEL_MIN", "Rows", "iter_rows", "parse_span", "record_rows",
           "symlink_rows"]

PARALLEL_MIN = 4000
CHUNK = 1000


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass
class Rows:
    """The rows of some record files, for one generation (rowids already given)."""

    records: list[tuple[Any, ...]] = field(default_factory=list)
    anchors: list[tuple[Any, ...]] = field(default_factory=list)
    edges: list[tuple[Any, ...]] = field(default_factory=list)
    versions: list[tuple[Any, ...]] = field(default_factory=list)
    problems: list[tuple[Any, ...]] = field(default_factory=list)
    tokens: int = 0

    def extend(self, other: Rows) -> None:
        self.records += other.records
        self.anchors += other.anchors
        self.edges += other.edges
        self.versions += other.versions
        self.problems += other.problems
        self.tokens += other.tokens


def record_rows(gen: int, rowid: int, path: str, data: bytes,
                masker: Masker | None = None) -> Rows:
    """The rows one record file gives (its problem rows if it does not parse). Built by
    the local index's projection — masked as it masks (``masker``: the pusher's
    secrets, :meth:`Masker.for_index`) — so both indexes hold the same values."""
    from memidex.index.build import history_rows, record_row
    from memidex.index.terms import fts_document
    from memidex.records.codec import parse_record_bytes
    from memidex.records.digest import content_hash
    from memidex.store.files import FileStat, LoadedRecord

    out = Rows()
    try:
        record = parse_record_bytes(data, path)
    except RecordError as exc:
        out.problems = [(gen, p.path, p.line, p.reason) for p in exc.problems]
        return out
    if masker is not None:
        record = masker.for_index(record)
    sha = content_hash(data)
    row = record_row(LoadedRecord(path, record, sha, FileStat(path, 0, 0, 0)))
    fts, ntokens = fts_document(row[6], row[8], row[7])
    out.records.append((gen, rowid, *row, sha, ntokens, fts))
    out.tokens = ntokens
    seen: set[str] = set()
    for anchor, main in ((record.anchor, True), *((a, False) for a in record.anchors)):
        if anchor not in seen:  # INSERT OR IGNORE locally: the first (main) one wins
            seen.add(anchor)
            out.anchors.append((gen, anchor, rowid, main))
    edges = {(rel, dst): None for rel, dst in record.relations.edges()}
    out.edges = [(gen, rowid, rel, dst, record.id) for rel, dst in edges]
    out.versions = [(gen, rowid, *v) for v in history_rows(record)]
    return out


def symlink_rows(gen: int, blob: Blob) -> Rows:
    reason = ("a symlink in git: the team index reads committed files only"
              if blob.mode == "120000" else f"not a regular file in git (mode {blob.mode})")
    return Rows(problems=[(gen, blob.path, 0, reason)])


# What the parser processes read, set in the parent just while they are forked.
_FORKED: tuple[Path, Sequence[Blob], int, int, Masker | None] | None = None


def parse_span(root: Path, blobs: Sequence[Blob], gen: int, first_rowid: int,
               start: int, end: int, dense: bool, masker: Masker | None = None) -> Rows:
    """Rows of ``blobs[start:end]``; a file's rowid is ``first_rowid`` + its position
    (``dense``: + the number of files before it that parsed, as a local refresh counts)."""
    span = blobs[start:end]
    out = Rows()
    regular = [b for b in span if b.mode in ("100644", "100755")]
    datas = dict(zip((b.path for b in regular), BlobReader(root).read([b.sha for b in regular]),
                     strict=True))
    rowid = first_rowid + (0 if dense else start)
    for blob in span:
        if blob.path in datas:
            rows = record_rows(gen, rowid, blob.path, datas[blob.path], masker)
        else:
            rows = symlink_rows(gen, blob)
        out.extend(rows)
        if rows.records or not dense:
            rowid += 1
    return out


def _forked_span(span: tuple[int, int]) -> bytes:
    import marshal

    assert _FORKED is not None
    root, blobs, gen, first, masker = _FORKED
    rows = parse_span(root, blobs, gen, first, span[0], span[1], False, masker)
    return marshal.dumps((rows.records, rows.anchors, rows.edges, rows.versions,
                          rows.problems, rows.tokens))


def _spans(n: int) -> list[tuple[int, int]]:
    out, i, size = [], 0, CHUNK // 8
    while i < n:
        out.append((i, min(n, i + size)))
        i, size = i + size, min(CHUNK, size * 2)
    return out


def iter_rows(root: Path, blobs: Sequence[Blob], gen: int, jobs: int,
              masker: Masker | None = None) -> Iterator[tuple[Rows, int]]:
    """(rows, files read) of every blob (rowid = 1 + position, as a local rebuild numbers
    them), in path order, parsed by a pool of processes when there are many; masked
    with ``masker``."""
    global _FORKED
    spans = _spans(len(blobs))
    if jobs <= 1 or len(blobs) < PARALLEL_MIN:
        for start, end in spans:
            yield parse_span(root, blobs, gen, 1, start, end, False, masker), end - start
        return
    import marshal
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    _FORKED = (root, blobs, gen, 1, masker)
    try:
        pool = ctx.Pool(jobs, initializer=_ignore_sigint)  # Ctrl-C is the parent's
    finally:
        _FORKED = None
    with pool:
        for (start, end), data in zip(spans, pool.imap(_forked_span, spans), strict=True):
            rec, anc, edg, ver, prob, tok = marshal.loads(data)
            yield Rows(rec, anc, edg, ver, prob, tok), end - start
