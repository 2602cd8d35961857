"""A record's trust over run ordinals (the dashboard's trust chart, ``Memidex.trust_series``):
the record as the change ledger saw it at each ordinal, weighed by
:func:`memidex.trust.record_trust` there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memidex.config import Config
from memidex.errors import RecordError
from memidex.store.files import Store

if TYPE_CHECKING:
    from memidex.records.model import Record

__all__ = ["TRUST_POINTS", "TrustPoint", "TrustSeries", "trust_series"]

TRUST_POINTS = 200
"""The most ordinals :func:`trust_series` gives (evenly spread)."""


@dataclass(frozen=True)
class TrustPoint:
    """A record's trust as a brief at ``ordinal`` would weigh it (``version``: 1 the
    oldest in its history, the current version last)."""

    ordinal: int
    version: int
    status: str
    value: float

    def to_json(self) -> dict[str, Any]:
        return {"ordinal": self.ordinal, "version": self.version, "status": self.status,
                "value": self.value}


@dataclass(frozen=True)
class TrustSeries:
    """A record's trust over run ordinals, from its oldest version's start to the
    product's next ordinal (:func:`memidex.trust.record_trust` of the version whose window
    holds each ordinal; a gap where no version does). At most ``MAX_POINTS`` ordinals,
    evenly spread, the first and the last always among them."""

    record_id: str
    product: str
    next_ordinal: int
    points: tuple[TrustPoint, ...]

    def to_json(self) -> dict[str, Any]:
        return {"record_id": self.record_id, "product": self.product,
                "next_ordinal": self.next_ordinal,
                "points": [p.to_json() for p in self.points]}



def trust_series(config: Config, store: Store, r: Record, floor: int) -> TrustSeries:
    """The record's trust at each run ordinal (:class:`TrustSeries`), from its oldest
    version's start to the product's next ordinal: at each ordinal, the record as it
    was then — its last write at or before that ordinal in the change ledger (each
    confirmation raising it, each contradiction lowering it) or, before the ledger
    knew it, the version its file keeps for that window — weighed by
    :func:`memidex.trust.record_trust` there."""
    from memidex.runstate.ordinals import current_ordinal

    nxt = current_ordinal(config, r.product, floor) + 1
    known = _ledger_states(store, r)
    start = min([r.valid.from_, *(h.valid.from_ for h in r.history),
                 *(o for o, _ in known)])
    # the file as it is now from the last write the ledger knows on (a hand edit since)
    known.append((max([o for o, _ in known], default=start), r))
    end = max(nxt, start)
    step = max(1, -(-(end - start) // (TRUST_POINTS - 1)))
    points = []
    half_lives = config.half_life_runs
    for o in sorted({*range(start, end, step), end}):
        state = next((rec for at, rec in reversed(known) if at <= o), r)
        found = _version_at(state, o, half_lives) or _version_at(r, o, half_lives)
        if found is not None:
            points.append(TrustPoint(o, *found))
    return TrustSeries(r.id, r.product, nxt, tuple(points))

def _ledger_states(store: Store, r: Record) -> list[tuple[int, Record]]:
    """(ordinal, the record as that write left it), oldest first, from the change
    ledger's landed writes of ``r`` (a person's curation, which names no run, at the
    ordinal the record itself names then); unreadable bytes are skipped."""
    from memidex.records.codec import parse_record_bytes
    from memidex.write.ledger import Ledger

    ledger = Ledger(store.queue_dir)
    out: list[tuple[int, Record]] = []
    for entry in ledger.for_record(r.id):
        for op in entry.ops:
            if op.record_id != r.id or not entry.landed or op.after is None:
                continue
            try:
                data = ledger.after_bytes(op)
                rec = parse_record_bytes(data, op.path) if data is not None else None
            except (LookupError, RecordError, OSError, UnicodeDecodeError):
                continue
            if rec is None or rec.id != r.id:
                continue
            at = entry.ordinal if entry.ordinal is not None else max(
                [rec.valid.from_, rec.trust.last_confirmed or 0, *(o for o, _ in out)])
            out.append((at, rec))
    return out


def _version_at(r: Record, ordinal: int, half_lives: Mapping[str, int]
                ) -> tuple[int, str, float] | None:
    """(version number, status, trust at ``ordinal``) of the version of ``r`` whose window
    holds ``ordinal``; None when none does."""
    from dataclasses import replace

    from memidex.records.model import Valid
    from memidex.trust import record_trust

    versions = [(h.valid, *h.resolved(r)) for h in r.history]
    versions.append((r.valid, r.trust, r.anchors, r.status))
    for number, (valid, trust, _anchors, status) in enumerate(versions, 1):
        if valid.from_ <= ordinal and (valid.until is None or ordinal < valid.until):
            version = replace(r, trust=trust, valid=Valid(valid.from_, valid.until))
            return number, status, record_trust(version, ordinal=ordinal,
                                                 half_life_runs=half_lives).value
    return None
