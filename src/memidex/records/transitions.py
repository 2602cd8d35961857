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
from memidex.records.model import MAX_ORDINAL, HistoryEntry, Record, Trust, Valid

__all__ = ["COMMANDS", "TRANSITIONS", "check_transition", "confirm", "deprecate",
           "previous_status", "quarantine", "release", "supersede_by", "supersede_in_place",
           "update"]

TRANSITIONS: dict[str, dict[str, str | None]] = {
    # command: {status before: status after}; None: the status before the quarantine.
    "add": {"candidate": "active", "active": "active"},
    "confirm": {"candidate": "active", "active": "active"},
    "supersede": {"candidate": "active", "active": "active"},
    "supersede-by": {"candidate": "superseded", "active": "superseded",
                     "deprecated": "superseded"},
    "deprecate": {"candidate": "deprecated", "active": "deprecated",
                  "deprecated": "deprecated"},
    "quarantine": {"candidate": "quarantined", "active": "quarantined",
                   "superseded": "quarantined", "deprecated": "quarantined",
                   "quarantined": "quarantined"},
    "release": {"quarantined": None},
}
"""The one table of status changes (``docs/curation.md``): what each command may start
from and what it leaves. Every transition below checks it first; a status not listed
for a command is a :class:`UsageError` (exit 2) and nothing is written. ``add`` is the
update of an existing record (a new record starts ``active``)."""

COMMANDS: tuple[str, ...] = tuple(TRANSITIONS)

_HINTS = {
    "quarantined": "release it first (`memidex knowledge release ID`)",
    "superseded": "it was replaced by another record; curate that one",
    "deprecated": "it is no longer served; add a record about another subject, or "
                  "purge this one first",
}


def check_transition(r: Record, command: str) -> str:
    """The status ``command`` leaves ``r`` in, or :class:`UsageError` when the table has no
    such transition."""
    allowed = TRANSITIONS[command]
    if r.status not in allowed:
        starts = ", ".join(allowed)
        raise UsageError(f"{r.id} is {r.status}: `{command}` applies only to {starts} "
                         "records", hint=_HINTS.get(r.status))
    after = allowed[r.status]
    return previous_status(r) if after is None else after


def _ordinal(value: int | None, name: str) -> int | None:
    if value is not None and not 0 <= value <= MAX_ORDINAL:
        raise UsageError(f"{name} must be a run ordinal (a whole number from 0 to "
                         f"{MAX_ORDINAL})")
    return value


def _last_known(r: Record) -> int:
    """The last run ordinal this version is known to have held at."""
    return max(r.valid.from_, r.trust.last_confirmed or 0)


def confirm(r: Record, run_ordinal: int | None = None) -> Record:
    """One more confirmation: ``confirmations + 1``, ``last_confirmed`` = the ordinal
    (default: the later of ``valid.from`` and the current ``last_confirmed``), and a
    candidate becomes active."""
    status = check_transition(r, "confirm")
    n = _ordinal(run_ordinal, "--run-ordinal")
    if n is None:
        n = _last_known(r)
    elif n < r.valid.from_:
        raise UsageError(f"run ordinal {n} is before this version's window (from "
                         f"{r.valid.from_})")
    if r.trust.confirmations >= MAX_ORDINAL:
        raise UsageError(f"{r.id} has as many confirmations as a record can hold")
    trust = replace(r.trust, confirmations=r.trust.confirmations + 1, last_confirmed=n)
    return replace(r, status=status, trust=trust)


