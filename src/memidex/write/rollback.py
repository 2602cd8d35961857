"""``knowledge rollback RUN_ID [--cascade]``: undo what a run's curation wrote, from the
change ledger (``docs/learning.md``).

The ledger holds, for every landed change set, each file's content hash before and after
and the bytes before (``memidex.write.ledger``). Rolling a run back restores each file it
changed to the bytes it had before the run (or removes a file the run created), as if
the run had never been ingested, and leaves every other record as later runs left it.
Where a later change set touched one of the same files, the rollback refuses and names
it — or, with ``cascade``, rolls back those later runs too (a person's own edit, or a
curation command, is never rolled back: that refuses even with ``cascade``). Runs rolled
back already, and the rollbacks' own change sets (each names the runs it undid,
``rollback_of``), are not later changes: "undo the last N runs" works newest first, or
oldest first with ``cascade``. A file edited by hand since the run (its bytes are not what
the ledger says the last change left) refuses too. Everything is planned first; the
changes land as one change set.

A run named by an earlier rollback's change set is rolled back already: the plan then
changes no record and only finishes what that attempt may not have (the runs marked,
their proposals dropped — a rollback killed after its records landed completes on the
next try). Without its ledger entry (the ledger emptied, its last line torn) a run whose
records still hold its evidence is refused, naming what is missing, as is a run whose
earlier bytes the ledger lost; a rollback that would remove a record another record
still names in its relations is refused, naming that record.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from memidex.errors import (
    InvalidInputError,
    MemidexError,
    NotFoundError,
    RecordError,
    StateDamagedError,
    UsageError,
)
from memidex.records.codec import parse_record_bytes
from memidex.records.model import Record
from memidex.store.files import Store
from memidex.write.ledger import Entry, Ledger, LedgerStats, record_id_of
from memidex.write.writer import Change, Remove, Write

__all__ = ["RollbackPlan", "plan_rollback"]

_ID_RE = re.compile(rb"\b[a-z][a-z0-9]*-[a-z0-9-]*-[0-9a-f]{16}\b")
"""Anything shaped like a record id (``<kind>-<slug>-<hash>``, SPEC §2) in a file's bytes."""


@dataclass(frozen=True, slots=True)
class RollbackPlan:
    runs: tuple[str, ...]  # the runs to mark rolled back, newest first
    changes: tuple[Change, ...]
    restored: tuple[str, ...]  # record paths given back their earlier bytes
    removed: tuple[str, ...]  # record paths the runs created, removed
    already: bool = False  # rolled back before, and marked so: nothing to do
    earlier: bool = False  # an earlier attempt changed the records; only marking is left


def _run_entries(entries: list[Entry], run_id: str) -> list[int]:
    return [i for i, e in enumerate(entries) if e.landed and e.run_id == run_id]


def plan_rollback(store: Store, run_id: str, *, cascade: bool, known_run: bool,
                  rolled_back: Collection[str] = (),
                  claimed: Sequence[str] = ()) -> RollbackPlan:
    """The plan to roll ``run_id`` back (see the module doc). ``rolled_back``: the runs
    marked rolled back in their results; ``claimed``: the record ids the run's result says
    it changed (to tell a run that changed nothing from a ledger that lost its entry)."""
    ledger = Ledger(store.queue_dir)
    scanned, stats = ledger.scan()
    entries = [e for e in scanned if e.landed]
    undone_by: dict[str, Entry] = {}
    for e in entries:
        for r in e.rollback_of:
            undone_by.setdefault(r, e)
    if run_id in undone_by or run_id in rolled_back:
        return _finish_earlier(store, undone_by.get(run_id), rolled_back)
    undone = set(undone_by) | set(rolled_back)
    if not _run_entries(entries, run_id):
        if known_run:
            _check_nothing_held(store, ledger, stats, run_id, claimed)
            return RollbackPlan((run_id,), (), (), ())
        raise NotFoundError(f"no run {run_id} has been ingested",
                            hint="`memidex runs list` lists them")
    # Undone runs and rollbacks changed nothing that still stands: not later changes.
    entries = [e for e in entries if not e.is_rollback and e.run_id not in undone]
    chosen = {run_id}
    while True:  # the closure: later runs that touched a file a chosen run touched
        first = min(i for r in chosen for i in _run_entries(entries, r))
        paths = {op.path for i, e in enumerate(entries) if e.run_id in chosen and i >= first
                 for op in e.ops}
        later = [(i, e) for i, e in enumerate(entries)
                 if i > first and e.run_id not in chosen
                 and any(op.path in paths for op in e.ops)]
        if not later:
            break
        i, e = later[0]
        path = next(op.path for op in e.ops if op.path in paths)
        who = f"run {e.run_id}" if e.run_id else f"`{e.command or 'a command'}`"
        if e.run_id is None:
            raise UsageError(f"{path} was changed after run {run_id} by {who}; "
                             "memidex does not roll back a person's curation",
                             hint="undo that change by hand first (or purge the record)")
        if not cascade:
            raise UsageError(f"{path} was changed after run {run_id} by {who}",
                             hint=f"roll back {who} first, or pass --cascade to roll back "
                                  "every later run that changed the same records")
        chosen.add(e.run_id)
    # Per file: the bytes before the first chosen change, the hash after the last one.
    first_before: dict[str, str | None] = {}
    last_after: dict[str, str | None] = {}
    ops_by_path = {}
    for e in entries:
        if e.run_id not in chosen:
            continue
        for op in e.ops:
            if op.path not in first_before:
                first_before[op.path] = op.before
                ops_by_path[op.path] = op
            last_after[op.path] = op.after
    changes: list[Change] = []
    restored: list[str] = []
    removed: list[str] = []
    kept: dict[str, Record] = {}  # path -> the record it is given back
    for path in sorted(first_before):
        current = store.current_hash(store.abspath(path))
        if current != last_after[path]:
            raise UsageError(f"{path} changed on disk since the run wrote it (a person's "
                             "edit?); nothing was rolled back",
                             hint="commit or revert that edit first")
        before = first_before[path]
        if before is None:
            if current is not None:
                changes.append(Remove(path, current))
                removed.append(path)
            continue
        try:
            data = ledger.previous_bytes(ops_by_path[path])
        except LookupError:
            data = None
        if data is None:
            raise StateDamagedError(
                f"the change ledger lost the bytes {path} had before run {run_id} "
                f"({store.rel(ledger.blobs_dir)}/ holds no {before}); nothing was rolled "
                "back", hint="the ledger is local state: give the file its earlier bytes "
                "from git by hand (`git log -p -- FILE`)")
        try:
            record = parse_record_bytes(data, path)
        except RecordError as exc:
            raise InvalidInputError(f"{path}: its earlier bytes do not parse ({exc.message})"
                                    ) from None
        changes.append(Write(record, current))
        restored.append(path)
        kept[path] = record
    order = sorted(chosen, key=lambda r: -max(_run_entries(entries, r)))
    _check_citations(store, removed, kept, order)
    return RollbackPlan(tuple(order), tuple(changes), tuple(restored), tuple(removed))


