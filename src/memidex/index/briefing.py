"""What a brief reads from the index (docs/brief.md): read-only SQL, nothing ranked here.

A brief starts from the test's anchors, so every query is a lookup by key — the
``anchors`` table's primary key (anchor, record_rowid), ``records``' rowid and
``records_by_id``, ``history_versions``' primary key and ``edges``' primary key and
``edges_by_dst`` — never a scan of a product. Lists of keys travel as one JSON array
(``json_each``), so a hub anchor with thousands of records needs no thousand ``?``.
The ranking itself is :mod:`memidex.serve.rank`'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from memidex.index.db import IndexDB, team_aware, translating
from memidex.index.query import VersionRow
from memidex.records.rule import Policy

__all__ = ["anchor_hits", "citations", "known_product", "policies",
           "products", "version_texts", "versions_of"]


def _keys(values: Iterable[object]) -> str:
    return json.dumps(sorted(set(values)), ensure_ascii=False) if values else "[]"


@team_aware
@translating
def anchor_hits(db: IndexDB, anchors: Sequence[str], *, cap: int
                ) -> tuple[list[tuple[str, int]], bool]:
    """(anchor, record rowid) for every record carrying one of ``anchors`` (any product,
    any status), in (anchor, rowid) order; at most ``cap`` pairs (then True)."""
    if not anchors:
        return [], False
    rows = db.conn.execute(
        "SELECT anchor, record_rowid FROM anchors"
        " WHERE anchor IN (SELECT value FROM json_each(?))"
        " ORDER BY anchor, record_rowid LIMIT ?", (_keys(anchors), cap + 1)).fetchall()
    return [(str(a), int(r)) for a, r in rows[:cap]], len(rows) > cap


_VERSION_COLS = ("id, product, kind, status, valid_from, valid_until, anchors, source,"
                 " confirmations, contradictions, last_confirmed")


@team_aware
@translating
def versions_of(db: IndexDB, rowids: Iterable[int]) -> list[VersionRow]:
    """Every version of the records ``rowids`` name: the current one (the record's row)
    and the earlier ones (``history_versions``), by rowid then version — without their
    text or path (``title``, ``body`` and ``path`` empty: :func:`version_texts` reads the
    text of those that are served)."""
    keys = _keys(rowids)
    if keys == "[]":
        return []
    sql = (
        "SELECT rowid, coalesce(json_array_length(history), 0) + 1, 1, " + _VERSION_COLS +
        " FROM records WHERE rowid IN (SELECT value FROM json_each(?1))"
        " UNION ALL "
        "SELECT record_rowid, version, 0, " + _VERSION_COLS +
        " FROM history_versions WHERE record_rowid IN (SELECT value FROM json_each(?1))"
        " ORDER BY 1, 2"
    )
    return [VersionRow(t[0], t[1], bool(t[2]), t[3], "", t[4], t[5], t[6], t[7], t[8], "",
                       "", tuple(t[9].split("\n")), t[10], t[11], t[12], t[13])
            for t in db.conn.execute(sql, (keys,))]


@team_aware
@translating
def version_texts(db: IndexDB, versions: Iterable[tuple[int, int, bool]]
                  ) -> dict[tuple[int, int], tuple[str, str]]:
    """(title, body) of each (rowid, version, current) version."""
    wanted = list(versions)
    current = _keys(r for r, _v, cur in wanted if cur)
    earlier = json.dumps(sorted([r, v] for r, v, cur in wanted if not cur))
    out: dict[tuple[int, int], tuple[str, str]] = {}
    by_rowid = {r: v for r, v, cur in wanted if cur}
    if current != "[]":
        for rowid, title, body in db.conn.execute(
                "SELECT rowid, title, body FROM records"
                " WHERE rowid IN (SELECT value FROM json_each(?))", (current,)):
            out[(rowid, by_rowid[rowid])] = (title, body)
    if earlier != "[]":
        for rowid, version, title, body in db.conn.execute(
                "SELECT h.record_rowid, h.version, h.title, h.body FROM json_each(?) j"
                " JOIN history_versions h ON h.record_rowid = j.value ->> 0"
                " AND h.version = j.value ->> 1", (earlier,)):
            out[(rowid, version)] = (title, body)
    return out


@team_aware
@translating
def citations(db: IndexDB, rowids: Iterable[int]) -> list[tuple[int, int]]:
    """``cites`` relations between the records ``rowids`` name and other records, both
    ways: (rowid of a record in ``rowids``, rowid of the record at the other end)."""
    keys = _keys(rowids)
    if keys == "[]":
        return []
    out = db.conn.execute(
        "SELECT e.record_rowid, r.rowid FROM edges e JOIN records r ON r.id = e.dst"
        " WHERE e.record_rowid IN (SELECT value FROM json_each(?1)) AND e.rel = 'cites'"
        " UNION "
        "SELECT r.rowid, e.record_rowid FROM records r JOIN edges e ON e.dst = r.id"
        " WHERE r.rowid IN (SELECT value FROM json_each(?1)) AND e.rel = 'cites'"
        " ORDER BY 1, 2", (keys,)).fetchall()
    return [(int(a), int(b)) for a, b in out if a != b]


@team_aware
@translating
def policies(db: IndexDB) -> list[Policy]:
    """Every policy in the index, by file then id."""
    out = []
    for pid, path, line, rule, severity, products_json, anchors_json in db.conn.execute(
            "SELECT id, path, line, rule, severity, products, anchors FROM policies"
            " ORDER BY path, id"):
        out.append(Policy(id=pid, rule=rule, severity=severity,
                          products=tuple(json.loads(products_json)),
                          anchors=tuple(json.loads(anchors_json)), path=path, line=line))
    return out


@team_aware
@translating
def known_product(db: IndexDB, product: str) -> bool:
    """Whether the index holds a record or a run of ``product``."""
    row = db.conn.execute(
        "SELECT EXISTS (SELECT 1 FROM records WHERE product = ?1)"
        " OR EXISTS (SELECT 1 FROM runs WHERE product = ?1)", (product,)).fetchone()
    return bool(row[0])


@team_aware
@translating
def products(db: IndexDB) -> list[str]:
    """Every product the index holds records of (for a hint; walks an index)."""
    return [str(p) for (p,) in db.conn.execute(
        "SELECT DISTINCT product FROM records ORDER BY product")]
