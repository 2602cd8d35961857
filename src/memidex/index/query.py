"""Reading the index: search, lookup by id or prefix, listing. Read-only SQL."""

from __future__ import annotations

import sqlite3

from memidex.index.db import IndexDB, team_aware, translating
from memidex.plain import Frozen, set_field
from memidex.records.shape import RecordSummary
from memidex.search.ranking import (
    COLUMN_WEIGHTS,
    SearchHit,
    SearchQuery,
    confidence,
    fts_expression,
    query_terms,
    rerank_near,
    sort_key,
)

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["IndexRow", "VersionRow", "count_records", "duplicate_ids", "find_ids", "list_records",
           "max_ordinal", "problems", "search", "versions_at"]

_BM25 = "bm25(records_fts, {}, {}, {})".format(*COLUMN_WEIGHTS)


IndexRow = RecordSummary
"""A row of the index's ``records`` table, as a listing row."""


_ROW_COLS = ("r.id, r.path, r.kind, r.status, r.product, r.anchor, r.title, r.anchors,"
             " r.source, r.confirmations, r.contradictions, r.last_confirmed, r.valid_from,"
             " r.valid_until")


def _row(t: tuple[Any, ...]) -> RecordSummary:
    return RecordSummary(t[0], t[1], t[2], t[3], t[4], t[5], t[6], tuple(t[7].split("\n")),
                    t[8], t[9], t[10], t[11], t[12], t[13])


def _filters(product: str | None, kinds: tuple[str, ...], statuses: tuple[str, ...],
             anchors: tuple[str, ...]) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if product is not None:
        clauses.append("r.product = ?")
        params.append(product)
    if kinds:
        clauses.append(f"r.kind IN ({','.join('?' * len(kinds))})")
        params.extend(kinds)
    if statuses:
        clauses.append(f"r.status IN ({','.join('?' * len(statuses))})")
        params.extend(statuses)
    for anchor in anchors:
        if anchor.endswith("*"):
            prefix = anchor[:-1]
            clauses.append("r.rowid IN (SELECT record_rowid FROM anchors"
                           " WHERE anchor >= ? AND anchor < ?)")
            params.extend([prefix, prefix + "\U0010ffff"])
        else:
            clauses.append("r.rowid IN (SELECT record_rowid FROM anchors WHERE anchor = ?)")
            params.append(anchor)
    return ("".join(f" AND {c}" for c in clauses), params)


CAP = 2000
"""Past this many matching records, a query is ranked among the first CAP of them."""
COMMON_SHARE = 5
"""A word in more than 1/COMMON_SHARE of the records (and more than CAP) is common."""


def _hits(conn: sqlite3.Connection, expr: str, where: str, params: list[Any], limit: int,
          exclude: set[int], cap: int | None = None) -> list[tuple[Any, ...]]:
    capped = " AND records_fts.rowid <= ?" if cap is not None else ""
    sql = (
        f"SELECT r.rowid, r.id, r.kind, r.status, r.title, r.path, r.anchors, r.product,"
        f" -{_BM25} AS score"
        f" FROM records_fts JOIN records r ON r.rowid = records_fts.rowid"
        f" WHERE records_fts MATCH ?{capped}{where}"
        # the shown score is rounded to 6 places and ties break on id (docs/search.md):
        # the SQL cut at `limit` must use the same order, or a smaller limit could keep
        # another of two equally shown records
        f" ORDER BY round({_BM25}, 6), r.id, r.path LIMIT ?"
    )
    args = [expr, *([cap] if cap is not None else []), *params, limit + len(exclude)]
    rows = conn.execute(sql, args).fetchall()
    return [row for row in rows if row[0] not in exclude][:limit]


def _nth_match(conn: sqlite3.Connection, expr: str, n: int) -> int | None:
    """The rowid of the n-th record matching ``expr`` (rowid order), or None if fewer.

    Costs O(min(matches, n)) — a walk along the doclists, no ranking."""
    row = conn.execute("SELECT rowid FROM records_fts WHERE records_fts MATCH ?"
                       " LIMIT 1 OFFSET ?", (expr, n - 1)).fetchone()
    return None if row is None else int(row[0])


def _ranked(conn: sqlite3.Connection, expr: str, where: str, params: list[Any], limit: int,
            exclude: set[int]) -> tuple[list[tuple[Any, ...]], bool]:
    """Rows for ``expr``, best first; ranked among the first CAP matches when there are
    more (then the second value is True), falling back to all of them when the cap
    leaves too few rows after the filters."""
    cap = _nth_match(conn, expr, CAP)
    if cap is not None:
        rows = _hits(conn, expr, where, params, limit, exclude, cap)
        if len(rows) >= limit:
            return rows, True
    return _hits(conn, expr, where, params, limit, exclude), False


def _matched_terms(conn: sqlite3.Connection, terms: list[str], rowids: list[int]
                   ) -> dict[int, int]:
    counts = dict.fromkeys(rowids, 0)
    marks = ",".join("?" * len(rowids))
    for term in terms:
        for (rowid,) in conn.execute(
                f"SELECT rowid FROM records_fts WHERE records_fts MATCH ? AND rowid IN ({marks})",
                [fts_expression([term]), *rowids]):
            counts[rowid] += 1
    return counts


