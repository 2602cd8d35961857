"""A record checked as it is: whether its canonical text reads back as the record itself
(:func:`loads_back`), and its id from its subject, computed once per process
(:func:`cached_record_id`).

:func:`memidex.learning.checks.encoded` asks :func:`loads_back` first: a record the
curator built from validated ones is valid and already in the validator's normal form, so
it is its own answer, without the front-matter mapping :func:`memidex.records.validate
.record_from_mapping` would build and walk again. The checks are that function's, made on
the typed fields (``tests/test_ingest_plan_encoded.py`` holds the two to each other).
"""

from __future__ import annotations

from typing import Any

from memidex.records.ids import ANCHOR_RE, ID_RE, PRODUCT_RE, record_id
from memidex.records.model import (
    KINDS,
    MAX_ORDINAL,
    SOURCES,
    STATUSES,
    WRITERS,
    Evidence,
    HistoryEntry,
    Pairs,
    Record,
    Relations,
    Trust,
    Valid,
)
from memidex.records.validate import _EVIDENCE_KNOWN, _SERVED

__all__ = ["cached_record_id", "loads_back"]

_IDS: dict[tuple[str, str, str, tuple[tuple[str, str], ...]], str] = {}
_IDS_MAX = 8192


def cached_record_id(kind: str, anchor: str, product: str, scope: Pairs) -> str:
    """``record_id(kind, anchor, product, dict(scope))``, remembered for a subject of
    strings only (an ingest asks it of each subject four or five times: the candidate,
    the decision, the fold, the record read and the record written). Bounded."""
    if (type(kind) is str and type(anchor) is str and type(product) is str
            and type(scope) is tuple and all(
                type(p) is tuple and len(p) == 2 and type(p[0]) is str and type(p[1]) is str
                for p in scope)):
        key = (kind, anchor, product, scope)
        rid = _IDS.get(key)  # type: ignore[arg-type]
        if rid is None:
            if len(_IDS) >= _IDS_MAX:
                _IDS.clear()
            rid = _IDS[key] = record_id(kind, anchor, product, dict(scope))  # type: ignore[index]
        return rid
    return record_id(kind, anchor, product, dict(scope))


_KIND_SET = frozenset(KINDS)
_STATUS_SET = frozenset(STATUSES)
_SOURCE_SET = frozenset(SOURCES)
_WRITER_SET = frozenset(WRITERS)


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v <= MAX_ORDINAL


def _text_or_none(v: Any) -> bool:
    return v is None or type(v) is str


def _scalar(v: Any) -> bool:
    return v is None or type(v) is str or type(v) is bool or type(v) is int


def _ascending(items: Any) -> bool:
    """A tuple of strings, sorted, without repeats (as the validator returns a set)."""
    if type(items) is not tuple:
        return False
    prev = None
    for x in items:
        if type(x) is not str or (prev is not None and x <= prev):
            return False
        prev = x
    return True


def _anchor_list_ok(items: Any, anchor: str) -> bool:
    return _ascending(items) and anchor not in items and all(
        ANCHOR_RE.fullmatch(a) is not None and "\n" not in a for a in items)


def _trust_ok(t: Any) -> bool:
    return (type(t) is Trust and type(t.source) is str and t.source in _SOURCE_SET
            and _count(t.confirmations) and _count(t.contradictions)
            and (t.last_confirmed is None or _count(t.last_confirmed)))


def _ids_ok(items: Any) -> bool:
    return _ascending(items) and all(ID_RE.fullmatch(x) is not None for x in items)


def _evidence_ok(e: Any) -> bool:
    if type(e) is not Evidence or not (
            _text_or_none(e.run) and _text_or_none(e.test) and _text_or_none(e.observed)
            and _text_or_none(e.check) and _text_or_none(e.artifact)
            and (e.step is None or _count(e.step)) and type(e.extra) is tuple):
        return False
    prev = None
    for pair in e.extra:
        if type(pair) is not tuple or len(pair) != 2:
            return False
        k, v = pair
        if type(k) is not str or not k or k in _EVIDENCE_KNOWN or not _scalar(v) or (
                prev is not None and k <= prev):
            return False
        prev = k
    return True


