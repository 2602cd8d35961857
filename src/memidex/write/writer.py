"""The fenced, journaled, staged writer: the only way records change (SPEC §6).

::

    with writer_session(store, wait=5, ttl=config.lease_ttl_seconds) as w:
        w.write(record)                      # one change set of one write
        w.apply([Write(r1), Remove(path)])   # one change set, journaled first

A session holds the writer lease (``memidex.write.lease``), heartbeats while open and releases
on exit. On entry it removes staging left by older epochs and finishes the change sets a
crashed writer left in the journal (``memidex.write.journal``), so the result equals an
uninterrupted run. Each change set: plan (a file that no longer holds the hash the caller
read is a ConflictError; skip files that already hold an equal record) →
save the bytes before and after in the ledger's blobs (``memidex.write.ledger``) → journal
it (fsynced) → stage every write (unique files, fsynced) → take the visibility lock
exclusively (``memidex.store.visibility``) → ``BEGIN IMMEDIATE`` → re-check epoch and token
(changed: roll back, discard, FencedError) → check every op (a file changed meanwhile:
ConflictError, nothing installed) → ``os.replace`` / unlink each, insert each into
``applied`` → ONE COMMIT → unlock → append the ledger entry (fsynced) → mark done and
forget it in the journal. Readers holding the visibility lock shared see all of a change
set or none of it.

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
from pathlib import Path
from typing import Any

from memidex._testing import step
from memidex.errors import LANDED_NOTE, ConflictError, LeaseError, RecordError
from memidex.records.codec import content_hash, dump_record, parse_record_bytes
from memidex.records.model import Record
from memidex.store import visibility
from memidex.store.files import StagedFile, Store
from memidex.store.fsio import (
    fsync_dir,
    refuse_symlink,
    swap_into_place,
    sync_files,
    temp_name,
    write_new,
)
from memidex.write.changes import Change, Recovery, Remove, Write
from memidex.write.journal import ChangeSet, Journal, Op, Owner
from memidex.write.lease import Fenced, Lease
from memidex.write.ledger import Entry, Ledger, LedgerOp, record_id_of
from memidex.write.procs import kernel_clock

__all__ = [
    "Change",
    "FencedState",
    "Recovery",
    "Remove",
    "Write",
    "WriterSession",
    "writer_session",
]


class FencedState:
    """A :class:`memidex.store.state.StateWriter` whose every write is fenced by the
    session's lease (:meth:`WriterSession.put_state`)."""

    def __init__(self, session: WriterSession) -> None:
        self._session = session

    def put(self, path: Path, data: bytes) -> None:
        self._session.put_state(path, data)

    def remove(self, path: Path) -> None:
        self._session.remove_state(path)


