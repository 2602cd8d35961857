"""Search ranking rules shared by the index and the bundle scan. Pure: no I/O.

* A query is split into words (letters and digits); FTS5 syntax in it is never
  interpreted — quotes, ``-``, ``:``, ``*`` and parentheses are just separators.
* Stopwords are dropped unless the query is nothing but stopwords.
* First every word must match (AND); if that fills fewer than ``limit`` results, records
  matching only some words follow (OR), ranked by how many words they match.
* Score is BM25 with column weights title 10, anchors 5, body 1; ties break on id, then
  path, so equal inputs always give equal output.
* Snippets mark matched words as ``«word»``.
* Confidence (``docs/search.md``): ``reliable`` — every word matched and the record is
  active and not an ``unknown`` (an open question); ``candidate`` — every word matched in
  any other record, or at least half the words matched; ``weak`` — fewer than half.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memidex.plain import Frozen, set_field

__all__ = [
    "COLUMN_WEIGHTS",
    "DEFAULT_STATUSES",
    "SearchHit",
    "SearchQuery",
    "STOPWORDS",
    "confidence",
    "fts_expression",
    "NEAR_WEIGHT",
    "near_matches",
    "query_terms",
    "rerank_near",
    "sort_key",
]

COLUMN_WEIGHTS = (10.0, 1.0, 5.0)  # title, body, anchors — the FTS column order
MAX_TERMS = 16
DEFAULT_STATUSES: tuple[str, ...] = ("active", "candidate")

STOPWORDS = frozenset(
    """a an and are as at be but by for from has have if in into is it its of on or so
    such that the their then there these they this to was were will with""".split()
)

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class SearchQuery(Frozen):
    """What to search for. ``product`` None: every product (only with an explicit
    ``--all-products``); ``statuses`` () means any status; ``near``: rank by overlap with
    these anchors too (:func:`rerank_near`)."""

    __slots__ = ("text", "product", "kinds", "statuses", "anchors", "limit", "near")
    text: str
    product: str | None
    kinds: tuple[str, ...]
    statuses: tuple[str, ...]
    anchors: tuple[str, ...]
    limit: int
    near: tuple[str, ...]

    def __init__(self, text: str, product: str | None, kinds: tuple[str, ...] = (),
                 statuses: tuple[str, ...] = DEFAULT_STATUSES, anchors: tuple[str, ...] = (),
                 limit: int = 10, near: tuple[str, ...] = ()) -> None:
        set_field(self, "text", text)
        set_field(self, "product", product)
        set_field(self, "kinds", kinds)
        set_field(self, "statuses", statuses)
        set_field(self, "anchors", anchors)
        set_field(self, "limit", limit)
        set_field(self, "near", near)


class SearchHit(Frozen):
    """One result of a search. ``reasons`` (why it ranked where it did) is left out of
    equality and the hash."""

    __slots__ = ("id", "kind", "status", "title", "score", "confidence", "snippet", "path",
                 "anchors", "product", "matched", "terms", "reasons")
    _eq_fields = __slots__[:-1]
    id: str
    kind: str
    status: str
    title: str
    score: float
    confidence: str
    snippet: str
    path: str
    anchors: tuple[str, ...]
    product: str
    matched: int
    terms: int
    reasons: dict[str, object] | None

    def __init__(self, id: str, kind: str, status: str, title: str, score: float,
                 confidence: str, snippet: str, path: str, anchors: tuple[str, ...],
                 product: str, matched: int = 0, terms: int = 0,
                 reasons: dict[str, object] | None = None) -> None:
        set_field(self, "id", id)
        set_field(self, "kind", kind)
        set_field(self, "status", status)
        set_field(self, "title", title)
        set_field(self, "score", score)
        set_field(self, "confidence", confidence)
        set_field(self, "snippet", snippet)
        set_field(self, "path", path)
        set_field(self, "anchors", anchors)
        set_field(self, "product", product)
        set_field(self, "matched", matched)
        set_field(self, "terms", terms)
        set_field(self, "reasons", reasons)

    def as_dict(self) -> dict[str, object]:
        extra = {} if self.reasons is None else {"reasons": self.reasons}
        return {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "title": self.title,
            "score": self.score,
            "confidence": self.confidence,
            "snippet": self.snippet,
            "path": self.path,
            "anchors": list(self.anchors),
            "product": self.product,
            "matched_terms": self.matched,
            **extra,
        }


def query_terms(text: str) -> list[str]:
    """The words of a query, lower-cased, without repeats, stopwords dropped if others remain."""
    words: list[str] = []
    for w in _WORD.findall(text.lower()):
        if w not in words:
            words.append(w)
    content = [w for w in words if w not in STOPWORDS]
    return (content or words)[:MAX_TERMS]


def fts_expression(terms: list[str], op: str = "AND") -> str:
    """An FTS5 MATCH expression that treats every term as a quoted literal."""
    return f" {op} ".join('"' + t.replace('"', '""') + '"' for t in terms)


def confidence(matched: int, terms: int, status: str, kind: str = "fact") -> str:
    if terms and matched >= terms:
        return "reliable" if status == "active" and kind != "unknown" else "candidate"
    if terms and matched * 2 >= terms:
        return "candidate"
    return "weak"


def sort_key(hit: SearchHit) -> tuple[int, float, str, str]:
    """More words matched first, then score (higher first), then id, then path."""
    return (-hit.matched, -hit.score, hit.id, hit.path)


NEAR_WEIGHT = 1.0
"""``--near``: each anchor a result shares with the ``--near`` anchors adds this much of
its BM25 score again (docs/search.md, "Near an anchor")."""


def near_matches(anchors: Sequence[str], near: Sequence[str]) -> list[str]:
    """The anchors of ``anchors`` that one of ``near`` names (exactly, or by a prefix
    ending in ``*``), in their order."""
    out = []
    for a in anchors:
        for want in near:
            if (a.startswith(want[:-1]) if want.endswith("*") else a == want):
                out.append(a)
                break
    return out


def rerank_near(hits: Sequence[SearchHit], near: Sequence[str], limit: int
                ) -> list[SearchHit]:
    """``hits`` (one per id and path) ranked by words matched, then BM25 × (1 +
    NEAR_WEIGHT × anchors shared with ``near``), then id and path; each with its
    ``reasons`` (the BM25 score, the anchors shared, the combined score, the rank)."""
    seen: set[tuple[str, str]] = set()
    scored: list[tuple[tuple[int, float, str, str], SearchHit, list[str], float]] = []
    for h in hits:
        if (h.id, h.path) in seen:
            continue
        seen.add((h.id, h.path))
        shared = near_matches(h.anchors, near)
        combined = round(h.score * (1 + NEAR_WEIGHT * len(shared)), 6)
        scored.append(((-h.matched, -combined, h.id, h.path), h, shared, combined))
    scored.sort(key=lambda t: t[0])
    return [h.replace(reasons={"rank": i, "bm25": h.score, "shared": shared,
                                "overlap": len(shared), "score": combined,
                                "matched_terms": h.matched, "terms": h.terms})
            for i, (_k, h, shared, combined) in enumerate(scored[:limit], start=1)]