@translating
def search(db: IndexDB, q: SearchQuery) -> list[SearchHit]:
    """BM25 search (see ``memidex.search.ranking`` and docs/search.md).

    Words found in more than a fifth of the records (BM25 gives them almost no weight)
    are dropped when rarer words remain; a query whose words match more than CAP
    records is ranked among the first CAP of them, so that no query scans everything.
    """
    terms = query_terms(q.text)
    if not terms or q.limit <= 0:
        return []
    if q.near:
        return _search_near(db, q)
    where, params = _filters(q.product, q.kinds, q.statuses, q.anchors)
    conn = db.conn
    if len(terms) > 1:
        size = int(conn.execute("SELECT coalesce(max(rowid), 0) FROM records").fetchone()[0])
        common_at = max(CAP, size // COMMON_SHARE)
        rare = [t for t in terms if _nth_match(conn, fts_expression([t]), common_at) is None]
        if rare:
            terms = rare
    rows, _ = _ranked(conn, fts_expression(terms, "AND"), where, params, q.limit, set())
    matched = {row[0]: len(terms) for row in rows}
    if len(rows) < q.limit and len(terms) > 1:
        # OR rows are ranked by how many words they match: fetch enough to choose from.
        more, _ = _ranked(conn, fts_expression(terms, "OR"), where, params,
                          max(5 * q.limit, 50), set(matched))
        if more:
            matched.update(_matched_terms(conn, terms, [r[0] for r in more]))
            rows += more
    ranked = sorted(
        ((SearchHit(
            id=row[1], kind=row[2], status=row[3], title=row[4], score=round(row[8], 6),
            confidence=confidence(matched[row[0]], len(terms), row[3], row[2]),
            snippet="", path=row[5], anchors=tuple(row[6].split("\n")), product=row[7],
            matched=matched[row[0]], terms=len(terms)), int(row[0])) for row in rows),
        key=lambda pair: sort_key(pair[0]))[: q.limit]
    # Snippets only for what is shown: each one walks the record's text.
    snippets = _snippets(conn, fts_expression(terms, "OR"), [rowid for _, rowid in ranked])
    return [hit.replace(snippet=snippets.get(rowid, hit.title)) for hit, rowid in ranked]


NEAR_POOL = 50
"""``--near`` ranks the best max(5 × limit, NEAR_POOL) BM25 results together with the
best ``limit`` that carry each ``--near`` anchor."""


def _search_near(db: IndexDB, q: SearchQuery) -> list[SearchHit]:
    """``knowledge search --near``: BM25 results re-ranked by the anchors they share with
    ``q.near`` (:func:`memidex.search.ranking.rerank_near`), each with its reasons."""
    pool = search(db, q.replace(near=(), limit=max(5 * q.limit, NEAR_POOL)))
    for anchor in q.near:
        pool += search(db, q.replace(near=(), anchors=(*q.anchors, anchor)))
    return rerank_near(pool, q.near, q.limit)


def _snippets(conn: sqlite3.Connection, expr: str, rowids: list[int]) -> dict[int, str]:
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    return {int(r[0]): str(r[1]).replace("\n", " ") for r in conn.execute(
        f"SELECT rowid, snippet(records_fts, -1, '«', '»', '…', 16) FROM records_fts"
        f" WHERE records_fts MATCH ? AND rowid IN ({marks})", [expr, *rowids])}


@translating
def find_ids(db: IndexDB, id_or_prefix: str) -> list[IndexRow]:
    """Rows whose id equals ``id_or_prefix``, else whose id starts with it."""
    conn = db.conn
    rows = conn.execute(f"SELECT {_ROW_COLS} FROM records r WHERE r.id = ? ORDER BY r.path",
                        (id_or_prefix,)).fetchall()
    if not rows:
        rows = conn.execute(
            f"SELECT {_ROW_COLS} FROM records r WHERE r.id >= ? AND r.id < ?"
            " ORDER BY r.id, r.path LIMIT 50", (id_or_prefix, id_or_prefix + "\x7f")).fetchall()
    return [_row(t) for t in rows]


@translating
def list_records(db: IndexDB, *, product: str | None, kinds: tuple[str, ...] = (),
                 statuses: tuple[str, ...] = (), anchors: tuple[str, ...] = (),
                 limit: int | None = None) -> list[IndexRow]:
    where, params = _filters(product, kinds, statuses, anchors)
    sql = f"SELECT {_ROW_COLS} FROM records r WHERE 1=1{where} ORDER BY r.kind, r.id, r.path"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [_row(t) for t in db.conn.execute(sql, params)]


@translating
def count_records(db: IndexDB) -> list[tuple[str, str, str, int]]:
    """(product, kind, status, how many records) for every combination there is: one walk
    of the ``records_by_product`` index (a few ms at 100,000 records)."""
    return [(str(p), str(k), str(s), int(n)) for p, s, k, n in db.conn.execute(
        "SELECT product, status, kind, count(*) FROM records"
        " GROUP BY product, status, kind ORDER BY product, kind, status")]


MAX_ORDINAL_SQL = (
    "SELECT max(max(valid_from, coalesce(last_confirmed, 0), coalesce(valid_until, 0))) "
    "FROM records WHERE product = ?")


@team_aware
@translating
def max_ordinal(db: IndexDB, product: str) -> int:
    """The highest run ordinal ``product``'s records name (a window's start or end, a last
    confirmation); 0 for none. One lookup in ``records_by_ordinal``."""
    row = db.conn.execute(MAX_ORDINAL_SQL, (product,)).fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


@translating
def problems(db: IndexDB) -> list[tuple[str, int, str]]:
    return [(r[0], r[1], r[2]) for r in db.conn.execute(
        "SELECT path, line, reason FROM problems ORDER BY path, line, reason")]


@translating
def duplicate_ids(db: IndexDB) -> list[tuple[str, list[str]]]:
    """Ids held by more than one record file, each with its paths in order. The ids
    first, from the covering index on ``records(id)`` (a sort of every row's path cost
    ``doctor`` ~0.3 s at 100,000 records); then the paths of those few."""
    return db.memo("duplicate_ids", lambda: _duplicate_ids(db))


def _duplicate_ids(db: IndexDB) -> list[tuple[str, list[str]]]:
    out = []
    dups = [row[0] for row in db.conn.execute(
        "SELECT id FROM records GROUP BY id HAVING count(*) > 1 ORDER BY id")]
    for rid in dups:
        paths = [row[0] for row in db.conn.execute(
            "SELECT path FROM records WHERE id = ? ORDER BY path", (rid,))]
        out.append((rid, paths))
    return out


class VersionRow(Frozen):
    """One version of a record, as a replay at some ordinal is served it
    (``anchors``: the main anchor first)."""

    __slots__ = ("record_rowid", "version", "current", "id", "path", "product", "kind", "status",
                 "valid_from", "valid_until", "title", "body", "anchors", "source",
                 "confirmations", "contradictions", "last_confirmed")
    record_rowid: int
    version: int
    current: bool
    id: str
    path: str
    product: str
    kind: str
    status: str
    valid_from: int
    valid_until: int | None
    title: str
    body: str
    anchors: tuple[str, ...]
    source: str
    confirmations: int
    contradictions: int
    last_confirmed: int | None

    def __init__(self, record_rowid: int, version: int, current: bool, id: str, path: str,
                 product: str, kind: str, status: str, valid_from: int, valid_until: int | None,
                 title: str, body: str, anchors: tuple[str, ...], source: str, confirmations: int,
                 contradictions: int, last_confirmed: int | None) -> None:
        set_field(self, "record_rowid", record_rowid)
        set_field(self, "version", version)
        set_field(self, "current", current)
        set_field(self, "id", id)
        set_field(self, "path", path)
        set_field(self, "product", product)
        set_field(self, "kind", kind)
        set_field(self, "status", status)
        set_field(self, "valid_from", valid_from)
        set_field(self, "valid_until", valid_until)
        set_field(self, "title", title)
        set_field(self, "body", body)
        set_field(self, "anchors", anchors)
        set_field(self, "source", source)
        set_field(self, "confirmations", confirmations)
        set_field(self, "contradictions", contradictions)
        set_field(self, "last_confirmed", last_confirmed)


@translating
def versions_at(db: IndexDB, ordinal: int, product: str | None, *,
                kinds: tuple[str, ...] = (), statuses: tuple[str, ...] = (),
                ids: tuple[str, ...] = (), limit: int | None = None) -> list[VersionRow]:
    """For each record, the version whose window contains ``ordinal`` (``from <= n <
    until``) — at most one per record, since windows do not overlap — in one query on
    the ``versions`` view. ``product`` None means every product; ``statuses`` filters the
    version's own status (``SERVABLE_STATUSES``: what a brief at that ordinal serves)."""
    clauses = ["v.valid_from <= ?", "(v.valid_until IS NULL OR ? < v.valid_until)"]
    params: list[Any] = [ordinal, ordinal]
    for column, values in (("v.product", () if product is None else (product,)),
                           ("v.kind", kinds), ("v.status", statuses), ("v.id", ids)):
        if values:
            clauses.append(f"{column} IN ({','.join('?' * len(values))})")
            params.extend(values)
    sql = (
        "SELECT v.record_rowid, v.version, v.current, v.id, r.path, v.product, v.kind,"
        " v.status, v.valid_from, v.valid_until, v.title, v.body, v.anchors, v.source,"
        " v.confirmations, v.contradictions, v.last_confirmed"
        " FROM versions v JOIN records r ON r.rowid = v.record_rowid"
        f" WHERE {' AND '.join(clauses)} ORDER BY v.id, r.path"
    )
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [VersionRow(t[0], t[1], bool(t[2]), t[3], t[4], t[5], t[6], t[7], t[8], t[9],
                       t[10], t[11], tuple(t[12].split("\n")), t[13], t[14], t[15], t[16])
            for t in db.conn.execute(sql, params)]
