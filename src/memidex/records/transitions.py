"""Curation's pure state changes: :class:`Record` → :class:`Record`, no I/O (SPEC §2,
``docs/curation.md``).

:func:`confirm`, :func:`supersede_in_place`, :func:`supersede_by`, :func:`deprecate`,
:func:`quarantine`, :func:`release`. A transition that makes no sense (confirming a
quarantined record, say) is a :class:`UsageError`. The facade (:class:`memidex.app.Memidex`)
reads the record, calls one of these and hands the result to the writer.
"""

from __future__ import annotations

from dataclasses import replace

from memidex.errors import UsageError
from memidex.records.model import HistoryEntry, Record, Trust, Valid

__all__ = ["confirm", "deprecate", "previous_status", "quarantine", "release",
           "supersede_by", "supersede_in_place"]


def _ordinal(value: int | None, name: str) -> int | None:
    if value is not None and value < 0:
        raise UsageError(f"{name} must be a run ordinal (a whole number >= 0)")
    return value


def _last_known(r: Record) -> int:
    """The last run ordinal this version is known to have held at."""
    return max(r.valid.from_, r.trust.last_confirmed or 0)


def confirm(r: Record, run_ordinal: int | None = None) -> Record:
    """One more confirmation: ``confirmations + 1``, ``last_confirmed`` = the ordinal
    (default: the later of ``valid.from`` and the current ``last_confirmed``), and a
    candidate becomes active."""
    if r.status not in ("active", "candidate"):
        raise UsageError(f"{r.id} is {r.status}: only active or candidate records can be "
                         "confirmed", hint="release a quarantined record first")
    n = _ordinal(run_ordinal, "--run-ordinal")
    if n is None:
        n = _last_known(r)
    elif n < r.valid.from_:
        raise UsageError(f"run ordinal {n} is before this version's window (from "
                         f"{r.valid.from_})")
    trust = replace(r.trust, confirmations=r.trust.confirmations + 1, last_confirmed=n)
    return replace(r, status="active", trust=trust)


def supersede_in_place(r: Record, *, title: str, body: str = "",
                       ordinal: int | None = None) -> Record:
    """A new version of the same belief from run ordinal ``ordinal`` (SPEC §2).

    The current version moves into ``history`` — its window closed at ``ordinal``
    (default: one past the last ordinal it is known to have held at), with its title,
    body, trust, anchors and status, all a replay inside that window needs; the new version is
    served from ``ordinal``, written by a person (``trust.source: human``, one
    confirmation at ``ordinal``), status active.
    """
    if r.status not in ("active", "candidate"):
        raise UsageError(f"{r.id} is {r.status}: only an active or candidate record gets a "
                         "new version")
    if not title:
        raise UsageError("--title must not be empty")
    n = _ordinal(ordinal, "--ordinal")
    if n is None:
        n = _last_known(r) + 1
    if n <= r.valid.from_:
        raise UsageError(f"ordinal {n} must be after the current version's start "
                         f"({r.valid.from_})")
    until = n if r.valid.until is None else min(n, r.valid.until)
    old = HistoryEntry(valid=Valid(r.valid.from_, until), title=r.title, body=r.body,
                       trust=r.trust, anchors=r.anchors, status=r.status)
    return replace(r, status="active", title=title, body=body, valid=Valid(n, None),
                   trust=Trust(source="human", confirmations=1, contradictions=0,
                               last_confirmed=n),
                   history=(*r.history, old))


def supersede_by(r: Record, other: Record, ordinal: int | None = None) -> tuple[Record, Record]:
    """``r`` is replaced by ``other`` (a record about another subject): ``r`` becomes
    superseded with ``valid.until`` and ``relations.superseded_by``; ``other`` lists ``r``
    in ``relations.supersedes``. ``ordinal`` defaults to ``r``'s ``valid.until`` when its
    window is already closed, else ``other``'s ``valid.from`` when that is after ``r``'s
    start, else one past the last ordinal ``r`` held at."""
    if other.id == r.id:
        raise UsageError("a record cannot supersede itself",
                         hint="for a new version of the same record use --title")
    if r.status not in ("active", "candidate", "deprecated"):
        raise UsageError(f"{r.id} is {r.status} and cannot be superseded")
    if other.status not in ("active", "candidate"):
        raise UsageError(f"{other.id} is {other.status}: the replacement must be active or "
                         "candidate")
    if r.relations.superseded_by not in (None, other.id):
        raise UsageError(f"{r.id} is already superseded by {r.relations.superseded_by}")
    n = _ordinal(ordinal, "--ordinal")
    if n is None and r.valid.until is not None:
        n = r.valid.until  # a deprecated record keeps its closed window
    if n is None:
        n = other.valid.from_ if other.valid.from_ > r.valid.from_ else _last_known(r) + 1
    if n <= r.valid.from_:
        raise UsageError(f"ordinal {n} must be after {r.id}'s start ({r.valid.from_})")
    until = n if r.valid.until is None else min(n, r.valid.until)
    old = replace(r, status="superseded", valid=Valid(r.valid.from_, until),
                  relations=replace(r.relations, superseded_by=other.id))
    sup = tuple(sorted({*other.relations.supersedes, r.id}))
    new = replace(other, relations=replace(other.relations, supersedes=sup))
    return old, new


def deprecate(r: Record, ordinal: int | None = None) -> Record:
    """Status deprecated (no longer served); ``valid.until`` = ``ordinal`` when given."""
    if r.status not in ("active", "candidate", "deprecated"):
        raise UsageError(f"{r.id} is {r.status} and cannot be deprecated")
    n = _ordinal(ordinal, "--ordinal")
    valid = r.valid
    if n is not None:
        if n <= r.valid.from_:
            raise UsageError(f"ordinal {n} must be after the record's start ({r.valid.from_})")
        valid = Valid(r.valid.from_, n)
    return replace(r, status="deprecated", valid=valid)


def quarantine(r: Record) -> Record:
    """Status quarantined: never served, kept for a person to look at."""
    return replace(r, status="quarantined")


def previous_status(r: Record) -> str:
    """What a released record goes back to, read from its front matter: ``superseded``
    when it names a replacement, ``deprecated`` when its window is closed, else active."""
    if r.relations.superseded_by:
        return "superseded"
    if r.valid.until is not None:
        return "deprecated"
    return "active"


def release(r: Record) -> Record:
    """quarantined → its previous status (:func:`previous_status`)."""
    if r.status != "quarantined":
        raise UsageError(f"{r.id} is {r.status}, not quarantined")
    return replace(r, status=previous_status(r))
