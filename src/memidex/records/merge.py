"""The field-level three-way merge of one record (``memidex merge-driver``), pure.

Two branches that learned about the same subject write the same file (the id is derived
from the subject, never from wording), so git hands the three versions — the merge base,
ours and theirs — to :func:`merge_texts`. The rules (``docs/review.md``):

* identical sides, or a side equal to the base: the other side, unchanged;
* ``evidence``: the union, keyed by (run, test, step), in canonical order (run, test,
  step); an item the base had and one side removed stays removed;
* ``trust.confirmations`` / ``contradictions``: the base plus both sides' increments;
  ``last_confirmed`` the larger; ``source`` as a plain field (both changed: the higher of
  human > ci > local > import);
* ``anchors`` and every relation list: sets, a removal on one side honoured;
* ``history``: merged by window ``(from, until)``;
* ``status`` changed on both sides: the more cautious — quarantined > deprecated >
  superseded > candidate > active;
* ``valid.until`` changed on both sides: the earlier;
* a new version on one side (``valid.from`` moved on: superseded in place) wins over
  changes to the old version on the other: its confirmations go to the old version's
  history entry; a rewrite of the old version's title or body is a conflict;
* both sides rewrote the title or the body differently, or named different
  ``superseded_by`` records: a conflict — git's markers in the body, and
  :attr:`MergeResult.clean` false.

With no base (a new file on both sides) the merge is a two-way union: counts add up.
A side that does not parse (or identity fields that differ) gives ``record=None``: the
caller leaves git's ordinary textual conflict (:func:`marked_text` is a fallback).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from memidex.errors import RecordError
from memidex.records.model import (
    MAX_ORDINAL,
    Evidence,
    HistoryEntry,
    Record,
    Relations,
    Trust,
    Valid,
)

__all__ = ["CAUTION", "MergeResult", "marked_text", "merge_records", "merge_texts"]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

CAUTION: dict[str, int] = {"active": 0, "candidate": 1, "superseded": 2, "deprecated": 3,
                           "quarantined": 4}
"""Status rank when both sides changed it: the higher (more cautious) wins."""
_SOURCE_RANK = {"import": 0, "local": 1, "ci": 2, "human": 3}
MARKER = 7


@dataclass(frozen=True)
class MergeResult:
    """What a merge produced: the merged record (``None`` when the versions could not be
    merged as records, or when a side was taken as it was) and the fields that
    conflicted (empty: a clean merge)."""

    record: Record | None
    conflicts: tuple[str, ...] = ()
    reason: str = ""
    """Why the versions could not be merged as records (empty: they could)."""

    @property
    def clean(self) -> bool:
        return not self.conflicts and not self.reason


class _Conflict:
    """Collects what could not be decided."""

    def __init__(self) -> None:
        self.fields: list[str] = []

    def add(self, name: str) -> None:
        if name not in self.fields:
            self.fields.append(name)


def _three(base: T | None, ours: T, theirs: T, *, has_base: bool = True
           ) -> tuple[T, bool]:
    """A plain field: (merged value, conflicted). A conflict returns ours."""
    if ours == theirs:
        return ours, False
    if has_base and ours == base:
        return theirs, False
    if has_base and theirs == base:
        return ours, False
    return ours, True


def _set3(base: Iterable[T], ours: Iterable[T], theirs: Iterable[T]) -> set[T]:
    """Set merge with removals honoured: kept by both (from the base), or added by one."""
    b, o, t = set(base), set(ours), set(theirs)
    return (b & o & t) | (o - b) | (t - b)


def _keyed3(base: Sequence[T], ours: Sequence[T], theirs: Sequence[T],
            key: Callable[[T, int], K], pick: Callable[[T | None, T, T], T]) -> dict[K, T]:
    """A keyed collection merged item by item; an item removed on one side and unchanged
    on the other stays removed; ``pick`` decides an item present on both sides."""

    def index(items: Sequence[T]) -> dict[K, T]:
        seen: dict[Hashable, int] = {}
        out: dict[K, T] = {}
        for item in items:
            k0 = key(item, 0)
            n = seen.get(k0, 0)
            seen[k0] = n + 1
            out[key(item, n)] = item
        return out

    b, o, t = index(base), index(ours), index(theirs)
    out: dict[K, T] = {}
    for k in {*o, *t}:
        if k in o and k in t:
            out[k] = pick(b.get(k), o[k], t[k])
        else:
            side = o if k in o else t
            other = t if k in o else o
            if k in b and k not in other and side[k] == b[k]:
                continue  # removed on the other side, untouched here: stays removed
            out[k] = side[k]
    return out


def _count(base: int, ours: int, theirs: int) -> int:
    return max(0, min(MAX_ORDINAL, ours + theirs - base))


def _later(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _trust(base: Trust | None, ours: Trust, theirs: Trust, *,
           same_change: bool = True) -> Trust:
    """Counts: the base plus both increments (no base: both sides' counts add up).
    Equal sides are one change (``same_change``) — unless they came from different runs
    (two clones that each ingested one run at the same ordinal): then both count."""
    if ours == theirs and same_change:
        return ours
    b = base if base is not None else Trust(confirmations=0, contradictions=0)
    source, clash = _three(b.source, ours.source, theirs.source, has_base=base is not None)
    if clash:
        source = max(ours.source, theirs.source, key=lambda s: (_SOURCE_RANK.get(s, -1), s))
    return Trust(
        source=source,
        confirmations=_count(b.confirmations, ours.confirmations, theirs.confirmations),
        contradictions=_count(b.contradictions, ours.contradictions, theirs.contradictions),
        last_confirmed=_later(ours.last_confirmed, theirs.last_confirmed),
    )


def _status(base: str | None, ours: str, theirs: str) -> str:
    value, clash = _three(base, ours, theirs, has_base=base is not None)
    if clash:
        return max(ours, theirs, key=lambda s: (CAUTION.get(s, 5), s))
    return value


def _until(base: int | None, ours: int | None, theirs: int | None, has_base: bool
           ) -> int | None:
    value, clash = _three(base, ours, theirs, has_base=has_base)
    if clash:
        closed = [u for u in (ours, theirs) if u is not None]
        return min(closed) if closed else None
    return value


def _ev_key(e: Evidence, n: int) -> tuple[str, str, int, int]:
    return (e.run or "", e.test or "", -1 if e.step is None else e.step, n)


def _pick_any(base: T | None, ours: T, theirs: T) -> T:
    """An item both sides hold: the changed side; both changed: a fixed choice (the
    greater repr), so the merge is symmetric."""
    value, clash = _three(base, ours, theirs, has_base=base is not None)
    if clash:
        return max(ours, theirs, key=repr)
    return value


def _evidence(base: Sequence[Evidence], ours: Sequence[Evidence],
              theirs: Sequence[Evidence]) -> tuple[Evidence, ...]:
    merged = _keyed3(base, ours, theirs, _ev_key, _pick_any)
    return tuple(merged[k] for k in sorted(merged))


def _hist_key(h: HistoryEntry, n: int) -> tuple[int, int, int]:
    return (h.valid.from_, h.valid.until or 0, n)


def _history_entry(base: HistoryEntry | None, ours: HistoryEntry, theirs: HistoryEntry,
                   c: _Conflict) -> HistoryEntry:
    if ours == theirs:
        return ours
    title, t_clash = _three(base.title if base else None, ours.title, theirs.title,
                            has_base=base is not None)
    body, b_clash = _three(base.body if base else None, ours.body, theirs.body,
                           has_base=base is not None)
    if t_clash or b_clash:
        c.add("history")
    trust = _optional(base.trust if base else None, ours.trust, theirs.trust, _trust)
    anchors = _optional(base.anchors if base else None, ours.anchors, theirs.anchors,
                        lambda b, o, t: tuple(sorted(_set3(b or (), o, t))))
    status = _optional(base.status if base else None, ours.status, theirs.status, _status)
    return HistoryEntry(valid=ours.valid, title=title, body=body, trust=trust,
                        anchors=anchors, status=status)


def _optional(base: T | None, ours: T | None, theirs: T | None,
              merge: Callable[[T | None, T, T], T]) -> T | None:
    """An optional field of a history entry: a side without it takes the other side's;
    both have it: ``merge``."""
    if ours is None or theirs is None:
        return ours if theirs is None else theirs
    return merge(base, ours, theirs)


def _history(base: Sequence[HistoryEntry], ours: Sequence[HistoryEntry],
             theirs: Sequence[HistoryEntry], c: _Conflict) -> tuple[HistoryEntry, ...]:
    merged = _keyed3(base, ours, theirs, _hist_key,
                     lambda b, o, t: _history_entry(b, o, t, c))
    out = tuple(merged[k] for k in sorted(merged))
    for prev, nxt in zip(out, out[1:], strict=False):
        if nxt.valid.from_ < (prev.valid.until or 0):
            c.add("history")  # two sides closed the same version at different ordinals
    return out


def _relations(base: Relations | None, ours: Relations, theirs: Relations,
               c: _Conflict) -> Relations:
    b = base or Relations()

    def lists(name: str) -> tuple[str, ...]:
        return tuple(sorted(_set3(getattr(b, name), getattr(ours, name),
                                  getattr(theirs, name))))

    by, clash = _three(b.superseded_by, ours.superseded_by, theirs.superseded_by,
                       has_base=base is not None)
    if clash:
        if ours.superseded_by is None or theirs.superseded_by is None:
            by = ours.superseded_by or theirs.superseded_by
        else:
            c.add("relations.superseded_by")
    return Relations(supersedes=lists("supersedes"), superseded_by=by,
                     cites=lists("cites"), contradicts=lists("contradicts"))


def _age_history(entries: tuple[HistoryEntry, ...], start: int, older: Record,
                 base: Record | None) -> tuple[HistoryEntry, ...]:
    """The other side's confirmations of the old version (window starting at ``start``)
    go to that version's history entry."""
    if base is None or older.trust == base.trust:
        return entries
    out = []
    for h in entries:
        if h.valid.from_ == start and h.trust is not None:
            h = replace(h, trust=_trust(base.trust, h.trust, older.trust))
        out.append(h)
    return tuple(out)


def merge_records(base: Record | None, ours: Record, theirs: Record) -> MergeResult:
    """The field-level three-way merge (module docstring); never raises on content."""
    if ours == theirs or (base is not None and theirs == base):
        return MergeResult(ours)
    if base is not None and ours == base:
        return MergeResult(theirs)
    identity = ("id", "kind", "product", "anchor", "scope")
    for name in identity:
        if getattr(ours, name) != getattr(theirs, name):
            return MergeResult(None, (name,), f"the two sides disagree on `{name}`")
    c = _Conflict()
    if base is not None and any(getattr(base, n) != getattr(ours, n) for n in identity):
        base = None  # not the same subject: merge as if new on both sides

    # Which side holds the newer version (superseded in place: valid.from moved on)?
    o_from, t_from = ours.valid.from_, theirs.valid.from_
    if o_from != t_from:
        newer, older = (theirs, ours) if t_from > o_from else (ours, theirs)
        old = (older.title, older.body)
        if base is not None and base.valid.from_ == older.valid.from_:
            # the old version rewritten on the other side cannot be kept: a conflict
            if older.title != base.title:
                c.add("title")
            if older.body != base.body:
                c.add("body")
        elif old != (newer.title, newer.body) and not any(
                (h.title, h.body) == old for h in newer.history):
            c.add("body")  # no common base: two different versions
        title, body, trust = newer.title, newer.body, newer.trust
        valid = newer.valid
        status = newer.status
        if (base is not None and older.status != base.status
                and CAUTION.get(older.status, 0) > CAUTION.get(newer.status, 0)):
            status = older.status  # retired on the other side: the cautious status
    else:
        b = base if base is not None and base.valid.from_ == o_from else None
        has_base = b is not None
        title, t_clash = _three(b.title if b else None, ours.title, theirs.title,
                                has_base=has_base)
        body, b_clash = _three(b.body if b else None, ours.body, theirs.body,
                               has_base=has_base)
        if t_clash:
            c.add("title")
        if b_clash:
            c.add("body")
        trust = _trust(b.trust if b else None, ours.trust, theirs.trust,
                       same_change=_same_runs(base, ours, theirs))
        status = _status(b.status if b else None, ours.status, theirs.status)
        valid = Valid(o_from, _until(b.valid.until if b else None, ours.valid.until,
                                     theirs.valid.until, has_base))
    anchors = tuple(sorted(_set3(base.anchors if base else (), ours.anchors,
                                 theirs.anchors) - {ours.anchor}))
    relations = _relations(base.relations if base else None, ours.relations,
                           theirs.relations, c)
    if o_from != t_from:
        # the newer version's evidence only: what the other side saw of the old claim
        # counts in the old version's history entry, never as evidence of the new one
        evidence = tuple(newer.evidence)
    else:
        evidence = _evidence(base.evidence if base else (), ours.evidence, theirs.evidence)
    history = _history(base.history if base else (), ours.history, theirs.history, c)
    if o_from != t_from:
        history = _age_history(history, older.valid.from_, older, base)
    merged = replace(ours, status=status, anchors=anchors, title=title, body=body,
                     trust=trust, valid=valid, relations=relations,
                     evidence=evidence, history=history,
                     written_by=_written_by(ours, theirs, title, body),
                     evidence_total=_evidence_total(base, ours, theirs, len(evidence)))
    if c.fields:
        merged = replace(merged, title=ours.title,
                         body=_marked_body(ours, theirs, c.fields))
    return MergeResult(merged, tuple(c.fields))


def _written_by(ours: Record, theirs: Record, title: str, body: str) -> str | None:
    """Who worded the merged record: the side whose title and body it keeps (ours when
    both, or neither, do)."""
    if (ours.title, ours.body) != (title, body) and (theirs.title, theirs.body) == (
            title, body):
        return theirs.written_by
    return ours.written_by


def _evidence_total(base: Record | None, ours: Record, theirs: Record,
                    kept: int) -> int | None:
    """How many evidence items the merged record has seen: the base's count plus both
    sides' increments, never fewer than the items kept; None when that is all of them."""
    def total(r: Record) -> int:
        return r.evidence_total if r.evidence_total is not None else len(r.evidence)

    start = total(base) if base is not None else 0
    seen = min(MAX_ORDINAL, max(0, total(ours) + total(theirs) - start))
    return seen if seen > kept else None


def _same_runs(base: Record | None, ours: Record, theirs: Record) -> bool:
    """Whether both sides' new evidence (what the base did not have) names the same
    runs: the same learning on both sides, to be counted once."""
    had = {(e.run, e.test, e.step) for e in (base.evidence if base else ())}
    mine = {e.run for e in ours.evidence if (e.run, e.test, e.step) not in had}
    other = {e.run for e in theirs.evidence if (e.run, e.test, e.step) not in had}
    return mine == other


def _marked_body(ours: Record, theirs: Record, fields: Sequence[str]) -> str:
    """Git's conflict markers around both sides' title and body."""

    def side(r: Record) -> str:
        lines = [f"title: {r.title}"] if "title" in fields or r.title != ours.title else []
        if r.body:
            lines.append(r.body)
        if "relations.superseded_by" in fields:
            lines.append(f"superseded_by: {r.relations.superseded_by}")
        if "history" in fields:
            lines += [f"history: {h.valid.from_}..{h.valid.until} {h.title}"
                      for h in r.history]
        return "\n".join(lines)

    return (f"{'<' * MARKER} ours\n{side(ours)}\n{'=' * MARKER}\n{side(theirs)}\n"
            f"{'>' * MARKER} theirs")


def marked_text(ours: str, theirs: str) -> str:
    """Both whole texts between git's conflict markers (the fallback when git's own
    textual merge is not at hand)."""

    def nl(s: str) -> str:
        return s if s.endswith("\n") or not s else s + "\n"

    return (f"{'<' * MARKER} ours\n{nl(ours)}{'=' * MARKER}\n{nl(theirs)}"
            f"{'>' * MARKER} theirs\n")


def merge_texts(base: bytes | None, ours: bytes, theirs: bytes, path: str = "record"
                ) -> tuple[str | None, MergeResult]:
    """Merge three file versions: (canonical merged text, result). The text is ``None``
    when a side does not parse (or the merged record would not validate): the caller
    leaves a textual conflict. Identical inputs come back byte for byte."""
    from memidex.records.codec import dump_record, parse_record, parse_record_bytes

    if ours == theirs or (base is not None and theirs == base):
        return ours.decode("utf-8", "surrogateescape"), MergeResult(None)
    if base is not None and ours == base:
        return theirs.decode("utf-8", "surrogateescape"), MergeResult(None)
    try:
        o = parse_record_bytes(ours, path)
        t = parse_record_bytes(theirs, path)
    except RecordError as exc:
        return None, MergeResult(None, ("file",), exc.message)
    b: Record | None = None
    if base is not None:
        try:
            b = parse_record_bytes(base, path)
        except RecordError:
            b = None  # an unreadable base: merge the two sides as a union
    result = merge_records(b, o, t)
    if result.record is None:
        return None, result
    text = dump_record(result.record)
    if result.clean:
        try:
            parse_record(text, path)
        except RecordError as exc:
            return None, MergeResult(None, ("file",), exc.message)
    return text, result