class WriterSession:
    """Fenced writes while holding the lease; create it with :func:`writer_session`."""

    install_wait = 30.0
    """Seconds an install waits for readers holding the visibility lock."""

    def __init__(self, store: Store, lease: Lease, journal: Journal,
                 ledger: Ledger | None = None) -> None:
        self.store = store
        self.lease = lease
        self.journal = journal
        self.ledger = ledger if ledger is not None else Ledger(store.queue_dir)
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
              step_id: str | None = None, run_id: str | None = None,
              ordinal: int | None = None, rollback_of: Sequence[str] = ()) -> list[bool]:
        """Apply ``changes`` as one journaled change set; per change, whether it wrote.

        ``step_id`` names a model step (:meth:`Journal.save_answer`) that this change set
        completes; it is marked done once the change set committed. ``run_id`` and
        ``ordinal`` name the learning run it belongs to, ``rollback_of`` the runs a
        rollback undoes; the ledger keeps them.
        """
        self._check_open()
        ops: list[Op] = []
        results: list[bool] = []
        contents: list[bytes] = []
        hashes: list[str] = []  # of each content: the op's before and after
        encoded: dict[int, bytes] = {}  # op index -> its data's UTF-8 (encoded once)
        for change in changes:
            planned = self._plan(change)
            results.append(planned is not None)
            if planned is not None:
                op, current, raw = planned
                if current is not None and op.before is not None:
                    contents.append(current)
                    hashes.append(op.before)
                if raw is not None and op.after is not None:
                    encoded[len(ops)] = raw
                    contents.append(raw)
                    hashes.append(op.after)
                ops.append(op)
        if not ops:
            if step_id is not None:
                self.journal.mark_step_done(step_id)
            return results
        # The bytes before and after, durable before the change set is: whatever happens
        # to the files later, the ledger can give back what each write replaced.
        self.ledger.save_blobs(contents, hashes)
        me = self.lease.me
        owner = Owner(me.pid, me.start, me.boot_id, me.host, self.epoch)
        cs = self.journal.begin(command, ops, owner, step_id, run_id=run_id,
                                ordinal=ordinal, rollback_of=rollback_of)
        step("journal.written")
        self._touched = False
        try:
            self._run(cs, replay=False, encoded=encoded)
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

    # --- state files (fenced like records) ---

    @property
    def state(self) -> FencedState:
        """The state writer of this session (:class:`memidex.store.state.StateWriter`):
        every local state file written under the lease goes through it."""
        return FencedState(self)

    def put_state(self, path: Path, data: bytes) -> None:
        """Replace a local state file's bytes (the run counters, a tests file, a run's
        result, a proposal), fenced like a record: the bytes are written to a temp file
        beside it and fsynced, then moved into place inside the fence transaction. A
        writer that lost its lease (paused past its TTL and taken over) gets the fencing
        error and the file keeps the bytes the new holder left."""
        self._check_open()
        refuse_symlink(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_name(path)
        write_new(tmp, data)
        try:
            step("state.staged")
            with self.lease.fence():
                swap_into_place(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    def remove_state(self, path: Path) -> None:
        """Delete a local state file (a proposal decided), fenced."""
        self._check_open()
        with self.lease.fence():
            path.unlink(missing_ok=True)

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

    def _plan(self, change: Change) -> tuple[Op, bytes | None, bytes | None] | None:
        """The op for ``change``, the bytes it replaces and (a write) the bytes it writes;
        None when there is nothing to do."""
        store = self.store
        if isinstance(change, Write):
            relpath = store.record_rel(change.record.kind, change.record.id)
            data = change.text if change.text is not None else dump_record(change.record)
            current: bytes | None
            before: str | None
            if change.data is not None and isinstance(change.expected, str) and \
                    content_hash(change.data) == change.expected:
                current = change.data  # read by the caller a moment ago, under this lease
                before = change.expected
            elif change.expected is None and not os.access(store.abs_of(relpath), os.F_OK):
                current = before = None  # a new record, as the caller expects (no failed open)
            else:
                try:
                    current = store.read_bytes(relpath)
                except FileNotFoundError:
                    current = None
                before = content_hash(current) if current is not None else None
            # The expected-hash check comes first: a record computed from a stale read
            # (another writer changed the file since) is a conflict, even when it happens
            # to equal what the file holds now — a confirm lost that way would be silent.
            self._expect(change.expected, before, relpath)
            if current is not None:
                if change.current is not None and isinstance(change.expected, str):
                    if change.current == change.record:  # `expected` was checked above
                        return None
                else:
                    with contextlib.suppress(RecordError):
                        if parse_record_bytes(current, relpath) == change.record:
                            return None
            raw = data.encode("utf-8")
            return Op("write", relpath, before, content_hash(raw), data), current, raw
        path = self.store.record_file(change.relpath)
        try:
            current = path.read_bytes()
        except FileNotFoundError:
            return None
        before = content_hash(current)
        self._expect(change.expected, before, change.relpath)
        return Op("remove", store.rel(path), before), current, None

    @staticmethod
    def _expect(expected: str | None | bool, actual: str | None, relpath: str) -> None:
        if expected is not False and expected != actual:
            raise ConflictError(f"{relpath} changed on disk since it was read; not replaced")

    def _run(self, cs: ChangeSet, *, replay: bool,
             encoded: dict[int, bytes] | None = None) -> None:
        """``encoded``: the UTF-8 of each write's data, by op index (a change set planned
        a moment ago; a replay encodes the journal's text)."""
        todo = [(i, op) for i, op in enumerate(cs.ops) if i not in cs.done]
        if cs.done:
            self._touched = True
        if todo:
            self._check_open()
            self._land(cs, todo, replay=replay, encoded=encoded or {})
        try:
            if not (replay and self.ledger.has(cs.id)):
                self.ledger.append(self._entry(cs, "landed", cs.ops))
            step("ledger.written")
            if todo:
                self.journal.mark_done(cs, [index for index, _op in todo], self.epoch)
            step("journal.marked")
            if cs.step is not None:
                self.journal.mark_step_done(cs.step)
            self.journal.finish(cs)
            step("journal.finished")
        except OSError as exc:  # the records are in place: say so, never "nothing changed"
            setattr(exc, LANDED_NOTE, f"after change set {cs.id} landed ({len(cs.ops)} "
                    "record file(s) changed; its ledger entry or journal marks not written)")
            raise

    def _entry(self, cs: ChangeSet, outcome: str, ops: Sequence[Op]) -> Entry:
        return Entry(id=cs.id, command=cs.command, run_id=cs.run_id, ordinal=cs.ordinal,
                     epoch=self.epoch, outcome=outcome, at=round(time.time(), 3),
                     rollback_of=cs.rollback_of,
                     ops=tuple(LedgerOp(op.path, record_id_of(op.path), op.op, op.before,
                                        op.after) for op in ops))

    def _land(self, cs: ChangeSet, todo: Sequence[tuple[int, Op]], *,
              replay: bool, encoded: dict[int, bytes]) -> None:
        """Install every op of ``todo`` together: stage them all, then, holding the
        visibility lock exclusively, check and install them in ONE fence transaction."""
        store = self.store
        staged: dict[int, StagedFile] = {}
        checked: set[str] = set()  # folders resolved once for the whole batch
        # the staged files' unique names: one random token for the batch and the op's
        # index (O_EXCL refuses a name taken all the same), not a getrandom(2) a file
        nonce = f"{os.getpid()}.{os.urandom(4).hex()}"
        try:
            for index, op in todo:
                # A replay stages only what is not in place yet; a change set planned a
                # moment ago found each file holding other bytes (a file that got them
                # meanwhile is seen in place by the check inside the fence, and its
                # staged copy discarded).
                if op.op == "write" and (not replay or store.current_hash(
                        store.abs_of(op.path)) != op.after):
                    assert op.data is not None
                    if replay:  # bytes from the journal: parsed, then staged canonically
                        sf = store.stage(parse_record_bytes(op.data.encode("utf-8"),
                                                            op.path), durable=False)
                    else:  # bytes this session encoded (and hashed: op.after) a moment ago
                        raw = encoded.get(index)
                        sf = store.stage_bytes(op.path, raw if raw is not None else
                                               op.data.encode("utf-8"), durable=False,
                                               checked=checked, sha256=op.after,
                                               unique=f"{nonce}.{index}")
                    if sf.sha256 != op.after:
                        store.discard(sf)
                        raise LeaseError(
                            f"journal entry {cs.id} does not re-encode to the same bytes")
                    staged[index] = sf
            # Every staged file durable at once (one syncfs on Linux), before any lands.
            sync_files([sf.staged for sf in staged.values()])
            if staged:
                step("write.staged")
            try:
                with visibility.exclusive(store.knowledge, timeout=self.install_wait) as vis:
                    with self.lease.fence() as fenced:
                        self._install(cs, todo, staged, fenced, vis, replay=replay)
                    step("write.committed")
                    if vis.installing is not None:
                        vis.end(vis.installing)
            except TimeoutError:
                raise LeaseError(
                    f"readers kept {visibility.LOCK_FILE} locked for {self.install_wait:g}s; "
                    "nothing was installed", hint="run the command again") from None
        finally:
            for sf in staged.values():
                store.discard(sf)

    def _install(self, cs: ChangeSet, todo: Sequence[tuple[int, Op]],
                 staged: dict[int, StagedFile], fenced: Fenced,
                 vis: visibility.Exclusive, *, replay: bool) -> None:
        """Inside the fence: check every op first (a conflict installs nothing), then
        install them all and record them in ``applied``; the fence commits them at once.
        (Only a replay asks ``applied`` first: no step of a change set journaled by this
        session a moment ago can have been committed before.)"""
        store = self.store
        plan: list[tuple[int, Op, bool]] = []  # (index, op, needs installing)
        for index, op in todo:
            if replay and fenced.applied(cs.step_id(index)):
                continue  # committed before a crash: idempotent
            sf = None if replay else staged.get(index)  # (staged at abs_of(op.path))
            now = store.current_hash(sf.target if sf is not None else store.abs_of(op.path),
                                     absent=op.before is None)
            if now == op.after:
                plan.append((index, op, False))  # in place (replayed after os.replace)
            elif now != op.before or (op.op == "write" and index not in staged):
                raise ConflictError(f"{op.path} changed on disk since it was read; not replaced")
            else:
                plan.append((index, op, True))
        if any(install for _, _, install in plan):
            vis.begin(cs.id)
        folders: set[str] = set()  # each made sure of (and fsynced) once
        made: set[str] = set()
        for index, op, install in plan:
            if install:
                self._touched = True
                if op.op == "write":
                    sf = staged[index]
                    store.install(sf, expected=op.before, sync_folder=False, made=made)
                    del staged[index]  # moved: nothing left to discard
                    folders.add(os.path.dirname(sf.target))
                else:
                    store.remove(op.path, sync_folder=False)
                    folders.add(os.path.dirname(store.abs_of(op.path)))
            step("write.installed")
            fenced.record_applied(cs.step_id(index), op.path, op.after)
            step("write.recorded")
        # The renames durable (each folder fsynced once) before the fence commits them.
        sync_files([], folders)

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
        self.ledger.cleanup()
        mine = os.getpid()
        for cs in self.journal.pending():
            if cs.owner.pid != mine and cs.owner.alive():
                rec.skipped_live.append(cs.id)
                continue
            self._touched = False
            try:
                self._run(cs, replay=True)
            except ConflictError as exc:
                self._abandon(cs, exc.message)
                rec.abandoned.append(cs.id)
                continue
            rec.replayed.append(cs.id)
        settled = visibility.settle(self.store.knowledge)
        if settled is not None:
            rec.settled.append(settled)
        return rec

    def _abandon(self, cs: ChangeSet, reason: str) -> None:
        """A change set that cannot be finished: set it aside; the ledger names the files
        it did change (an ``abandoned`` entry), so they can be found and rolled back."""
        landed = [op for op in cs.ops
                  if op.before != op.after
                  and self.store.current_hash(self.store.abs_of(op.path)) == op.after]
        if landed and not self.ledger.has(cs.id):
            self.ledger.append(self._entry(cs, "abandoned", landed))
        self.journal.abandon(cs, reason)

    def close(self) -> None:
        self._open = False


@contextlib.contextmanager
def writer_session(store: Store, *, wait: float, ttl: float, maintenance: bool = False,
                   clock: Callable[[], float] = time.time,
                   mono: Callable[[], float] = time.monotonic,
                   kernel: Callable[[], float | None] = kernel_clock,
                   busy_timeout: float = 5.0) -> Iterator[WriterSession]:
    """Hold the writer lease of ``store``'s knowledge folder for the ``with`` block.

    Waits up to ``wait`` seconds for a live holder (``maintenance``: refuses at once),
    then :class:`memidex.errors.LeaseHeldError`. Every write inside is fenced.
    """
    journal = Journal(store.queue_dir)
    lease = Lease(store.knowledge, ttl=ttl, clock=clock, busy_timeout=busy_timeout,
                  epoch_floor=journal.max_epoch, mono=mono, kernel=kernel)
    lease.acquire(wait=wait, maintenance=maintenance)
    session = WriterSession(store, lease, journal)
    try:
        lease.start_heartbeat()
        session.recover()
        yield session
    finally:
        session.close()
        lease.release()