def _finish_earlier(store: Store, entry: Entry | None,
                    rolled_back: Collection[str]) -> RollbackPlan:
    """The plan for a run rolled back before: nothing to change; the runs that earlier
    rollback undid but no result marks yet are marked (its attempt was cut short)."""
    if entry is None:  # marked in its result (a rollback older than ``rollback_of``)
        return RollbackPlan((), (), (), (), already=True)
    runs = tuple(r for r in entry.rollback_of if r not in rolled_back)
    if not runs:
        return RollbackPlan((), (), (), (), already=True)
    restored = tuple(sorted(op.path for op in entry.ops if op.after is not None))
    removed = tuple(sorted(op.path for op in entry.ops if op.after is None))
    return RollbackPlan(runs, (), restored, removed, earlier=True)


def _check_nothing_held(store: Store, ledger: Ledger, stats: LedgerStats, run_id: str,
                        claimed: Sequence[str]) -> None:
    """A run with no ledger entry: refuse when records it says it changed still hold its
    evidence (the ledger lost the entry: rolling back would change nothing and call the
    run undone)."""
    holding = []
    for rid in sorted(set(claimed)):
        try:
            path = store.record_path(rid.split("-", 1)[0], rid)
            record = parse_record_bytes(path.read_bytes(), store.rel(path))
        except (OSError, ValueError, MemidexError):
            continue
        if any(ev.run == run_id for ev in record.evidence):
            holding.append(rid)
    if not holding:
        return
    state = []
    if not stats.entries and not stats.damaged_lines:
        state.append("it is empty")
    if stats.damaged_lines:
        state.append(f"{stats.damaged_lines} of its lines are damaged (a torn write?)")
    if stats.starts > 1:
        state.append("it was lost and started again since")
    some = ", ".join(holding[:3]) + (f" and {len(holding) - 3} more" if len(holding) > 3
                                     else "")
    raise StateDamagedError(
        f"the change ledger ({store.rel(ledger.file)}) has no entry for run {run_id}"
        + (f" ({'; '.join(state)})" if state else "")
        + f", yet {len(holding)} records still hold its evidence ({some}); nothing was "
        "rolled back",
        hint="without the ledger memidex cannot tell what the run replaced: undo its "
        "changes with git (`git log -p` on those records), or restore queue/ledger/")


def _check_citations(store: Store, removed: Sequence[str], kept: Mapping[str, Record],
                     runs: Sequence[str]) -> None:
    """Refuse a rollback that would remove a record another record (one it keeps, or one
    it gives back) still names in its relations."""
    if not removed:
        return
    gone = {record_id_of(p): p for p in removed}
    citing: list[tuple[str, str, str]] = []  # (citing id, relation, removed id)
    for path, record in kept.items():
        citing.extend((record.id, rel, t) for rel, t in record.relations.edges() if t in gone
                      and path not in removed)
    files, _problems = store.scan_records()
    skip = set(removed) | set(kept)
    for fs in files:
        if fs.relpath in skip:
            continue
        try:
            data = store.read_bytes(fs.relpath)
        except OSError:
            continue
        named = {m.decode("ascii") for m in _ID_RE.findall(data)} & gone.keys()
        named.discard(record_id_of(fs.relpath))
        if not named:
            continue
        try:
            record = parse_record_bytes(data, fs.relpath)
        except RecordError:
            continue
        citing.extend((record.id, rel, t) for rel, t in record.relations.edges()
                      if t in gone)
    if citing:
        by, rel, target = sorted(citing)[0]
        more = len({c[0] for c in citing}) - 1
        raise UsageError(
            f"rolling back {', '.join(runs)} would remove {target}, which {by} "
            f"{'cites' if rel == 'cites' else f'names ({rel})'}"
            + (f" (and {more} more records name what it removes)" if more else "")
            + "; nothing was rolled back",
            hint=f"edit the relations of {by} first, or purge it")

