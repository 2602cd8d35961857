"""Human curation of records (SPEC §2, §7; ``docs/curation.md``).

Two halves:

* pure operations, :class:`Record` → :class:`Record` (no I/O): :func:`confirm`,
  :func:`supersede_in_place`, :func:`supersede_by`, :func:`deprecate`,
  :func:`quarantine`, :func:`release`. A transition that makes no sense (confirming a
  quarantined record, say) is a :class:`UsageError`.
* the orchestration over the writer: :func:`apply_changes` writes a change set under the
  writer lease, or — while ``memidex daemon`` holds the lease — hands it to the daemon
  through ``queue/corrections/`` (:mod:`memidex.queue`) and waits for its marker;
  :func:`purge_traces` removes what the queue and the journal still say about a purged
  record. Every record write goes through :func:`memidex.writer.writer_session`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.errors import (
    InvalidInputError,
    LeaseError,
    LeaseHeldError,
    UsageError,
)
from memidex.records.model import HistoryEntry, Record, Trust, Valid

if TYPE_CHECKING:
    from memidex.app import Memidex
    from memidex.store import Store
    from memidex.writer import Change, WriterSession

__all__ = [
    "CurationResult",
    "apply_changes",
    "confirm",
    "deprecate",
    "previous_status",
    "purge_traces",
    "quarantine",
    "refuse_under_daemon",
    "release",
    "supersede_by",
    "supersede_in_place",
]

_SLICE = 0.5  # seconds per attempt at the lease, so a daemon that starts meanwhile is seen


@dataclass(frozen=True)
class CurationResult:
    """What a curation command did: ``--json`` prints :meth:`as_dict`."""

    id: str
    path: str
    status: str
    change: str  # confirmed | superseded | deprecated | quarantined | released | purged | unchanged
    extra: tuple[tuple[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "status": self.status,
                "change": self.change, **dict(self.extra)}


# --- pure operations -------------------------------------------------------------------


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

    The current version moves into ``history`` with its window closed at ``ordinal``
    (default: one past the last ordinal it is known to have held at); the new version is
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
    old = HistoryEntry(valid=Valid(r.valid.from_, until), title=r.title, body=r.body)
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


# --- the orchestration ------------------------------------------------------------------


def _gave_up(store: Store, exc: LeaseHeldError, wait: float) -> LeaseHeldError:
    from memidex.lease import lease_status

    status = lease_status(store.knowledge)
    message = exc.message
    age = status.get("heartbeat_age_seconds")
    if status["held"] and status["pid"] is not None and isinstance(age, int | float):
        message = (f"writer lease is held by pid {status['pid']} (epoch {status['epoch']}, "
                   f"heartbeat {age:.1f}s ago)")
        if wait > 0:
            message += f"; gave up after waiting {wait:g}s"
    return LeaseHeldError(message, hint=exc.hint)


def refuse_under_daemon(store: Store, command: str) -> None:
    """Raise :class:`LeaseHeldError` at once while a live daemon holds the lease."""
    from memidex.queue import live_daemon

    daemon = live_daemon(store)
    if daemon is not None:
        raise LeaseHeldError(daemon.describe(),
                             hint=f"`memidex {command}` does not go through the daemon: "
                             f"stop it (SIGTERM pid {daemon.pid}) first")


def apply_changes(store: Store, changes: Sequence[Change], *, command: str, wait: float,
                  ttl: float, refuse_daemon: bool = False,
                  after: Callable[[WriterSession], None] | None = None) -> list[bool]:
    """Apply ``changes`` as one change set; per change, whether it wrote.

    Without a daemon: under the writer lease, waiting up to ``wait`` seconds (with
    backoff) for another writer. While a live daemon holds the lease: queue the change set
    for it and wait up to ``wait`` seconds for its marker (``refuse_daemon``: refuse at
    once instead, exit 3). If the daemon goes away meanwhile, apply the queued item here.
    ``after`` runs inside the session once the changes landed (never through a daemon).
    """
    from memidex.queue import Queue, apply_item, encode_change, live_daemon
    from memidex.writer import writer_session

    queue = Queue(store.queue_dir)
    wait = max(0.0, wait)
    deadline = time.monotonic() + wait
    item_id: str | None = None
    while True:
        daemon = live_daemon(store)
        if daemon is not None:
            if refuse_daemon:
                refuse_under_daemon(store, command)
            if item_id is None:
                item_id = queue.submit(command, [encode_change(store, c) for c in changes])
            outcome = queue.wait_for(item_id, deadline,
                                     lambda: live_daemon(store) is not None)
            if outcome is not None:
                outcome.raise_for_failure()
                return list(outcome.changed)
            if time.monotonic() >= deadline:
                rel = store.rel(queue.item_path(item_id))
                raise LeaseHeldError(
                    f"the daemon (pid {daemon.pid}) did not apply the queued {command} "
                    f"within {wait:g}s; it stays queued in {rel}",
                    hint="the daemon applies it when it can; `memidex doctor` shows the lease")
            continue  # the daemon went away: apply the queued item ourselves
        remaining = max(0.0, deadline - time.monotonic())
        try:
            with writer_session(store, wait=min(remaining, _SLICE), ttl=ttl) as session:
                if item_id is None:
                    done = session.apply(changes, command=command)
                    if after is not None:
                        after(session)
                    return done
                apply_item(session, queue, item_id)
        except LeaseHeldError as exc:
            if time.monotonic() >= deadline:
                raise _gave_up(store, exc, wait) from None
            continue
        outcome = queue.take_outcome(item_id)
        if outcome is None:
            raise LeaseError(f"queued correction {item_id} disappeared without an outcome",
                             hint="run the command again")
        outcome.raise_for_failure()
        return list(outcome.changed)


def purge_traces(store: Store, record_id: str) -> list[str]:
    """Remove every file under ``queue/`` that mentions ``record_id``: queued corrections
    and their markers, abandoned and finished journal entries, saved model steps,
    proposals. Change sets still owned by a live (paused) writer are left to it.
    Call it while holding the lease. Returns the removed paths (root-relative)."""
    from memidex.journal import Journal

    needle = record_id.encode("utf-8")
    journal = Journal(store.queue_dir)
    live_plans: set[str] = set()
    for cs in journal.pending():
        if cs.owner.pid != os.getpid() and cs.owner.alive():
            live_plans.update({f"{cs.id}.json", f"{cs.id}.done"})
    removed: list[str] = []
    for folder, _dirs, files in os.walk(store.queue_dir):
        here = Path(folder)
        for name in sorted(files):
            path = here / name
            if (here == journal.dir and name in live_plans) or (
                    here == store.queue_dir and name == "daemon.json"):
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if needle in data:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(store.rel(path))
    return sorted(removed)


# --- what the Memidex facade calls --------------------------------------------------------


def _load(m: Memidex, id_or_prefix: str) -> tuple[Record, str, str]:
    """The record an id (or unique prefix) names, its path and content hash."""
    from memidex.records.codec import content_hash, parse_record_bytes

    shown = m.show(id_or_prefix)
    r = shown.record
    canonical = m.store.rel(m.store.record_path(r.kind, r.id))
    if canonical != shown.path and canonical not in shown.duplicates:
        raise InvalidInputError(f"{r.id} is at {shown.path}, not at {canonical} where memidex "
                                "writes it", hint="move the file there first")
    # The record and the hash the writer checks come from the same bytes.
    data = m.store.read_bytes(canonical)
    return parse_record_bytes(data, canonical), canonical, content_hash(data)


def _run(m: Memidex, changes: Sequence[Change], command: str, *,
         refuse_daemon: bool = False,
         after: Callable[[WriterSession], None] | None = None) -> list[bool]:
    return apply_changes(m.store, changes, command=command, wait=m.wait,
                         ttl=m.config.lease_ttl_seconds, refuse_daemon=refuse_daemon,
                         after=after)


def _one(m: Memidex, id_or_prefix: str, op: Callable[[Record], Record], command: str,
         change: str) -> CurationResult:
    from memidex.writer import Write

    r, path, sha = _load(m, id_or_prefix)
    new = op(r)
    done = _run(m, [Write(new, sha)], f"knowledge {command}")
    return CurationResult(new.id, path, new.status, change if any(done) else "unchanged")


def run_confirm(m: Memidex, id_or_prefix: str, run_ordinal: int | None) -> CurationResult:
    return _one(m, id_or_prefix, lambda r: confirm(r, run_ordinal), "confirm", "confirmed")


def run_deprecate(m: Memidex, id_or_prefix: str, ordinal: int | None) -> CurationResult:
    return _one(m, id_or_prefix, lambda r: deprecate(r, ordinal), "deprecate", "deprecated")


def run_quarantine(m: Memidex, id_or_prefix: str) -> CurationResult:
    return _one(m, id_or_prefix, quarantine, "quarantine", "quarantined")


def run_release(m: Memidex, id_or_prefix: str) -> CurationResult:
    return _one(m, id_or_prefix, release, "release", "released")


def run_supersede(m: Memidex, id_or_prefix: str, *, title: str | None, body: str | None,
                  ordinal: int | None, by: str | None) -> CurationResult:
    from memidex.masking import Masker
    from memidex.writer import Write

    if (title is None) == (by is None):
        raise UsageError("give --title (a new version of this record) or --by OTHER_ID "
                         "(replaced by another record), not both")
    r, path, sha = _load(m, id_or_prefix)
    if by is not None:
        if body is not None:
            raise UsageError("--body goes with --title, not with --by")
        other, other_path, other_sha = _load(m, by)
        old, new = supersede_by(r, other, ordinal)
        done = _run(m, [Write(old, sha), Write(new, other_sha)], "knowledge supersede")
        return CurationResult(old.id, path, old.status,
                              "superseded" if any(done) else "unchanged",
                              (("superseded_by", new.id), ("superseded_by_path", other_path)))
    assert title is not None
    masker = Masker.load(m.config.root / m.config.secrets_file)
    clean_title = masker.mask(" ".join(title.split()))
    clean_body = masker.mask(body or "").strip("\n").rstrip()
    new = supersede_in_place(r, title=clean_title, body=clean_body, ordinal=ordinal)
    done = _run(m, [Write(new, sha)], "knowledge supersede")
    return CurationResult(new.id, path, new.status,
                          "superseded" if any(done) else "unchanged",
                          (("valid_from", new.valid.from_),))


def run_purge(m: Memidex, id_or_prefix: str) -> CurationResult:
    """Delete the record file through the fenced writer and every trace of it: its queue
    items and journal entries (inside the same lease). The caller refreshes the index,
    which drops its rows. Refuses at once while a daemon holds the lease."""
    from memidex.writer import Remove

    refuse_under_daemon(m.store, "knowledge purge")  # before reading anything
    r, path, sha = _load(m, id_or_prefix)
    traces: list[str] = []

    def clean(_session: WriterSession) -> None:
        traces.extend(purge_traces(m.store, r.id))

    done = _run(m, [Remove(path, sha)], "knowledge purge", refuse_daemon=True, after=clean)
    return CurationResult(r.id, path, "purged", "purged" if any(done) else "unchanged",
                          (("removed", traces),))
