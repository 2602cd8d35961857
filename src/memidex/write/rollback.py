"""``knowledge rollback RUN_ID [--cascade]``: undo what a run's curation wrote, from the
change ledger (``docs/learning.md``).

The ledger holds, for every landed change set, each file's content hash before and after
and the bytes before (``memidex.write.ledger``). Rolling a run back restores each file it
changed to the bytes it had before the run (or removes a file the run created), as if
the run had never been ingested, and leaves every other record as later runs left it.
Where a later change set touched one of the same files, the rollback refuses and names
it — or, with ``cascade``, rolls back those later runs too (a person's own edit, or a
curation command, is never rolled back: that refuses even with ``cascade``). A file
edited by hand since the run (its bytes are not what the ledger says the last change
left) refuses too. Everything is planned first; the changes land as one change set.
"""

from __future__ import annotations

from dataclasses import dataclass

from memidex.errors import InvalidInputError, NotFoundError, RecordError, UsageError
from memidex.records.codec import parse_record_bytes
from memidex.store.files import Store
from memidex.write.ledger import Entry, Ledger
from memidex.write.writer import Change, Remove, Write

__all__ = ["RollbackPlan", "plan_rollback"]


@dataclass(frozen=True, slots=True)
class RollbackPlan:
    runs: tuple[str, ...]  # the runs rolled back, newest first
    changes: tuple[Change, ...]
    restored: tuple[str, ...]  # record paths given back their earlier bytes
    removed: tuple[str, ...]  # record paths the runs created, removed


def _run_entries(entries: list[Entry], run_id: str) -> list[int]:
    return [i for i, e in enumerate(entries) if e.landed and e.run_id == run_id]


def plan_rollback(store: Store, run_id: str, *, cascade: bool,
                  known_run: bool) -> RollbackPlan:
    ledger = Ledger(store.queue_dir)
    entries = [e for e in ledger.entries() if e.landed]
    if not _run_entries(entries, run_id):
        if known_run:
            return RollbackPlan((run_id,), (), (), ())
        raise NotFoundError(f"no run {run_id} has been ingested",
                            hint="`memidex runs list` lists them")
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
        data = ledger.previous_bytes(ops_by_path[path])
        if data is None:
            raise InvalidInputError(f"the ledger lost the bytes {path} had before run "
                                    f"{run_id}", hint="restore it from git")
        try:
            record = parse_record_bytes(data, path)
        except RecordError as exc:
            raise InvalidInputError(f"{path}: its earlier bytes do not parse ({exc.message})"
                                    ) from None
        changes.append(Write(record, current))
        restored.append(path)
    order = sorted(chosen, key=lambda r: -max(_run_entries(entries, r)))
    return RollbackPlan(tuple(order), tuple(changes), tuple(restored), tuple(removed))
