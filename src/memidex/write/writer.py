"""The fenced, journaled, staged writer: the only way records change (SPEC §6).

::

    with writer_session(store, wait=5, ttl=config.lease_ttl_seconds) as w:
        w.write(record)                      # one change set of one write
        w.apply([Write(r1), Remove(path)])   # one change set, journaled first

A session holds the writer lease (``memidex.write.lease``), heartbeats while open and releases
on exit. On entry it removes staging left by older epochs and finishes the change sets a
crashed writer left in the journal (``memidex.write.journal``), so the result equals an
uninterrupted run. Each write: plan (skip when the file already holds an equal record) →
journal the change set (fsynced) → per op: stage (unique file, fsynced) →
``BEGIN IMMEDIATE`` → re-check epoch and token (changed: roll back, discard, FencedError)
→ step already applied: discard → ``os.replace`` (ConflictError when someone edited the
file: never clobbered) → insert into ``applied`` → COMMIT → mark done in the journal.

Test hooks live in :mod:`memidex._testing`: ``crash_at`` makes the process
``os._exit(137)`` at a numbered step; ``inject_io_fault`` makes the k-th ``write``,
``fsync`` or ``replace`` fail with ENOSPC/EIO. Both are off by default and cost nothing
then (one ``is not None`` test per step).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memidex._testing import step
from memidex.errors import ConflictError, LeaseError, RecordError, UnsafePathError
from memidex.records.codec import content_hash, dump_record, parse_record_bytes
from memidex.records.model import Record
from memidex.store.files import StagedFile, Store
from memidex.store.fsio import fsync_dir
from memidex.write.journal import ChangeSet, Journal, Op, Owner
from memidex.write.lease import Lease

__all__ = [
    "Change",
    "Recovery",
    "Remove",
    "Write",
    "WriterSession",
    "writer_session",
]


@dataclass(frozen=True, slots=True)
class Write:
    """Write ``record`` to ``records/<kind>/<id>.md``.

    ``expected``: the content hash the caller read (``None``: the file must not exist);
    ``False`` skips that check. Either way a file changed between planning and replacing
    is never clobbered.
    """

    record: Record
    expected: str | None | bool = False


@dataclass(frozen=True, slots=True)
class Remove:
    """Delete the record file at ``relpath`` (relative to the repository root)."""

    relpath: str
    expected: str | None | bool = False


Change = Write | Remove


@dataclass
class Recovery:
    """What a session found and did on entry."""

    staging_removed: list[str] = field(default_factory=list)
    replayed: list[str] = field(default_factory=list)  # change set ids finished
    skipped_live: list[str] = field(default_factory=list)  # owned by a live process
    abandoned: list[str] = field(default_factory=list)  # conflicts, moved aside


class WriterSession:
    """Fenced writes while holding the lease; create it with :func:`writer_session`."""

    def __init__(self, store: Store, lease: Lease, journal: Journal) -> None:
        self.store = store
        self.lease = lease
        self.journal = journal
        self.recovery = Recovery()
        self._open = True
        self._touched = False

    @property
    def epoch(self) -> int:
        if self.lease.epoch is None:
            raise LeaseError("the writer session is closed")
        return self.lease.epoch

    # --- the public write API ---

    def write(self, record: Record, *, expected: str | None | bool = False) -> bool:
        """Write one record; False (nothing written) when the file already holds it."""
        return self.apply([Write(record, expected)], command="write")[0]

    def remove(self, relpath: str, *, expected: str | None | bool = False) -> bool:
        """Delete one record file (purge); False when it is already gone."""
        return self.apply([Remove(relpath, expected)], command="remove")[0]

    def apply(self, changes: Sequence[Change], *, command: str = "",
              step_id: str | None = None) -> list[bool]:
        """Apply ``changes`` as one journaled change set; per change, whether it wrote.

        ``step_id`` names a model step (:meth:`Journal.save_answer`) that this change set
        completes; it is marked done once the change set committed.
        """
        self._check_open()
        ops: list[Op] = []
        results: list[bool] = []
        for change in changes:
            op = self._plan(change)
            results.append(op is not None)
            if op is not None:
                ops.append(op)
        if not ops:
            if step_id is not None:
                self.journal.mark_step_done(step_id)
            return results
        me = self.lease.me
        owner = Owner(me.pid, me.start, me.boot_id, me.host, self.epoch)
        cs = self.journal.begin(command, ops, owner, step_id)
        step("journal.written")
        self._touched = False
        try:
            self._run(cs)
        except ConflictError as exc:
            with contextlib.suppress(OSError):
                if self._touched:
                    self.journal.abandon(cs, exc.message)
                else:
                    self.journal.finish(cs)
            raise
        except BaseException:
            # Nothing of it landed: forget it. Otherwise leave it for the next holder
            # to finish (roll forward), exactly as after a crash.
            if not self._touched:
                with contextlib.suppress(OSError):
                    self.journal.finish(cs)
            raise
        return results

    # --- model answers (delegated to the journal) ---

    def save_answer(self, step_name: str, answer: Any) -> None:
        self.journal.save_answer(step_name, answer)

    def load_answer(self, step_name: str) -> Any:
        return self.journal.load_answer(step_name)

    # --- internals ---

    def _check_open(self) -> None:
        if not self._open:
            raise LeaseError("the writer session is closed")
        if self.lease.lost:
            raise self.lease.lost_error()

    def _plan(self, change: Change) -> Op | None:
        store = self.store
        if isinstance(change, Write):
            target = store.record_path(change.record.kind, change.record.id)
            relpath = store.rel(target)
            data = dump_record(change.record)
            try:
                current: bytes | None = target.read_bytes()
            except FileNotFoundError:
                current = None
            before = content_hash(current) if current is not None else None
            if current is not None:
                with contextlib.suppress(RecordError):
                    if parse_record_bytes(current, relpath) == change.record:
                        return None
            self._expect(change.expected, before, relpath)
            return Op("write", relpath, before, content_hash(data.encode("utf-8")), data)
        path = self._record_file(change.relpath)
        before = store.current_hash(path)
        if before is None:
            return None
        self._expect(change.expected, before, change.relpath)
        return Op("remove", store.rel(path), before)

    def _record_file(self, relpath: str) -> Path:
        path = self.store.abspath(relpath)
        records = self.store.records_dir.resolve()
        if not path.name.endswith(".md") or not path.parent.resolve().is_relative_to(records):
            raise UnsafePathError(f"{relpath!r} is not a record file of this knowledge folder")
        return path

    @staticmethod
    def _expect(expected: str | None | bool, actual: str | None, relpath: str) -> None:
        if expected is not False and expected != actual:
            raise ConflictError(f"{relpath} changed on disk since it was read; not replaced")

    def _run(self, cs: ChangeSet) -> None:
        for index, op in enumerate(cs.ops):
            if index in cs.done:
                self._touched = True
                continue
            self._check_open()
            self._apply_op(cs, index, op)
            self.journal.mark_done(cs, index, self.epoch)
            step("journal.marked")
        if cs.step is not None:
            self.journal.mark_step_done(cs.step)
        self.journal.finish(cs)
        step("journal.finished")

    def _apply_op(self, cs: ChangeSet, index: int, op: Op) -> None:
        store = self.store
        target = store.abspath(op.path)
        staged: StagedFile | None = None
        if op.op == "write" and store.current_hash(target) != op.after:
            assert op.data is not None
            staged = store.stage(parse_record_bytes(op.data.encode("utf-8"), op.path))
            if staged.sha256 != op.after:
                store.discard(staged)
                raise LeaseError(f"journal entry {cs.id} does not re-encode to the same bytes")
            step("write.staged")
        sid = cs.step_id(index)
        try:
            with self.lease.fence() as fenced:
                if fenced.applied(sid):
                    return  # committed before a crash: idempotent
                now = store.current_hash(target)
                if now == op.after:
                    pass  # already in place (replayed after os.replace, before COMMIT)
                elif now != op.before:
                    raise ConflictError(
                        f"{op.path} changed on disk since it was read; not replaced")
                elif op.op == "write":
                    if staged is None:
                        raise ConflictError(
                            f"{op.path} changed on disk since it was read; not replaced")
                    self._touched = True
                    store.install(staged, expected=op.before)
                    staged = None
                else:
                    self._touched = True
                    store.remove(op.path)
                step("write.installed")
                fenced.record_applied(sid, op.path, op.after)
                step("write.recorded")
            step("write.committed")
        finally:
            if staged is not None:
                store.discard(staged)

    def recover(self) -> Recovery:
        """Remove staging of older epochs; finish change sets a dead writer left."""
        rec = self.recovery
        staging = self.store.staging_dir
        with contextlib.suppress(FileNotFoundError):
            removed = False
            for entry in os.scandir(staging):
                if entry.is_file(follow_symlinks=False) or entry.is_symlink():
                    Path(entry.path).unlink(missing_ok=True)
                    rec.staging_removed.append(entry.name)
                    removed = True
            if removed:
                fsync_dir(staging)
        folder = self.store.knowledge
        for pattern in (".lease.*.tmp", ".epoch.*.tmp"):
            for path in folder.glob(pattern):  # copies a crashed writer left half-made
                path.unlink(missing_ok=True)
        step("recover.cleaned")
        self.journal.cleanup()
        mine = os.getpid()
        for cs in self.journal.pending():
            if cs.owner.pid != mine and cs.owner.alive():
                rec.skipped_live.append(cs.id)
                continue
            self._touched = False
            try:
                self._run(cs)
            except ConflictError as exc:
                self.journal.abandon(cs, exc.message)
                rec.abandoned.append(cs.id)
                continue
            rec.replayed.append(cs.id)
        return rec

    def close(self) -> None:
        self._open = False


@contextlib.contextmanager
def writer_session(store: Store, *, wait: float, ttl: float, maintenance: bool = False,
                   clock: Callable[[], float] = time.time,
                   busy_timeout: float = 5.0) -> Iterator[WriterSession]:
    """Hold the writer lease of ``store``'s knowledge folder for the ``with`` block.

    Waits up to ``wait`` seconds for a live holder (``maintenance``: refuses at once),
    then :class:`memidex.errors.LeaseHeldError`. Every write inside is fenced.
    """
    journal = Journal(store.queue_dir)
    lease = Lease(store.knowledge, ttl=ttl, clock=clock, busy_timeout=busy_timeout,
                  epoch_floor=journal.max_epoch)
    lease.acquire(wait=wait, maintenance=maintenance)
    session = WriterSession(store, lease, journal)
    try:
        lease.start_heartbeat()
        session.recover()
        yield session
    finally:
        session.close()
        lease.release()