def _history_ok(history: Any, anchor: str, start: int) -> bool:
    if type(history) is not tuple:
        return False
    prev_until = None
    for h in history:
        if type(h) is not HistoryEntry or type(h.valid) is not Valid:
            return False
        v: Any = h.valid
        if not (_count(v.from_) and _count(v.until) and v.until > v.from_):
            return False
        if prev_until is not None and v.from_ < prev_until:
            return False
        if type(h.title) is not str or not h.title or type(h.body) is not str:
            return False
        if h.trust is not None and not _trust_ok(h.trust):
            return False
        if h.anchors is not None and not _anchor_list_ok(h.anchors, anchor):
            return False
        if h.status is not None and (type(h.status) is not str
                                     or h.status not in _STATUS_SET):
            return False
        prev_until = v.until
    return prev_until is None or prev_until <= start


def loads_back(r: Record) -> bool:
    """True when ``r`` is valid and already in the form the validator returns, so its
    canonical text (``dump_record``) reads back as ``r`` itself: every check
    :func:`record_from_mapping` makes of the front matter ``dump_record`` writes, made on
    the fields as they are (each of its exact type: ``True`` is no count, a list no
    tuple), and every normalisation it makes already made (sorted anchors and ids, scope
    keys, extra evidence keys; the body trimmed). False: ask :func:`record_from_mapping`,
    which finds the problem or the normal form. A property test holds the two to each
    other (``tests/test_ingest_plan_encoded.py``)."""
    if type(r) is not Record:
        return False
    rid, kind, status, product, anchor, title = (r.id, r.kind, r.status, r.product,
                                                 r.anchor, r.title)
    if not (type(rid) is str and ID_RE.fullmatch(rid) is not None
            and type(kind) is str and kind in _KIND_SET
            and type(status) is str and status in _STATUS_SET
            and type(product) is str and PRODUCT_RE.fullmatch(product) is not None
            and type(anchor) is str and ANCHOR_RE.fullmatch(anchor) is not None
            and "\n" not in anchor
            and type(title) is str and title and "\n" not in title):
        return False
    if not _anchor_list_ok(r.anchors, anchor):
        return False
    scope = r.scope
    if type(scope) is not tuple:
        return False
    prev = None
    for pair in scope:
        if type(pair) is not tuple or len(pair) != 2:
            return False
        k, v = pair
        if type(k) is not str or not k or not _scalar(v) or (prev is not None and k <= prev):
            return False
        prev = k
    if not _trust_ok(r.trust):
        return False
    valid = r.valid
    if type(valid) is not Valid or not _count(valid.from_) or not (
            valid.until is None or (_count(valid.until) and valid.until > valid.from_)):
        return False
    rel = r.relations
    if type(rel) is not Relations or not (
            _ids_ok(rel.supersedes) and _ids_ok(rel.cites) and _ids_ok(rel.contradicts)
            and (rel.superseded_by is None or (type(rel.superseded_by) is str and
                                               ID_RE.fullmatch(rel.superseded_by)))):
        return False
    evidence = r.evidence
    if type(evidence) is not tuple or not all(_evidence_ok(e) for e in evidence):
        return False
    if not _history_ok(r.history, anchor, valid.from_):
        return False
    if r.written_by is not None and (type(r.written_by) is not str
                                     or r.written_by not in _WRITER_SET):
        return False
    total = r.evidence_total
    if total is not None and not (_count(total) and total >= len(evidence)):
        return False
    previous, by = r.previous_status, rel.superseded_by
    if previous is not None and (status != "quarantined" or type(previous) is not str
                                 or previous not in _STATUS_SET or previous == "quarantined"):
        return False
    if by is not None and (status in _SERVED or (
            status == "quarantined" and previous in (*_SERVED, "deprecated"))):
        return False
    body = r.body
    if type(body) is not str or "\x00" in body or body != body.strip("\n").rstrip():
        return False
    return rid == cached_record_id(kind, anchor, product, scope)
