"""Ranking a brief's records: trust × anchor overlap (docs/brief.md, "Ranking"). Pure.

* **The test's anchors**: those of its past runs (the run store), ``--anchor``, and
  ``test:<test_id>`` itself.
* **One hop through the anchor graph.** Two anchors are neighbours when a record carries
  both; the weight of the edge is how many of the test's servable records (of its
  product) carry both. The :data:`HOP_ANCHORS` neighbours of the test's anchors with the
  heaviest edges (ties: by name) are its *hop anchors*; and a ``cites`` relation (either
  way) between a record that shares an anchor and another record is one hop too.
* **Overlap**: for a record that shares anchors with the test, how many it shares; for
  one reached only by a hop, :data:`HOP_DISCOUNT` × (its hop anchors + citations).
* **Score** = trust (:func:`memidex.trust.record_trust` of the version served, at the
  brief's ordinal) × overlap.
* **Order**: every record that shares an anchor with the test comes before every record
  reached only by a hop; then score, higher first; then id. Same inputs, same order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from memidex.index.query import VersionRow
from memidex.plain import Frozen, set_field
from memidex.trust import TrustScore, version_trust

__all__ = ["HOP_ANCHORS", "HOP_DISCOUNT", "REASONS", "Ranked", "hop_anchors", "rank"]

HOP_DISCOUNT = 0.5
"""What an anchor reached by one hop (or a citation) counts for, against 1 for an anchor
the test itself has."""
HOP_ANCHORS = 8
"""How many neighbouring anchors one hop reaches."""

REASONS = ("superseded", "deprecated", "quarantined", "candidate", "out_of_window",
           "below_trust_floor", "not_reached", "test_failing", "over_limit", "over_budget",
           "other_product")
"""Why a record that shares an anchor with the test (or is one hop away) was left out,
in the order the ``withheld`` section lists them."""

_SERVABLE = ("active", "candidate")


class Ranked(Frozen):
    """A record a brief serves: the version served, its trust and why it is there
    (``cited``: ids of the records sharing an anchor that cite it, or it cites)."""

    __slots__ = ("row", "trust", "shared", "hop", "cited", "overlap", "score")
    row: VersionRow
    trust: TrustScore
    shared: tuple[str, ...]
    hop: tuple[str, ...]
    cited: tuple[str, ...]
    overlap: float
    score: float

    def __init__(self, row: VersionRow, trust: TrustScore, shared: tuple[str, ...],
                 hop: tuple[str, ...], cited: tuple[str, ...], overlap: float,
                 score: float) -> None:
        set_field(self, "row", row)
        set_field(self, "trust", trust)
        set_field(self, "shared", shared)
        set_field(self, "hop", hop)
        set_field(self, "cited", cited)
        set_field(self, "overlap", overlap)
        set_field(self, "score", score)

    @property
    def tier(self) -> str:
        return "direct" if self.shared else "hop"

    @property
    def candidate(self) -> bool:
        return self.row.status == "candidate"


def hop_anchors(rows: Iterable[VersionRow], test_anchors: frozenset[str], product: str,
                k: int = HOP_ANCHORS) -> tuple[str, ...]:
    """The ``k`` anchors that co-occur most often with the test's anchors on the current,
    servable records of ``product`` that carry one of them."""
    counts: Counter[str] = Counter()
    for r in rows:
        if r.current and r.product == product and r.status in _SERVABLE and \
                not test_anchors.isdisjoint(r.anchors):
            counts.update(a for a in set(r.anchors) if a not in test_anchors)
    best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    return tuple(sorted(a for a, _ in best))


def _in_window(r: VersionRow, ordinal: int) -> bool:
    return r.valid_from <= ordinal and (r.valid_until is None or ordinal < r.valid_until)


def _trust(r: VersionRow, ordinal: int, half_life_runs: Mapping[str, int]) -> TrustScore:
    return version_trust(r.kind, r.source, r.confirmations, r.contradictions,
                         r.last_confirmed, r.valid_from, ordinal=ordinal,
                         half_life_runs=half_life_runs)


def _withheld_reason(versions: Sequence[VersionRow], product: str, ordinal: int,
                     candidates: bool) -> tuple[str | None, VersionRow | None]:
    """(why the record is left out, or None; the version to serve)."""
    current = next((v for v in versions if v.current), versions[-1])
    if current.product != product:
        return "other_product", None
    if current.status == "quarantined":
        return "quarantined", None
    served = next((v for v in versions if _in_window(v, ordinal)), None)
    if served is None:
        if current.status in ("superseded", "deprecated"):
            return current.status, None
        return "out_of_window", None
    if served.status in ("superseded", "deprecated") and served.valid_until is None:
        return served.status, None  # retired with no end to its window: never served
    if served.status == "candidate" and not candidates:
        return "candidate", None
    return None, served


def rank(rows: Iterable[VersionRow], *, product: str, ordinal: int,
         test_anchors: frozenset[str], hops: frozenset[str],
         cited: Mapping[int, set[str]], candidates: bool, trust_floor: float,
         half_life_runs: Mapping[str, int], not_reached: frozenset[str] = frozenset(),
         failing: frozenset[str] = frozenset()) -> tuple[list[Ranked], dict[str, set[str]]]:
    """The records to serve, best first, and the ids withheld by reason (before the
    limit and the budget, which :mod:`memidex.serve.brief` applies).

    A version whose window contains ``ordinal`` is served; a record retired at ``until``
    (superseded or deprecated) is served, as it was then, to a run before ``until``.
    For the next run (the caller passes them only then): a current fact whose test's
    last passing run no longer reached it (``not_reached``: ids) is withheld until a run
    reaches it again, and a procedure whose test's last run failed for a cause that is
    neither flaky nor environmental (``failing``: its ``test:`` anchor) until it passes."""
    by_record: dict[int, list[VersionRow]] = {}
    for r in rows:
        by_record.setdefault(r.record_rowid, []).append(r)
    withheld: dict[str, set[str]] = {reason: set() for reason in REASONS}
    out: list[Ranked] = []
    for rowid, versions in by_record.items():
        reason, served = _withheld_reason(versions, product, ordinal, candidates)
        if served is None:
            withheld[reason or "out_of_window"].add(versions[0].id)
            continue
        shared = tuple(a for a in served.anchors if a in test_anchors)
        # a record sharing an anchor is scored by what it shares; one reached only by a
        # hop, by its hop anchors and citations, each at the discount
        hop = () if shared else tuple(a for a in served.anchors if a in hops)
        cites = () if shared else tuple(sorted(cited.get(rowid, ())))
        if not shared and not hop and not cites:
            continue  # this version is about something else (its anchors changed)
        if served.current and served.kind == "fact" and served.id in not_reached:
            withheld["not_reached"].add(served.id)
            continue
        if served.current and served.kind == "procedure" and served.anchors and \
                served.anchors[0] in failing:
            withheld["test_failing"].add(served.id)
            continue
        trust = _trust(served, ordinal, half_life_runs)
        if trust.value < trust_floor:
            withheld["below_trust_floor"].add(served.id)
            continue
        overlap = len(shared) + HOP_DISCOUNT * (len(hop) + len(cites))
        out.append(Ranked(served, trust, tuple(sorted(shared)), tuple(sorted(hop)), cites,
                          overlap, trust.value * overlap))
    out.sort(key=lambda x: (not x.shared, -x.score, x.row.id, x.row.record_rowid))
    seen: set[str] = set()
    unique = []
    for x in out:  # the same id in two files (doctor reports it): served once
        if x.row.id not in seen:
            seen.add(x.row.id)
            unique.append(x)
    served_ids = {x.row.id for x in unique}
    for ids in withheld.values():
        ids -= served_ids
    return unique, withheld
