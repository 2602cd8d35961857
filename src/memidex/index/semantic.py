"""The vector strategies on the index (docs/vectors.md): sparse tf·idf cosine over FTS5's
own terms, and the embedding model's vectors by exact dot product. Read-only SQL, but for
the sparse norms a search computes for records that have none yet (kept for the next).

Both answer :class:`~memidex.search.ranking.SearchHit` rows like the lexical search —
the same filters (product, kind, status, anchor), snippets and matched-word counts — with
the strategy's cosine as ``score`` and its confidence label
(:func:`memidex.vectors.confidence`).

**Sparse** (SMART lnc.ltc, :mod:`memidex.vectors.sparse`): the query's words go through
FTS5's tokenizer (:mod:`memidex.index.terms`), their document frequencies come from
``records_vocab`` and each record's term frequencies from ``records_vocab_i``
(``fts5vocab`` ``instance``), for the query's terms only. A word in more than a fifth of
the records is dropped when rarer ones remain (as the lexical search does); past
:data:`POOL` records holding a query word, the POOL with the best un-normalised score are
ranked. A record's norm (``sqrt Σ (1 + ln tf)²`` over all its terms) is computed once,
from its text, and kept in ``sparse_norms`` (emptied with the record's row).
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memidex.errors import IndexUnavailableError
from memidex.index.db import IndexDB, in_chunks, translating
from memidex.index.query import CAP, COMMON_SHARE, _filters, _matched_terms, _snippets
from memidex.search.ranking import SearchHit, SearchQuery, fts_expression, query_terms

if TYPE_CHECKING:
    import numpy.typing as npt

    from memidex.index.vectors import VectorRows

__all__ = ["POOL", "model_search", "sparse_search"]

POOL = 2000
"""At most this many records holding a query word are scored exactly (sparse)."""


def _in_chunks(conn: sqlite3.Connection, sql: str, ids: Sequence[int],
               params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """``sql`` with ``{marks}`` for an IN list, over ``ids`` in chunks; params after."""
    out: list[tuple[Any, ...]] = []
    for part, marks in in_chunks(ids):
        out += conn.execute(sql.format(marks=marks), [*part, *params]).fetchall()
    return out


def _query_tokens(text: str) -> list[str]:
    from memidex.index.terms import tokens

    out: list[str] = []
    for word in query_terms(text):
        out += tokens(word)
    return out


def _norms(db: IndexDB, rowids: list[int]) -> dict[int, float]:
    """Each record's sparse norm: kept ones read, missing ones computed from the text
    (and kept when the index can be written)."""
    from memidex.index.terms import tokens

    conn = db.conn
    have = {int(r): float(n) for r, n in _in_chunks(
        conn, "SELECT record_rowid, norm FROM sparse_norms WHERE record_rowid IN ({marks})",
        rowids)}
    missing = [r for r in rowids if r not in have]
    if not missing:
        return have
    new: list[tuple[int, float, str, str]] = []
    for rowid, path, sha, title, body, anchors in _in_chunks(
            conn, "SELECT r.rowid, r.path, f.sha256, r.title, r.body, r.anchors FROM records r"
            " JOIN files f ON f.path = r.path WHERE r.rowid IN ({marks})", missing):
        counts: dict[str, int] = {}
        for text in (title, body, anchors):
            for t in tokens(text):
                counts[t] = counts.get(t, 0) + 1
        norm = math.sqrt(sum((1.0 + math.log(c)) ** 2 for c in counts.values())) or 1.0
        have[int(rowid)] = norm
        new.append((int(rowid), norm, str(path), str(sha)))
    with contextlib.suppress(sqlite3.Error, IndexUnavailableError):
        with db.begin_write() as c:
            c.executemany(
                "INSERT OR REPLACE INTO sparse_norms(record_rowid, norm) SELECT ?, ?"
                " WHERE EXISTS (SELECT 1 FROM files WHERE path = ? AND sha256 = ?"
                " AND record_rowid = ?)", [(r, n, p, s, r) for r, n, p, s in new])
    return have


def _hits(db: IndexDB, q: SearchQuery, scored: list[tuple[int, float]], strategy: str
          ) -> list[SearchHit]:
    """The rows of the scored records (best first), with snippets and matched words."""
    from memidex.vectors.fusion import confidence

    if not scored:
        return []
    conn = db.conn
    rowids = [r for r, _ in scored]
    rows = {int(t[0]): t for t in _in_chunks(
        conn, "SELECT rowid, id, kind, status, title, path, anchors, product FROM records"
        " WHERE rowid IN ({marks})", rowids)}
    terms = query_terms(q.text)
    snippets = _snippets(conn, fts_expression(terms, "OR"), rowids) if terms else {}
    matched = _matched_terms(conn, terms, rowids) if terms else {}
    out = []
    for rowid, score in scored:
        t = rows.get(rowid)
        if t is None:
            continue
        out.append(SearchHit(
            id=t[1], kind=t[2], status=t[3], title=t[4], score=round(score, 6),
            confidence=confidence(strategy, score), snippet=snippets.get(rowid, t[4]),
            path=t[5], anchors=tuple(t[6].split("\n")), product=t[7],
            matched=matched.get(rowid, 0), terms=len(terms)))
    return out


@translating
def sparse_search(db: IndexDB, q: SearchQuery) -> list[SearchHit]:
    """The ``q.limit`` records most like the query by tf·idf cosine, best first (ties on
    id); records sharing no word with it are not found (that is the model's job)."""
    from memidex.vectors.sparse import query_weights

    toks = _query_tokens(q.text)
    if not toks or q.limit <= 0:
        return []
    conn = db.conn
    distinct = sorted(set(toks))
    marks = ",".join("?" * len(distinct))
    df = {str(t): int(n) for t, n in conn.execute(
        f"SELECT term, doc FROM records_vocab WHERE term IN ({marks})", distinct)}
    n_docs = int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
    common_at = max(CAP, n_docs // COMMON_SHARE)
    rare = [t for t in distinct if 0 < df.get(t, 0) <= common_at]
    if rare and len(rare) < len([t for t in distinct if df.get(t, 0)]):
        toks = [t for t in toks if t in rare]
    qw = query_weights(toks, df, n_docs)
    if not qw:
        return []
    tf: dict[int, dict[str, int]] = {}
    for term in qw:
        for doc, count in conn.execute(
                "SELECT doc, count(*) FROM records_vocab_i WHERE term = ? GROUP BY doc",
                (term,)):
            tf.setdefault(int(doc), {})[term] = int(count)
    partial = sorted(((sum(qw[t] * (1.0 + math.log(c)) for t, c in terms.items()), doc)
                      for doc, terms in tf.items()), key=lambda p: (-p[0], p[1]))[:POOL]
    where, params = _filters(q.product, q.kinds, q.statuses, q.anchors)
    allowed = [int(r) for (r,) in _in_chunks(
        conn, "SELECT r.rowid FROM records r WHERE r.rowid IN ({marks})" + where,
        [d for _s, d in partial], params)]
    norms = _norms(db, allowed)
    scored = sorted(((d, sum(qw[t] * (1.0 + math.log(c)) for t, c in tf[d].items())
                      / norms[d]) for d in allowed), key=lambda p: (-round(p[1], 12), p[0]))
    return _hits(db, q, scored[:q.limit], "sparse")


@translating
def model_search(db: IndexDB, rows: VectorRows, query: npt.ArrayLike, q: SearchQuery,
                 strategy: str, *, min_score: float | None = None) -> list[SearchHit]:
    """The ``q.limit`` records whose vector is nearest ``query`` (exact dot product over
    the product's rows, filtered by status, kind and anchor), best first, ties on id;
    ``min_score`` drops the rest (the hybrid's floor)."""
    import numpy as np

    if q.limit <= 0 or not len(rows.rowids):
        return []
    span = slice(0, len(rows.rowids))
    if q.product is not None:
        if q.product not in rows.products:
            return []
        span = rows.products[q.product]
    keep = rows.mask(q.statuses, q.kinds)
    if q.anchors:
        where, params = _filters(None, (), (), q.anchors)
        allowed = [int(r) for (r,) in db.conn.execute(
            "SELECT r.rowid FROM records r WHERE 1 = 1" + where, params)]
        keep &= np.isin(rows.rowids, np.array(allowed, dtype=np.int64))
    top = rows.matrix.top_k(query, q.limit, keep, min_score=min_score, rows=span)
    # VectorMatrix breaks ties on its ids (the rowids as text); the hits break them on id
    scored = [(int(h.id), h.score) for h in top]
    hits = _hits(db, q, scored, strategy)
    return sorted(hits, key=lambda h: (-h.score, h.id))
