"""The ``bundle-scan`` level: search by reading the records directly, no index.

Used when the index is missing, locked or damaged. It applies the same filters, the same
BM25 (FTS5's formula and column weights), the same AND-then-OR rule, confidence labels
and tie-breaks as the index (``memidex.search.ranking``). The one difference: words are not
stemmed, so ``disabled`` does not find ``disable`` here.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from memidex.records.model import Record
from memidex.search.ranking import (
    COLUMN_WEIGHTS,
    SearchHit,
    SearchQuery,
    confidence,
    query_terms,
    sort_key,
)
from memidex.store.files import LoadedRecord

__all__ = ["matches_filters", "scan_near", "scan_search"]

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
K1, B = 1.2, 0.75


@dataclass
class _Doc:
    lr: LoadedRecord
    counts: list[Counter[str]]
    length: int


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def matches_filters(r: Record, product: str | None, kinds: tuple[str, ...],
                    statuses: tuple[str, ...], anchors: tuple[str, ...]) -> bool:
    if product is not None and r.product != product:
        return False
    if kinds and r.kind not in kinds:
        return False
    if statuses and r.status not in statuses:
        return False
    for want in anchors:
        have = r.all_anchors
        if want.endswith("*"):
            if not any(a.startswith(want[:-1]) for a in have):
                return False
        elif want not in have:
            return False
    return True


def _snippet(r: Record, terms: list[str], width: int = 16) -> str:
    for text in (r.body, r.title, " ".join(r.all_anchors)):
        words = text.split()
        for i, word in enumerate(words):
            if any(t in _tokens(word) for t in terms):
                lo = max(0, i - width // 2)
                window = words[lo : lo + width]
                marked = [f"«{w}»" if any(t in _tokens(w) for t in terms) else w
                          for w in window]
                prefix = "…" if lo > 0 else ""
                suffix = "…" if lo + width < len(words) else ""
                return prefix + " ".join(marked) + suffix
    return r.title


def scan_search(records: Iterable[LoadedRecord], q: SearchQuery) -> list[SearchHit]:
    terms = query_terms(q.text)
    if not terms or q.limit <= 0:
        return []
    docs: list[_Doc] = []
    for lr in records:
        r = lr.record
        columns = (r.title, r.body, " ".join(r.all_anchors))
        counts = [Counter(_tokens(c)) for c in columns]
        docs.append(_Doc(lr, counts, sum(sum(c.values()) for c in counts)))
    # FTS5 computes idf and the average length over every row of the table.
    n = len(docs)
    avgdl = (sum(d.length for d in docs) / n) if n else 1.0
    idf = {}
    for t in terms:
        hits = sum(1 for d in docs if any(t in c for c in d.counts))
        value = math.log((n - hits + 0.5) / (hits + 0.5)) if n else 0.0
        idf[t] = value if value > 0 else 1e-6
    out: list[SearchHit] = []
    for d in docs:
        r = d.lr.record
        if not matches_filters(r, q.product, q.kinds, q.statuses, q.anchors):
            continue
        score = 0.0
        matched = 0
        for t in terms:
            freq = sum(w * c[t] for w, c in zip(COLUMN_WEIGHTS, d.counts, strict=True))
            if not freq:
                continue
            matched += 1
            norm = K1 * (1 - B + B * d.length / (avgdl or 1.0))
            score += idf[t] * (freq * (K1 + 1)) / (freq + norm)
        if not matched:
            continue
        out.append(SearchHit(
            id=r.id, kind=r.kind, status=r.status, title=r.title, score=round(score, 6),
            confidence=confidence(matched, len(terms), r.status, r.kind),
            snippet=_snippet(r, terms),
            path=d.lr.relpath, anchors=r.all_anchors, product=r.product, matched=matched,
            terms=len(terms),
        ))
    out.sort(key=sort_key)
    full = [h for h in out if h.matched >= len(terms)]
    if len(full) >= q.limit:
        return full[: q.limit]
    return out[: q.limit]


def scan_near(records: list[LoadedRecord], q: SearchQuery) -> list[SearchHit]:
    """``search --near`` without the index: the same pool as the index's (the best BM25
    results, and the best carrying each ``--near`` anchor), re-ranked the same way."""

    from memidex.search.ranking import rerank_near

    pool = scan_search(records, q.replace(near=(), limit=max(5 * q.limit, 50)))
    for anchor in q.near:
        pool += scan_search(records, q.replace(near=(), anchors=(*q.anchors, anchor)))
    return rerank_near(pool, q.near, q.limit)
