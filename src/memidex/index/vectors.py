"""Each record's vector in the index, kept current, and the cache that survives a rebuild.

The ``vectors`` table (migration ``0004_vectors``) holds one float16 vector per record,
of one model (its id and dimension beside it). A record whose row goes — a refresh
deletes and re-inserts a changed record, a rebuild starts from an empty file — loses its
vector by a trigger, so a vector is never older than its record. :func:`sync_vectors`
then embeds the records that have none: the text is the record's title, body and
anchors' words (:func:`memidex.vectors.record_text`) **masked first**, its key the
SHA-256 of the model id and that text, and a vector already computed for the same key —
the record only confirmed, or the whole index rebuilt — is read from the **side cache**,
``vectors-cache.sqlite`` beside the index (derived too: safe to delete, it only costs the
embedding again). A vector is written only if the record's file still has the content
hash it was read with, so a record changed meanwhile by another process is embedded by
the next sync, never given the old text's vector.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.index.db import IndexDB, in_chunks, translating

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from memidex.vectors import Embedder, VectorMatrix

__all__ = ["CACHE_NAME", "GENERATION_KEY", "SideCache", "SyncReport", "VectorRows",
           "generation", "load_rows", "main_anchors", "version", "side_cache_path", "sync_vectors",
           "vector_counts"]

CACHE_NAME = "vectors-cache.sqlite"
GENERATION_KEY = "vectors_generation"
"""``meta``'s counter of changes to ``vectors``: a process that keeps the vectors in
memory (a server) reloads them when it moves."""


def side_cache_path(index_path: Path) -> Path:
    return index_path.with_name(CACHE_NAME)


def content_key(model_id: str, text: str) -> bytes:
    """:func:`memidex.vectors.content_key`'s digest, as the 32 bytes the tables keep."""
    from memidex.vectors.blobs import content_key as hex_key

    return bytes.fromhex(hex_key(model_id, text).removeprefix("sha256:"))


