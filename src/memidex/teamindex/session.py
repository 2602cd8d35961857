"""One read-only snapshot of the team index, queried as the local index is.

A :class:`Session` runs in one ``REPEATABLE READ READ ONLY`` transaction (opened by
:meth:`memidex.teamindex.read.TeamIndex.session`) in which every query sees the same
snapshot — its row in ``snapshots`` and the rows of the generation it names — so an
answer is never a mix of two pushes. Its methods have the signatures and return the row
types of the local index's functions (``memidex.index.query`` and
``memidex.index.briefing``, whose first argument is the ``IndexDB``), so the search and
brief code can take either source.

Search (docs/team-index.md, "Ranking") is the local index's algorithm step for step —
rare words, AND then OR, the CAP sample, the order rule, confidence labels — with FTS5's
BM25 computed in SQL: the document frequencies come from ``terms``, each record's length
from ``ntokens``, and a word's weighted frequency in a record (title 10, anchors 5, body
1, FTS5's ``aFreq``) from ``ts_rank_cd`` of that one word with weights A 1.0, B 0.5, D 0.1:
for a one-word query cover density ranking sums the weights of its occurrences, so ten
times it is the weighted count.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from memidex.index.query import IndexRow, VersionRow
from memidex.index.terms import query_tokens
from memidex.records.model import Policy
from memidex.search.ranking import (
    SearchHit,
    SearchQuery,
    confidence,
    query_terms,
    rerank_near,
    sort_key,
)
from memidex.teamindex import schema as S
from memidex.teamindex.connect import translating

if TYPE_CHECKING:
    import psycopg

__all__ = ["Answer", "Session", "Snapshot"]

T = TypeVar("T")

CAP = 2000
"""As the local index (``memidex.index.query.CAP``): past this many matches a query is
ranked among the first CAP of them in rowid order."""
COMMON_SHARE = 5
NEAR_POOL = 50
K1, B = 1.2, 0.75
_WEIGHTS = "'{0.1, 0.2, 0.5, 1.0}'::float4[]"  # D body, C (unused), B anchors, A title
_SCALE = 10  # ts_rank_cd with those weights, times 10: the weights 1, 5, 10 of the local index


@dataclass(frozen=True)
class Snapshot:
    """What a branch's team index holds: the commit its records are at."""

    commit: str
    branch: str
    schema_version: int
    records: int = 0
    pushed_at: str = ""
    gen: int = 0
    max_rowid: int = 0
    tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, "branch": self.branch,
                "schema_version": self.schema_version, "records": self.records,
                "pushed_at": self.pushed_at}


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A value read from the team index and the snapshot it was read from."""

    value: T
    snapshot: Snapshot

    @property
    def commit(self) -> str:
        return self.snapshot.commit


def _row(t: Sequence[Any]) -> IndexRow:
    return IndexRow(t[0], t[1], t[2], t[3], t[4], t[5], t[6], tuple(str(t[7]).split("\n")),
                    t[8], t[9], t[10], t[11], t[12], t[13])


_ROW_COLS = ("r.id, r.path, r.kind, r.status, r.product, r.anchor, r.title, r.anchors,"
             " r.source, r.confirmations, r.contradictions, r.last_confirmed, r.valid_from,"
             " r.valid_until")
_TOP = "\U0010ffff"


class Session:
    """One snapshot of one branch: every method reads inside the same transaction."""

    def __init__(self, conn: psycopg.Connection[Any], snapshot: Snapshot, url: str) -> None:
        self.conn = conn
        self.snapshot = snapshot
        self.url = url
        self.gen = snapshot.gen

    def _q(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        with translating(self.url):
            return self.conn.execute(sql, params).fetchall()

    def secrets_mark(self) -> str | None:
        """The mark of the secrets the branch's push masked its records with (None: a
        push from before the marks, :func:`memidex.index.maskmark.same_secrets`)."""
        rows = self._q(f"SELECT value FROM {S.SCHEMA}.meta WHERE key = %s",
                       (S.secrets_key(self.snapshot.branch),))
        return str(rows[0][0]) if rows else None

    # --- filters, as memidex.index.query._filters ---

    def _filters(self, product: str | None, kinds: Sequence[str], statuses: Sequence[str],
                 anchors: Sequence[str], p: dict[str, Any], r: str = "r") -> str:
        """SQL conditions on the records row ``r`` (an alias), as the local index's."""
        clauses: list[str] = []
        if product is not None:
            clauses.append(f"{r}.product = %(product)s")
            p["product"] = product
        if kinds:
            clauses.append(f"{r}.kind = ANY(%(kinds)s)")
            p["kinds"] = list(kinds)
        if statuses:
            clauses.append(f"{r}.status = ANY(%(statuses)s)")
            p["statuses"] = list(statuses)
        for i, anchor in enumerate(anchors):
            if anchor.endswith("*"):
                clauses.append(f"{r}.rowid IN (SELECT a.rowid FROM {S.SCHEMA}.anchors a WHERE"
                               f" a.gen = %(gen)s AND a.anchor >= %(alo{i})s"
                               f" AND a.anchor < %(ahi{i})s)")
                p[f"alo{i}"], p[f"ahi{i}"] = anchor[:-1], anchor[:-1] + _TOP
            else:
                clauses.append(f"{r}.rowid IN (SELECT a.rowid FROM {S.SCHEMA}.anchors a WHERE"
                               f" a.gen = %(gen)s AND a.anchor = %(a{i})s)")
                p[f"a{i}"] = anchor
        return "".join(f" AND {c}" for c in clauses)

    # --- search ---

    def _lexemes(self, terms: Sequence[str]) -> list[str]:
        """Each query word as a tsquery of the tokens FTS5 makes of it: one lexeme (a
        phrase if the word gives several, '' if none)."""
        rows = self._q(
            f"SELECT phraseto_tsquery('{S.CONFIG}', w)::text FROM unnest(%s::text[])"
            " WITH ORDINALITY AS u(w, n) ORDER BY n",
            ([" ".join(query_tokens(t)) for t in terms],))
        return [str(r[0]) for r in rows]

    def _ndocs(self, lexemes: Sequence[str]) -> dict[str, int]:
        words = sorted({lx.strip("'") for lx in lexemes if _single(lx)})
        rows = self._q(f"SELECT term, ndocs FROM {S.SCHEMA}.terms WHERE gen = %s"
                       " AND term = ANY(%s)", (self.gen, words))
        return {f"'{t}'": int(n) for t, n in rows}

    def _score_sql(self, lexemes: Sequence[str], ndocs: dict[str, int], p: dict[str, Any]
                   ) -> tuple[str, str]:
        """(the weighted frequencies, one column ``f<i>`` a word; FTS5's bm25() over them,
        operation for operation as ext/fts5/fts5_aux.c computes it)."""
        n_rows = self.snapshot.records
        p["avgdl"] = (float(self.snapshot.tokens) / float(n_rows)) if n_rows else 1.0
        p["k1"], p["k1p1"], p["b"], p["omb"] = K1, K1 + 1.0, B, 1 - B
        norm = ("(%(k1)s::float8 * (%(omb)s::float8 + %(b)s::float8 * m.ntokens::float8"
                " / %(avgdl)s::float8))")
        freqs, parts = [], []
        for i, lx in enumerate(lexemes):
            hits = ndocs.get(lx, 0)
            idf = math.log((n_rows - hits + 0.5) / (hits + 0.5)) if n_rows else 1e-6
            p[f"idf{i}"] = idf if idf > 0.0 else 1e-6
            p[f"q{i}"] = lx
            freqs.append(f"round(ts_rank_cd({_WEIGHTS}, m.tsv, %(q{i})s::tsquery, 0)::float8"
                         f" * {_SCALE}) AS f{i}")
            parts.append(f"%(idf{i})s::float8 * ((f.f{i} * %(k1p1)s::float8) / (f.f{i} + "
                         f"{norm}))")
        return ", ".join(freqs), "(0.0::float8 + " + " + ".join(parts) + ")"

    def _nth_match(self, expr: str, n: int) -> int | None:
        rows = self._q(f"SELECT rowid FROM {S.SCHEMA}.records WHERE gen = %s AND"
                       " tsv @@ %s::tsquery ORDER BY rowid OFFSET %s LIMIT 1",
                       (self.gen, expr, n - 1))
        return int(rows[0][0]) if rows else None

    def _hits(self, expr: str, lexemes: Sequence[str], ndocs: dict[str, int],
              where: str, params: dict[str, Any], limit: int, exclude: set[int],
              cap: int | None, count_matched: bool) -> list[tuple[Any, ...]]:
        """As ``memidex.index.query._hits``. The matches come from the GIN index alone
        (the ``OFFSET 0`` keeps the planner from AND-ing a product bitmap of half the
        records into it), the filters apply to them, and each word's frequency is read
        once per record."""
        p = dict(params)
        freqs, score = self._score_sql(lexemes, ndocs, p)
        p["expr"], p["lim"], p["gen"] = expr, limit + len(exclude), self.gen
        matched = (" + ".join(f"(f.f{i} > 0)::int" for i in range(len(lexemes)))
                   if count_matched else str(len(lexemes)))
        capped = " AND r.rowid <= %(cap)s" if cap is not None else ""
        if cap is not None:
            p["cap"] = cap
        sql = (f"SELECT rowid, id, kind, status, title, path, anchors, product, score, matched"
               f" FROM (SELECT m.rowid, m.id, m.kind, m.status, m.title, m.path, m.anchors,"
               f" m.product, {score} AS score, {matched} AS matched"
               f" FROM (SELECT r.* FROM {S.SCHEMA}.records r WHERE r.gen = %(gen)s"
               f" AND r.tsv @@ %(expr)s::tsquery{capped} OFFSET 0) m"
               f" CROSS JOIN LATERAL (SELECT {freqs}) f"
               f" WHERE true{where}) s"
               # the shown score is rounded to 6 places and ties break on id, as locally
               f" ORDER BY round(score::numeric, 6) DESC, id, path LIMIT %(lim)s")
        rows = self._q(sql, p)
        return [tuple(r) for r in rows if int(r[0]) not in exclude][:limit]

    def _ranked(self, expr: str, lexemes: Sequence[str], ndocs: dict[str, int], bound: int,
                where: str, params: dict[str, Any], limit: int, exclude: set[int],
                count_matched: bool) -> list[tuple[Any, ...]]:
        """As ``memidex.index.query._ranked``; ``bound``: at most this many records match
        (from the document frequencies), so the CAP lookup is skipped below CAP."""
        cap = self._nth_match(expr, CAP) if bound >= CAP else None
        if cap is not None:
            rows = self._hits(expr, lexemes, ndocs, where, params, limit, exclude, cap,
                              count_matched)
            if len(rows) >= limit:
                return rows
        return self._hits(expr, lexemes, ndocs, where, params, limit, exclude, None,
                          count_matched)

    def search(self, q: SearchQuery) -> list[SearchHit]:
        """As ``memidex.index.query.search`` (docs/search.md)."""
        terms = query_terms(q.text)
        if not terms or q.limit <= 0:
            return []
        if q.near:
            pool = self.search(q.replace(near=(), limit=max(5 * q.limit, NEAR_POOL)))
            for anchor in q.near:
                pool += self.search(q.replace(near=(), anchors=(*q.anchors, anchor)))
            return rerank_near(pool, q.near, q.limit)
        lexemes = self._lexemes(terms)
        if any(not lx for lx in lexemes):  # a word with no token matches nothing
            keep = [i for i, lx in enumerate(lexemes) if lx]
            if len(keep) < len(lexemes) and len(terms) == 1:
                return []
        ndocs = self._ndocs(lexemes)
        if len(terms) > 1:
            common_at = max(CAP, self.snapshot.max_rowid // COMMON_SHARE)
            rare = [i for i, lx in enumerate(lexemes) if _count(lx, ndocs) < common_at]
            if rare:
                terms = [terms[i] for i in rare]
                lexemes = [lexemes[i] for i in rare]
        params: dict[str, Any] = {"gen": self.gen}
        where = self._filters(q.product, q.kinds, q.statuses, q.anchors, params, "m")
        and_expr = " & ".join(f"({lx})" if lx else "''" for lx in lexemes)
        bound = min(_count(lx, ndocs) for lx in lexemes)
        rows = self._ranked(and_expr, lexemes, ndocs, bound, where, params, q.limit, set(),
                            False)
        matched = {int(r[0]): len(terms) for r in rows}
        if len(rows) < q.limit and len(terms) > 1:
            or_expr = " | ".join(f"({lx})" for lx in lexemes if lx)
            more = self._ranked(or_expr, lexemes, ndocs, sum(_count(lx, ndocs) for lx in
                                                             lexemes),
                                where, params, max(5 * q.limit, 50), set(matched), True)
            for r in more:
                matched[int(r[0])] = int(r[9])
            rows += more
        ranked = sorted(
            ((SearchHit(id=r[1], kind=r[2], status=r[3], title=r[4], score=round(r[8], 6),
                        confidence=confidence(matched[int(r[0])], len(terms), r[3], r[2]),
                        snippet="", path=r[5], anchors=tuple(str(r[6]).split("\n")),
                        product=r[7], matched=matched[int(r[0])], terms=len(terms)),
              int(r[0])) for r in rows),
            key=lambda pair: sort_key(pair[0]))[: q.limit]
        snippets = self._snippets(lexemes, [rowid for _, rowid in ranked])
        return [hit.replace(snippet=snippets.get(rowid, hit.title)) for hit, rowid in ranked]

    def _snippets(self, lexemes: Sequence[str], rowids: list[int]) -> dict[int, str]:
        """The passage of each shown record (:func:`memidex.teamindex.snippet.snippet`)."""
        from memidex.teamindex.snippet import snippet

        if not rowids:
            return {}
        words = {w for lx in lexemes for w in lx.replace("<->", " ").replace("'", " ").split()}
        rows = self._q(f"SELECT rowid, title, body, anchors FROM {S.SCHEMA}.records"
                       " WHERE gen = %s AND rowid = ANY(%s)", (self.gen, rowids))
        return {int(r[0]): snippet((r[1], r[2], str(r[3]).replace("\n", " ")), words)
                for r in rows}

    # --- lookups, as memidex.index.query ---

    def find_ids(self, id_or_prefix: str) -> list[IndexRow]:
        rows = self._q(f"SELECT {_ROW_COLS} FROM {S.SCHEMA}.records r WHERE r.gen = %s"
                       " AND r.id = %s ORDER BY r.path", (self.gen, id_or_prefix))
        if not rows:
            rows = self._q(f"SELECT {_ROW_COLS} FROM {S.SCHEMA}.records r WHERE r.gen = %s"
                           " AND r.id >= %s AND r.id < %s ORDER BY r.id, r.path LIMIT 50",
                           (self.gen, id_or_prefix, id_or_prefix + "\x7f"))
        return [_row(t) for t in rows]

    def list_records(self, *, product: str | None, kinds: tuple[str, ...] = (),
                     statuses: tuple[str, ...] = (), anchors: tuple[str, ...] = (),
                     limit: int | None = None) -> list[IndexRow]:
        p: dict[str, Any] = {"gen": self.gen}
        where = self._filters(product, kinds, statuses, anchors, p)
        sql = (f"SELECT {_ROW_COLS} FROM {S.SCHEMA}.records r WHERE r.gen = %(gen)s{where}"
               " ORDER BY r.kind, r.id, r.path")
        if limit is not None:
            sql += " LIMIT %(limit)s"
            p["limit"] = limit
        return [_row(t) for t in self._q(sql, p)]

    def max_ordinal(self, product: str) -> int:
        rows = self._q(f"SELECT max(greatest(valid_from, coalesce(last_confirmed, 0),"
                       f" coalesce(valid_until, 0))) FROM {S.SCHEMA}.records"
                       " WHERE gen = %s AND product = %s", (self.gen, product))
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def versions_at(self, ordinal: int, product: str | None, *, kinds: tuple[str, ...] = (),
                    statuses: tuple[str, ...] = (), ids: tuple[str, ...] = (),
                    limit: int | None = None) -> list[VersionRow]:
        """As ``memidex.index.query.versions_at``."""
        clauses = ["v.gen = %(gen)s", "v.valid_from <= %(n)s",
                   "(v.valid_until IS NULL OR %(n)s < v.valid_until)"]
        p: dict[str, Any] = {"gen": self.gen, "n": ordinal}
        for column, values in (("v.product", () if product is None else (product,)),
                               ("v.kind", kinds), ("v.status", statuses), ("v.id", ids)):
            if values:
                key = column[2:]
                clauses.append(f"{column} = ANY(%({key})s)")
                p[key] = list(values)
        sql = ("SELECT v.rowid, v.version, v.current, v.id, r.path, v.product, v.kind,"
               " v.status, v.valid_from, v.valid_until, v.title, v.body, v.anchors, v.source,"
               " v.confirmations, v.contradictions, v.last_confirmed"
               f" FROM {S.SCHEMA}.versions v JOIN {S.SCHEMA}.records r ON r.gen = v.gen"
               f" AND r.rowid = v.rowid WHERE {' AND '.join(clauses)} ORDER BY v.id, r.path")
        if limit is not None:
            sql += " LIMIT %(limit)s"
            p["limit"] = limit
        return [VersionRow(t[0], t[1], bool(t[2]), t[3], t[4], t[5], t[6], t[7], t[8], t[9],
                           t[10], t[11], tuple(str(t[12]).split("\n")), t[13], t[14], t[15],
                           t[16]) for t in self._q(sql, p)]

    def problems(self) -> list[tuple[str, int, str]]:
        return [(r[0], r[1], r[2]) for r in self._q(
            f"SELECT path, line, reason FROM {S.SCHEMA}.problems WHERE gen = %s"
            " ORDER BY path, line, reason", (self.gen,))]

    # --- what a brief reads, as memidex.index.briefing ---

    def anchor_hits(self, anchors: Sequence[str], *, cap: int
                    ) -> tuple[list[tuple[str, int]], bool]:
        if not anchors:
            return [], False
        rows = self._q(f"SELECT anchor, rowid FROM {S.SCHEMA}.anchors WHERE gen = %s AND"
                       " anchor = ANY(%s) ORDER BY anchor, rowid LIMIT %s",
                       (self.gen, sorted(set(anchors)), cap + 1))
        return [(str(a), int(r)) for a, r in rows[:cap]], len(rows) > cap

    _VERSION_COLS = ("id, product, kind, status, valid_from, valid_until, anchors, source,"
                     " confirmations, contradictions, last_confirmed")

    def versions_of(self, rowids: Iterable[int], *, ordinal: int | None = None
                    ) -> list[VersionRow]:
        """Every version of the records ``rowids`` name, by rowid then version, without
        their text or path (``ordinal``: only the current ones and those whose window
        holds it — all a brief at that ordinal ranks)."""
        keys = sorted(set(rowids))
        if not keys:
            return []
        window = ("" if ordinal is None else
                  " AND valid_from <= %(n)s AND %(n)s < valid_until")
        sql = (f"SELECT rowid, coalesce(json_array_length(history::json), 0) + 1, true,"
               f" {self._VERSION_COLS} FROM {S.SCHEMA}.records"
               " WHERE gen = %(gen)s AND rowid = ANY(%(keys)s)"
               " UNION ALL "
               f"SELECT rowid, version, false, {self._VERSION_COLS}"
               f" FROM {S.SCHEMA}.history_versions WHERE gen = %(gen)s"
               f" AND rowid = ANY(%(keys)s){window} ORDER BY 1, 2")
        return [VersionRow(t[0], t[1], bool(t[2]), t[3], "", t[4], t[5], t[6], t[7], t[8],
                           "", "", tuple(str(t[9]).split("\n")), t[10], t[11], t[12], t[13])
                for t in self._q(sql, {"gen": self.gen, "keys": keys, "n": ordinal})]

    def brief_candidates(self, anchors: Sequence[str], *, ordinal: int, cap: int
                         ) -> tuple[list[VersionRow], bool]:
        """The versions a brief at ``ordinal`` ranks for ``anchors`` (the records carrying
        one of them: their current version and the one whose window holds ``ordinal``),
        and whether more than ``cap`` (anchor, record) pairs matched."""
        hits, capped = self.anchor_hits(anchors, cap=cap)
        return self.versions_of({r for _a, r in hits}, ordinal=ordinal), capped

    def version_texts(self, versions: Iterable[tuple[int, int, bool]]
                      ) -> dict[tuple[int, int], tuple[str, str]]:
        wanted = list(versions)
        out: dict[tuple[int, int], tuple[str, str]] = {}
        by_rowid = {r: v for r, v, cur in wanted if cur}
        if by_rowid:
            for rowid, title, body in self._q(
                    f"SELECT rowid, title, body FROM {S.SCHEMA}.records WHERE gen = %s"
                    " AND rowid = ANY(%s)", (self.gen, sorted(by_rowid))):
                out[(rowid, by_rowid[rowid])] = (title, body)
        earlier = sorted((r, v) for r, v, cur in wanted if not cur)
        if earlier:
            for rowid, version, title, body in self._q(
                    f"SELECT h.rowid, h.version, h.title, h.body FROM {S.SCHEMA}.history_versions"
                    " h JOIN unnest(%s::int[], %s::int[]) AS w(r, v) ON h.rowid = w.r AND"
                    " h.version = w.v WHERE h.gen = %s",
                    ([r for r, _ in earlier], [v for _, v in earlier], self.gen)):
                out[(rowid, version)] = (title, body)
        return out

    def citations(self, rowids: Iterable[int]) -> list[tuple[int, int]]:
        keys = sorted(set(rowids))
        if not keys:
            return []
        rows = self._q(
            f"SELECT e.rowid, r.rowid FROM {S.SCHEMA}.edges e JOIN {S.SCHEMA}.records r"
            " ON r.gen = e.gen AND r.id = e.dst WHERE e.gen = %(gen)s"
            " AND e.rowid = ANY(%(keys)s) AND e.rel = 'cites'"
            " UNION "
            f"SELECT r.rowid, e.rowid FROM {S.SCHEMA}.records r JOIN {S.SCHEMA}.edges e"
            " ON e.gen = r.gen AND e.dst = r.id WHERE r.gen = %(gen)s"
            " AND r.rowid = ANY(%(keys)s) AND e.rel = 'cites' ORDER BY 1, 2",
            {"gen": self.gen, "keys": keys})
        return [(int(a), int(b)) for a, b in rows if a != b]

    def policies(self, product: str | None = None) -> list[Policy]:
        """Every policy (by file, then id); ``product``: only those naming it or none."""
        out = []
        for pid, path, line, rule, severity, products, anchors in self._q(
                f"SELECT id, path, line, rule, severity, products, anchors FROM"
                f" {S.SCHEMA}.policies WHERE gen = %s ORDER BY path, id", (self.gen,)):
            policy = Policy(id=pid, rule=rule, severity=severity,
                            products=tuple(json.loads(products)),
                            anchors=tuple(json.loads(anchors)), path=path, line=line)
            if product is None or not policy.products or product in policy.products:
                out.append(policy)
        return out

    def known_product(self, product: str) -> bool:
        rows = self._q(
            f"SELECT EXISTS (SELECT 1 FROM {S.SCHEMA}.records WHERE gen = %s AND product = %s)"
            f" OR EXISTS (SELECT 1 FROM {S.SCHEMA}.run_ordinals WHERE branch = %s AND"
            " product = %s)", (self.gen, product, self.snapshot.branch, product))
        return bool(rows[0][0])

    def products(self) -> list[str]:
        return [str(r[0]) for r in self._q(
            f"SELECT DISTINCT product FROM {S.SCHEMA}.records WHERE gen = %s ORDER BY product",
            (self.gen,))]

    # --- the pushing machines' run stores, merged ---

    def test_anchors(self, product: str, test_id: str) -> tuple[str, ...]:
        """The anchors ``test_id`` touched in the runs of every machine that pushed
        (``RunStore.test_anchors``, merged), sorted."""
        return tuple(str(r[0]) for r in self._q(
            f"SELECT anchor FROM {S.SCHEMA}.test_anchors WHERE branch = %s AND product = %s"
            " AND test_id = %s ORDER BY anchor", (self.snapshot.branch, product, test_id)))

    def next_ordinal(self, product: str) -> int:
        """The highest ``next`` run ordinal any pushing machine counted for ``product``
        (0: none)."""
        rows = self._q(f"SELECT next FROM {S.SCHEMA}.run_ordinals WHERE branch = %s AND"
                       " product = %s", (self.snapshot.branch, product))
        return int(rows[0][0]) if rows else 0


def _single(lexeme: str) -> bool:
    return lexeme.startswith("'") and lexeme.endswith("'") and lexeme.count("'") == 2


def _count(lexeme: str, ndocs: dict[str, int]) -> int:
    """How many records hold ``lexeme`` (an upper bound for a word of several tokens)."""
    if _single(lexeme):
        return ndocs.get(lexeme, 0)
    return 2**31  # not one lexeme: no bound known