def supersede_in_place(r: Record, *, title: str, body: str = "",
                       ordinal: int | None = None) -> Record:
    """A new version of the same belief from run ordinal ``ordinal`` (SPEC §2).

    The current version moves into ``history`` — its window closed at ``ordinal``
    (default: one past the last ordinal it is known to have held at), with its title,
    body, trust, anchors and status, all a replay inside that window needs; the new version is
    served from ``ordinal``, written by a person (``trust.source: human``, one
    confirmation at ``ordinal``), status active.
    """
    status = check_transition(r, "supersede")
    if not title:
        raise UsageError("--title must not be empty")
    n = _ordinal(ordinal, "--ordinal")
    if n is None:
        n = min(_last_known(r) + 1, MAX_ORDINAL)
    if n <= r.valid.from_:
        raise UsageError(f"ordinal {n} must be after the current version's start "
                         f"({r.valid.from_})")
    until = n if r.valid.until is None else min(n, r.valid.until)
    old = HistoryEntry(valid=Valid(r.valid.from_, until), title=r.title, body=r.body,
                       trust=r.trust, anchors=r.anchors, status=r.status)
    return replace(r, status=status, title=title, body=body, valid=Valid(n, None),
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
    if r.relations.superseded_by not in (None, other.id):
        raise UsageError(f"{r.id} is already superseded by {r.relations.superseded_by}")
    status = check_transition(r, "supersede-by")
    if other.product != r.product:
        raise UsageError(f"{r.id} is about product {r.product} and {other.id} about "
                         f"{other.product}: a record is replaced only by one of its own "
                         "product")
    if other.status not in ("active", "candidate"):
        raise UsageError(f"{other.id} is {other.status}: the replacement must be active or "
                         "candidate")
    n = _ordinal(ordinal, "--ordinal")
    if n is None and r.valid.until is not None:
        n = r.valid.until  # a deprecated record keeps its closed window
    if n is None:
        n = other.valid.from_ if other.valid.from_ > r.valid.from_ else min(
            _last_known(r) + 1, MAX_ORDINAL)
    if n <= r.valid.from_:
        raise UsageError(f"ordinal {n} must be after {r.id}'s start ({r.valid.from_})")
    until = n if r.valid.until is None else min(n, r.valid.until)
    old = replace(r, status=status, valid=Valid(r.valid.from_, until),
                  relations=replace(r.relations, superseded_by=other.id))
    sup = tuple(sorted({*other.relations.supersedes, r.id}))
    new = replace(other, relations=replace(other.relations, supersedes=sup))
    return old, new


def deprecate(r: Record, ordinal: int | None = None) -> Record:
    """Status deprecated (no longer served); ``valid.until`` = ``ordinal`` when given."""
    status = check_transition(r, "deprecate")
    n = _ordinal(ordinal, "--ordinal")
    valid = r.valid
    if n is not None:
        if n <= r.valid.from_:
            raise UsageError(f"ordinal {n} must be after the record's start ({r.valid.from_})")
        valid = Valid(r.valid.from_, n)
    return replace(r, status=status, valid=valid)


def quarantine(r: Record) -> Record:
    """Status quarantined: never served, kept for a person to look at. The status it had
    is kept in ``previous_status``, so :func:`release` restores exactly that."""
    status = check_transition(r, "quarantine")
    if r.status == status:
        return r
    return replace(r, status=status, previous_status=r.status)


def previous_status(r: Record) -> str:
    """What a released record goes back to: its ``previous_status`` when the file keeps
    one; else (a record quarantined before memidex kept it) read from the front matter:
    ``superseded`` when it names a replacement, ``deprecated`` when its window is closed,
    else active."""
    if r.previous_status is not None:
        return r.previous_status
    if r.relations.superseded_by:
        return "superseded"
    if r.valid.until is not None:
        return "deprecated"
    return "active"


def release(r: Record) -> Record:
    """quarantined → its previous status (:func:`previous_status`)."""
    if r.status != "quarantined":
        raise UsageError(f"{r.id} is {r.status}, not quarantined")
    return replace(r, status=check_transition(r, "release"), previous_status=None)


def update(old: Record, *, title: str, body: str, anchors: tuple[str, ...]) -> Record:
    """``knowledge add`` on an existing record: new title (and body, when given), anchors
    merged, ``trust.source: human``; trust counts, evidence, window and history kept. Only
    from the statuses the table allows (a quarantined, superseded or deprecated record is
    refused: ``add`` never overrides curation)."""
    status = check_transition(old, "add")
    merged = tuple(sorted((set(old.anchors) | set(anchors)) - {old.anchor}))
    return replace(old, title=title, body=body or old.body, anchors=merged, status=status,
                   trust=replace(old.trust, source="human"))
