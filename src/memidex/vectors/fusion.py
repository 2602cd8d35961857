"""Hybrid search as pure functions over two ranked lists, and the confidence labels of
the vector strategies.

**The IBEX rule** (``fusion="append"``, the default): vector results first, in their
order; when they leave the page unfilled (fewer than ``limit``), full-text results are
appended in theirs; a record is listed once (its first place wins); at most ``limit``.
``page_unfilled`` says the full-text list was consulted; ``fallback_fired`` says it
added at least one record (IBEX counts only that). The caller can skip the full-text
query when :func:`needs_fallback` is false.

``fusion="rrf"``: reciprocal-rank fusion, ``Σ 1 / (k + rank)`` over both lists
(``k = 60``), ties on id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = ["RRF_K", "THRESHOLDS", "FusedHit", "HybridResult", "Scored", "Thresholds",
           "confidence", "hybrid", "needs_fallback"]

RRF_K = 60


class Scored(Protocol):
    """A ranked result: an id and a score (a :class:`~memidex.search.ranking.SearchHit`,
    a :class:`~memidex.vectors.matrix.VectorHit`, a sparse hit)."""

    @property
    def id(self) -> str: ...

    @property
    def score(self) -> float: ...


@dataclass(frozen=True, slots=True)
class FusedHit:
    id: str
    source: Literal["vector", "full_text", "both"]
    score: float  # the vector score, the full-text score (appended) or the RRF score
    item: object  # the hit as given (the vector hit when a record is in both lists)
    vector_rank: int | None  # 1-based place in the vector list, None if absent
    fts_rank: int | None


@dataclass(frozen=True, slots=True)
class HybridResult:
    hits: tuple[FusedHit, ...]
    fusion: Literal["append", "rrf"]
    page_unfilled: bool
    fallback_fired: bool
    fts_added: int

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.hits]


def needs_fallback(vector_hits: Sequence[Scored], limit: int) -> bool:
    """Whether the IBEX rule will look at the full-text list: the vector results (one per
    id) fill fewer than ``limit`` places."""
    return len({h.id for h in vector_hits}) < limit


def _ranks(hits: Sequence[Scored]) -> dict[str, tuple[int, Scored]]:
    out: dict[str, tuple[int, Scored]] = {}
    for h in hits:
        if h.id not in out:
            out[h.id] = (len(out) + 1, h)
    return out


def hybrid(vector_hits: Sequence[Scored], fts_hits: Sequence[Scored], limit: int,
           fusion: Literal["append", "rrf"] = "append", *, min_score: float | None = None,
           rrf_k: int = RRF_K) -> HybridResult:
    """Merge the vector and full-text results (each best first) into one page.
    ``min_score``: vector hits below it are dropped first (IBEX's ``min_similarity``;
    :data:`THRESHOLDS` ``[level].floor`` is the measured one)."""
    if limit < 0:
        raise ValueError("limit must be >= 0")
    if min_score is not None:
        vector_hits = [h for h in vector_hits if h.score >= min_score]
    vec = _ranks(vector_hits)
    fts = _ranks(fts_hits)
    if fusion == "rrf":
        fused: list[tuple[float, str]] = []
        for rid in vec.keys() | fts.keys():
            s = 0.0
            if rid in vec:
                s += 1.0 / (rrf_k + vec[rid][0])
            if rid in fts:
                s += 1.0 / (rrf_k + fts[rid][0])
            fused.append((s, rid))
        fused.sort(key=lambda t: (-t[0], t[1]))
        hits = []
        for s, rid in fused[:limit]:
            v, f = vec.get(rid), fts.get(rid)
            source: Literal["vector", "full_text", "both"] = (
                "both" if v and f else "vector" if v else "full_text")
            first = v if v is not None else f
            assert first is not None  # every fused id came from one of the lists
            hits.append(FusedHit(rid, source, round(s, 9), first[1], v[0] if v else None,
                                 f[0] if f else None))
        return HybridResult(tuple(hits), "rrf", False, False, 0)
    if fusion != "append":
        raise ValueError(f"unknown fusion {fusion!r}: append or rrf")
    out: list[FusedHit] = []
    for rid, (rank, h) in vec.items():
        if len(out) == limit:
            break
        out.append(FusedHit(rid, "vector", h.score, h, rank,
                            fts[rid][0] if rid in fts else None))
    unfilled = len(vec) < limit
    added = 0
    if unfilled:
        for rid, (rank, h) in fts.items():
            if len(out) == limit:
                break
            if rid in vec:
                continue
            out.append(FusedHit(rid, "full_text", h.score, h, None, rank))
            added += 1
    return HybridResult(tuple(out), "append", unfilled, added > 0, added)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """A score at or above ``reliable`` is labelled reliable; at or above ``candidate``,
    candidate; below, weak. ``floor``: below it a vector hit is noise — the hybrid's
    ``min_similarity`` (drop vector hits under it before :func:`hybrid`, so the page is
    unfilled and full-text results are appended)."""

    reliable: float
    candidate: float
    floor: float = 0.0

    def label(self, score: float) -> str:
        if score >= self.reliable:
            return "reliable"
        if score >= self.candidate:
            return "candidate"
        return "weak"


# Measured by bench/retrieval/run.py (docs/vectors.md, "Confidence labels") on the example
# shop's 65 records among 2,000 generated ones, 135 queries: over every query's top 10,
# ``reliable`` is the lowest score above which at least 90 % of the hits were relevant,
# ``candidate`` at least half, ``floor`` at least a fifth. Per strategy, because the
# cosines of different models live on different scales; the model levels' figures are
# all-MiniLM-L6-v2's and its distilled static floor's.
THRESHOLDS: Mapping[str, Thresholds] = {
    "sparse": Thresholds(reliable=0.48, candidate=0.28, floor=0.08),
    "static-floor": Thresholds(reliable=0.76, candidate=0.63, floor=0.49),
    "memidex": Thresholds(reliable=0.57, candidate=0.41, floor=0.30),
}


def confidence(strategy: str, score: float,
               thresholds: Mapping[str, Thresholds] | None = None) -> str:
    """``reliable``, ``candidate`` or ``weak`` for a vector score of ``strategy``
    (``sparse``, ``static-floor`` or ``memidex``: the level whose vectors scored it).
    The lexical strategy's labels are :func:`memidex.search.ranking.confidence`'s."""
    table = THRESHOLDS if thresholds is None else thresholds
    if strategy not in table:
        raise ValueError(f"no confidence thresholds for strategy {strategy!r} "
                         f"(known: {', '.join(sorted(table))})")
    return table[strategy].label(score)