class SideCache:
    """Vectors by content key, in a file of their own beside the index. A damaged or
    unreadable file is started again (it only holds what embedding recomputes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn: sqlite3.Connection | None = None
        try:
            self.conn = self._open()
        except sqlite3.DatabaseError:
            with contextlib.suppress(OSError):
                path.unlink()
            try:
                self.conn = self._open()
            except sqlite3.Error:
                self.conn = None  # read-only folder, say: every vector is embedded

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS cache (content_key BLOB PRIMARY KEY,"
                         " model_id TEXT NOT NULL, vector BLOB NOT NULL) WITHOUT ROWID")
            # which text (so which key) a record file gave, for one model and one way of
            # masking: a rebuild finds its vectors by the files' hashes, in one query
            conn.execute("CREATE TABLE IF NOT EXISTS by_file (sha256 TEXT NOT NULL,"
                         " model_id TEXT NOT NULL, text_id TEXT NOT NULL, content_key BLOB"
                         " NOT NULL, PRIMARY KEY (sha256, model_id, text_id)) WITHOUT ROWID")
            # the secrets the texts were masked with (masked_alike)
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY,"
                         " value TEXT NOT NULL) WITHOUT ROWID")
            conn.execute("SELECT count(*) FROM (SELECT 1 FROM cache LIMIT 1)").fetchone()
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        out: dict[bytes, bytes] = {}
        if self.conn is None:
            return out
        try:
            for part, marks in in_chunks(keys):
                out.update(self.conn.execute(
                    f"SELECT content_key, vector FROM cache WHERE content_key IN ({marks})",
                    part).fetchall())
        except sqlite3.Error:
            return {}
        return out

    def put(self, model_id: str, rows: Iterable[tuple[bytes, bytes]],
            files: Iterable[tuple[str, bytes]] = (), text_id: str = "") -> None:
        """Store vectors by key, and which key each record file (by hash) gave."""
        if self.conn is None:
            return
        with contextlib.suppress(sqlite3.Error):  # a full disk costs a re-embedding later
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(
                "INSERT OR REPLACE INTO cache(content_key, model_id, vector) VALUES (?, ?, ?)",
                [(k, model_id, v) for k, v in rows])
            self.conn.executemany(
                "INSERT OR REPLACE INTO by_file(sha256, model_id, text_id, content_key)"
                " VALUES (?, ?, ?, ?)", [(sha, model_id, text_id, k) for sha, k in files])
            self.conn.execute("COMMIT")
        if self.conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")

    def prune(self, keep: set[bytes]) -> int:
        """Drop every vector whose key the index no longer uses; how many."""
        if self.conn is None:
            return 0
        try:
            keys = [k for (k,) in self.conn.execute("SELECT content_key FROM cache")]
            gone = [(k,) for k in keys if k not in keep]
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany("DELETE FROM cache WHERE content_key = ?", gone)
            self.conn.executemany("DELETE FROM by_file WHERE content_key = ?", gone)
            self.conn.execute("COMMIT")
            return len(gone)
        except sqlite3.Error:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            return 0

    def masked_alike(self, secrets: Path) -> bool:
        """Were the cached texts masked with the secrets ``secrets`` holds now? The cache
        keeps a :mod:`memidex.index.maskmark` mark of them (one ``stat`` when nothing
        moved). When they differ, every key and vector — a hash a guess is checked
        against, an embedding of the text a secret was in — is deleted with
        ``secure_delete`` (the freed pages zeroed, the WAL emptied) and the new mark kept.
        False: the cache cannot be trusted this time (unreadable, locked): not used."""
        from memidex.index import maskmark

        conn = self.conn
        if conn is None:
            return False
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = ?",
                               (maskmark.KEY,)).fetchone()
            stored = row[0] if row else None
            wipe = False
            try:
                new = maskmark.compare(secrets, stored)
            except maskmark.MaskChanged:
                new, wipe = maskmark.mark(secrets), True
            if new is None:
                return True
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("BEGIN IMMEDIATE")
            if wipe:
                conn.execute("DELETE FROM cache")
                conn.execute("DELETE FROM by_file")
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                         (maskmark.KEY, new))
            conn.execute("COMMIT")
            if wipe:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return True
        except sqlite3.Error:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            return False

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@dataclass(frozen=True)
class SyncReport:
    """What :func:`sync_vectors` did: how many records had no vector of the model, how
    many were embedded and how many read from the side cache, how many are still
    missing (the time budget ran out)."""

    model_id: str
    records: int
    embedded: int
    reused: int
    missing: int
    seconds: float

    @property
    def complete(self) -> bool:
        return self.missing == 0

    def as_dict(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "records": self.records, "embedded": self.embedded,
                "reused": self.reused, "missing": self.missing,
                "seconds": round(self.seconds, 3)}


def _bump(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = ?",
                 (GENERATION_KEY,))


@translating
def generation(db: IndexDB) -> int:
    row = db.conn.execute("SELECT value FROM meta WHERE key = ?", (GENERATION_KEY,)).fetchone()
    return int(row[0]) if row else 0


@translating
def version(db: IndexDB) -> tuple[str, str]:
    """What changes whenever a record or a vector does: the index's fingerprint (every
    file's hash, kept by each refresh) and the vectors' generation — one lookup."""
    got = dict(db.conn.execute("SELECT key, value FROM meta WHERE key IN ('fingerprint', ?)",
                               (GENERATION_KEY,)).fetchall())
    return str(got.get("fingerprint", "")), str(got.get(GENERATION_KEY, "0"))


@translating
def vector_counts(db: IndexDB) -> tuple[int, dict[str, int]]:
    """The number of records, and of vectors per model id."""
    c = db.conn
    records = int(c.execute("SELECT count(*) FROM records").fetchone()[0])
    by_model = {str(m): int(n) for m, n in c.execute(
        "SELECT model_id, count(*) FROM vectors GROUP BY model_id")}
    return records, by_model


def _complete(conn: sqlite3.Connection, model_id: str) -> bool:
    """Every record has a vector of the model and no other model has any: three counts
    over indexes (a vector's row exists only while its record's does)."""
    records = conn.execute("SELECT count(*) FROM records").fetchone()[0]
    mine = conn.execute("SELECT count(*) FROM vectors WHERE model_id = ?",
                        (model_id,)).fetchone()[0]
    every = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
    return bool(records == mine == every)


def _from_files(db: IndexDB, cache_path: Path, model_id: str, dim: int, text_id: str
                ) -> int:
    """The vectors the side cache holds for the records' files as they are now (by
    hash), copied in one statement: what makes a rebuild cheap. How many."""
    conn = db.conn
    try:
        conn.execute("ATTACH DATABASE ? AS side", (f"file:{cache_path}?mode=ro",))
    except sqlite3.Error:
        return 0
    try:
        with db.begin_write() as c:
            cur = c.execute(
                "INSERT OR IGNORE INTO vectors(record_rowid, model_id, dim, content_key,"
                " vector) SELECT r.rowid, ?, ?, b.content_key, k.vector FROM records r"
                " JOIN files f ON f.path = r.path JOIN side.by_file b ON b.sha256 ="
                " f.sha256 AND b.model_id = ? AND b.text_id = ? JOIN side.cache k ON"
                " k.content_key = b.content_key WHERE NOT EXISTS (SELECT 1 FROM vectors v"
                " WHERE v.record_rowid = r.rowid)", (model_id, dim, model_id, text_id))
            copied = max(cur.rowcount, 0)
            if copied:
                _bump(c)
        return copied
    except sqlite3.OperationalError:  # a cache without by_file yet, or a locked one
        return 0
    finally:
        conn.execute("DETACH DATABASE side")


@translating
def sync_vectors(db: IndexDB, embedder: Embedder, mask: Callable[[str], str],
                 cache_path: Path | None, *, budget_seconds: float | None = None,
                 prune: bool = False, text_id: str = "", secrets: Path | None = None,
                 progress: Callable[[int, int], None] | None = None) -> SyncReport:
    """Give every record a vector of ``embedder``'s model: drop other models' vectors,
    copy the side cache's vectors of the records' files as they are (by hash), embed
    (in batches) the records still without one — reading the side cache by text first —
    and write each batch in its own short transaction. ``text_id`` names how texts are
    made (memidex's version, the home folder): a file's cached key is used only under
    the same one. ``secrets``: the secrets file the masking reads — the side cache is
    emptied when its secrets are not those its texts were masked with
    (:meth:`SideCache.masked_alike`). ``budget_seconds``: stop embedding after that long
    (the report says how many are left; a reading command bounds its cost so).
    ``prune``: after a complete sync, drop the side cache's unused vectors."""
    from memidex.vectors.blobs import encode_f16
    from memidex.vectors.text import record_text

    start = time.monotonic()
    model_id, dim = embedder.model_id, int(embedder.dim)
    conn = db.conn
    if _complete(conn, model_id) and not prune:
        return SyncReport(model_id, 0, 0, 0, 0, time.monotonic() - start)
    if conn.execute("SELECT 1 FROM vectors WHERE model_id != ? LIMIT 1",
                    (model_id,)).fetchone():
        with db.begin_write() as c:
            c.execute("DELETE FROM vectors WHERE model_id != ?", (model_id,))
            _bump(c)
    cache = SideCache(cache_path) if cache_path is not None else None
    try:
        if cache is not None and secrets is not None and not cache.masked_alike(secrets):
            cache.close()
            cache = None
        copied = _from_files(db, cache.path, model_id, dim, text_id) \
            if cache is not None and cache.path.exists() else 0
        rows = conn.execute(
            "SELECT r.rowid, r.path, f.sha256, r.title, r.body, r.anchors FROM records r"
            " JOIN files f ON f.path = r.path LEFT JOIN vectors v ON v.record_rowid = r.rowid"
            " WHERE v.record_rowid IS NULL ORDER BY r.rowid").fetchall()
        batch = 32 if getattr(embedder, "level", "") == "memidex" else 256
        embedded = done = 0
        reused = copied
        for i in range(0, len(rows), batch):
            part = rows[i:i + batch]
            texts = [mask(record_text(t, b, a.split("\n"))) for _r, _p, _s, t, b, a in part]
            keys = [content_key(model_id, t) for t in texts]
            have = cache.get(keys) if cache is not None else {}
            need = [j for j, k in enumerate(keys) if k not in have]
            if need and budget_seconds is not None and \
                    time.monotonic() - start > budget_seconds:
                break
            blobs = dict(have)
            new: list[tuple[bytes, bytes]] = []
            if need:
                vecs = embedder.embed([texts[j] for j in need])
                new = [(keys[j], encode_f16(v)) for j, v in zip(need, vecs, strict=True)]
                blobs.update(new)
            if cache is not None:
                cache.put(model_id, new, [(r[2], k) for r, k in zip(part, keys, strict=True)],
                          text_id)
            with db.begin_write() as c:
                c.executemany(
                    "INSERT OR REPLACE INTO vectors(record_rowid, model_id, dim, content_key,"
                    " vector) SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM files"
                    " WHERE path = ? AND sha256 = ? AND record_rowid = ?)",
                    [(r[0], model_id, dim, k, blobs[k], r[1], r[2], r[0])
                     for r, k in zip(part, keys, strict=True)])
                _bump(c)
            embedded += len(need)
            reused += len(part) - len(need)
            done += len(part)
            if progress is not None:
                progress(done, len(rows))
        if prune and cache is not None and done == len(rows):
            cache.prune({bytes(k) for (k,) in conn.execute("SELECT content_key FROM vectors")})
    finally:
        if cache is not None:
            cache.close()
    return SyncReport(model_id, copied + len(rows), embedded, reused, len(rows) - done,
                      time.monotonic() - start)


@dataclass
class VectorRows:
    """Every vector of one model, in memory for search: one row per record, the records
    of a product together (``products`` maps a product to its rows)."""

    model_id: str
    generation: int
    rowids: npt.NDArray[np.int64]
    statuses: npt.NDArray[Any]
    kinds: npt.NDArray[Any]
    products: dict[str, slice]
    matrix: VectorMatrix
    masks: dict[tuple[tuple[str, ...], tuple[str, ...]], npt.NDArray[np.bool_]] = field(
        default_factory=dict)

    def mask(self, statuses: Sequence[str], kinds: Sequence[str]) -> npt.NDArray[np.bool_]:
        """The rows of these statuses and kinds (each empty: any), computed once."""
        import numpy as np

        key = (tuple(sorted(statuses)), tuple(sorted(kinds)))
        if key not in self.masks:
            keep = np.ones(len(self.rowids), dtype=bool)
            if statuses:
                keep &= np.isin(self.statuses, list(statuses))
            if kinds:
                keep &= np.isin(self.kinds, list(kinds))
            self.masks[key] = keep
        return self.masks[key]


@translating
def load_rows(db: IndexDB, model_id: str, dim: int) -> VectorRows:
    """The model's vectors and what search filters them by, in one query."""
    import numpy as np

    from memidex.vectors.matrix import VectorMatrix

    gen = generation(db)
    rows = db.conn.execute(
        "SELECT v.record_rowid, r.product, r.status, r.kind, v.vector FROM vectors v"
        " JOIN records r ON r.rowid = v.record_rowid WHERE v.model_id = ? AND v.dim = ?"
        " ORDER BY r.product, v.record_rowid", (model_id, dim)).fetchall()
    products: dict[str, slice] = {}
    start = 0
    for n, row in enumerate(rows):
        if n and row[1] != rows[n - 1][1]:
            products[rows[n - 1][1]] = slice(start, n)
            start = n
    if rows:
        products[rows[-1][1]] = slice(start, len(rows))
    matrix = VectorMatrix.from_blobs([str(r[0]) for r in rows], [r[4] for r in rows], dim,
                                     model_id=model_id)
    return VectorRows(model_id, gen, np.array([r[0] for r in rows], dtype=np.int64),
                      np.array([r[2] for r in rows], dtype=object),
                      np.array([r[3] for r in rows], dtype=object), products, matrix)


@translating
def main_anchors(db: IndexDB) -> tuple[dict[str, str], dict[str, str]]:
    """Every record's main anchor and id, by rowid (as text: the matrix's ids)."""
    anchors: dict[str, str] = {}
    ids: dict[str, str] = {}
    for rowid, rid, anchor in db.conn.execute("SELECT rowid, id, anchor FROM records"):
        anchors[str(rowid)] = str(anchor)
        ids[str(rowid)] = str(rid)
    return anchors, ids
