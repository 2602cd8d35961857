"""Sparse tf·idf cosine: the vector strategy when no embedding model is cached. Pure
Python, no dependency, deterministic.

The weighting is SMART **lnc.ltc**: a record's term weights are ``1 + ln tf``
normalised to unit length (no idf, so a record's weights depend on its own tokens only:
adding or removing a record never changes another's, and an incremental update equals a
full rebuild); a query's are ``(1 + ln tf) × idf`` normalised, with ``idf = ln(1 + N /
df)``. The score is their dot product, a cosine in [0, 1].

Feed it what the index has: (record id, tokens) pairs — the FTS5 terms of a record
(stemmed, as the lexical search sees them) or :func:`memidex.vectors.text.tokens` — and,
when the caller has them, the document frequencies (FTS5's ``fts5vocab``). Two ways in:
:class:`SparseModel` holds postings in memory; :func:`rank_postings` ranks postings the
caller fetched for the query's terms only (from SQL, say).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["SparseHit", "SparseModel", "doc_weights", "query_weights", "rank_postings"]


@dataclass(frozen=True, slots=True)
class SparseHit:
    id: str
    score: float  # cosine in [0, 1], rounded to 6 places
    matched: int  # how many of the query's terms the record holds


def doc_weights(tokens: Iterable[str]) -> dict[str, float]:
    """A record's term weights: ``1 + ln tf``, normalised to unit length (lnc)."""
    tf = Counter(tokens)
    raw = {t: 1.0 + math.log(c) for t, c in tf.items()}
    norm = math.sqrt(sum(w * w for w in raw.values()))
    return {t: w / norm for t, w in sorted(raw.items())} if norm else {}


def query_weights(tokens: Iterable[str], df: Mapping[str, int] | Callable[[str], int],
                  n_docs: int) -> dict[str, float]:
    """A query's term weights: ``(1 + ln tf) × ln(1 + N / df)``, normalised (ltc).
    Terms no record holds (``df`` 0) carry no weight."""
    table = df if isinstance(df, Mapping) else None
    count: Callable[[str], int] = df if not isinstance(df, Mapping) else (
        lambda t: int(table.get(t, 0)) if table is not None else 0)
    tf = Counter(tokens)
    raw: dict[str, float] = {}
    for t, c in sorted(tf.items()):
        d = count(t) if n_docs else 0
        if d > 0:
            raw[t] = (1.0 + math.log(c)) * math.log(1.0 + n_docs / d)
    norm = math.sqrt(sum(w * w for w in raw.values()))
    return {t: w / norm for t, w in raw.items()} if norm else {}


def rank_postings(qw: Mapping[str, float],
                  postings: Mapping[str, Iterable[tuple[str, float]]], k: int,
                  allowed: Callable[[str], bool] | None = None) -> list[SparseHit]:
    """The ``k`` best records for query weights ``qw`` over ``postings`` (term →
    (record id, record weight) pairs, for the query's terms), best first, ties on id.
    ``allowed`` filters record ids (product, status)."""
    acc: dict[str, float] = {}
    hits: dict[str, int] = {}
    for term, qv in qw.items():
        for doc, dv in postings.get(term, ()):
            if allowed is not None and not allowed(doc):
                continue
            acc[doc] = acc.get(doc, 0.0) + qv * dv
            hits[doc] = hits.get(doc, 0) + 1
    ranked = sorted(acc.items(), key=lambda kv: (-round(kv[1], 12), kv[0]))
    return [SparseHit(doc, round(score, 6), hits[doc]) for doc, score in ranked[:max(k, 0)]]


class SparseModel:
    """tf·idf cosine over records held in memory: fit once, add and remove records
    (each change touches that record's postings only), query."""

    def __init__(self) -> None:
        self._postings: dict[str, dict[str, float]] = {}
        self._docs: dict[str, dict[str, float]] = {}
        self._external_df: Mapping[str, int] | None = None
        self._external_n: int | None = None

    @classmethod
    def fit(cls, docs: Iterable[tuple[str, Sequence[str]]], *,
            df: Mapping[str, int] | None = None, n_docs: int | None = None) -> SparseModel:
        """From (record id, tokens) pairs. ``df``/``n_docs``: document frequencies the
        caller already has (FTS5's vocabulary); by default they are counted here."""
        model = cls()
        for doc_id, toks in docs:
            model.add(doc_id, toks)
        if df is not None:
            model._external_df = df
            model._external_n = n_docs if n_docs is not None else len(model._docs)
        return model

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    def add(self, doc_id: str, toks: Sequence[str]) -> None:
        """Add a record, or replace its tokens."""
        self.remove(doc_id)
        weights = doc_weights(toks)
        self._docs[doc_id] = weights
        for term, w in weights.items():
            self._postings.setdefault(term, {})[doc_id] = w

    def remove(self, doc_id: str) -> None:
        old = self._docs.pop(doc_id, None)
        for term in old or ():
            plist = self._postings.get(term)
            if plist is not None:
                plist.pop(doc_id, None)
                if not plist:
                    del self._postings[term]

    def df(self, term: str) -> int:
        if self._external_df is not None:
            return int(self._external_df.get(term, 0))
        return len(self._postings.get(term, ()))

    @property
    def n_docs(self) -> int:
        return self._external_n if self._external_n is not None else len(self._docs)

    def query(self, toks: Sequence[str], k: int = 10, *,
              allowed: Callable[[str], bool] | None = None) -> list[SparseHit]:
        """The ``k`` records most similar to the query tokens, best first."""
        qw = query_weights(toks, self.df, self.n_docs)
        postings = {t: sorted(self._postings.get(t, {}).items()) for t in qw}
        return rank_postings(qw, postings, k, allowed)
