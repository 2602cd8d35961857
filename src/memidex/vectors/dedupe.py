"""Curation's near-duplicate check, as a pure function: a new candidate whose vector is
near an existing record **about another anchor** (same-anchor records already share an
id) gets a proposed duplicate link for a person to review — never a merge.

The threshold is measured on bench/retrieval's pairs (docs/vectors.md, "Near
duplicates"); a fixed 0.88 flagged 99 % of good records in one peer's measurement, so it
is per level and set from false merges counted on real records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy.typing as npt

    from memidex.vectors.matrix import VectorMatrix

__all__ = ["DUPLICATE_THRESHOLDS", "DuplicateLink", "near_duplicates"]

# Cosine at or above which a candidate is proposed as a duplicate, per level, measured by
# bench/retrieval/run.py ("near duplicates"): the lowest threshold with no false merge
# among 1,777 good records (the example shop's and 2,000 generated ones), which links 88 %
# of 25 records restated under another anchor. The static floor and sparse vectors have
# no entry: no threshold separates them (at 0.88 the static floor merged 97 % of the
# good records; at 0.93, where it merges none of the shop's, it links 28 % of the
# restated ones), so the check is only offered at the ``memidex`` level.
DUPLICATE_THRESHOLDS: Mapping[str, float] = {
    "memidex": 0.77,
}


@dataclass(frozen=True, slots=True)
class DuplicateLink:
    """A proposed link: the candidate looks like record ``id`` (main anchor ``anchor``)."""

    id: str
    anchor: str
    score: float


def near_duplicates(candidate: npt.ArrayLike, candidate_anchor: str,
                    existing: VectorMatrix, anchors: Mapping[str, str], *,
                    threshold: float, limit: int = 3,
                    mask: npt.ArrayLike | None = None) -> list[DuplicateLink]:
    """The existing records (at most ``limit``, best first) whose vector has a cosine of
    at least ``threshold`` with ``candidate`` and whose main anchor (``anchors[id]``) is
    not ``candidate_anchor``. ``mask`` narrows the records compared (same product and
    kind, say). The candidate's text was masked before it was embedded."""
    import numpy as np

    keep = np.array([anchors.get(rid) != candidate_anchor for rid in existing.ids],
                    dtype=bool)
    if mask is not None:
        keep &= np.asarray(mask, dtype=bool)
    hits = existing.top_k(candidate, limit, keep, min_score=threshold)
    return [DuplicateLink(h.id, anchors.get(h.id, ""), h.score) for h in hits]
