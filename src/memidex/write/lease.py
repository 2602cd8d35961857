"""The writer lease on a knowledge folder (SPEC §6, ``docs/lease.md``).

``.writer-authority.sqlite`` is the only truth: one ``lease`` row (epoch, token, holder,
heartbeat) changed only inside ``BEGIN IMMEDIATE`` transactions, and the ``applied``
table of committed write steps. ``.lease`` and ``.epoch`` are human-readable copies,
replaced atomically inside the granting transaction (so ``.epoch`` is never below a
granted epoch) and used to seed a recreated authority DB.

A lease is free when there is no holder, the holder's boot id differs, its pid is dead
or was reused (start time differs), or its heartbeat is older than its TTL. Every grant
raises the epoch by one; the epoch never goes down, even when the authority DB is
deleted or damaged: it is recreated (under an ``flock``) seeded above every epoch still
visible (``.epoch``, ``.lease``, the journal, whatever can be salvaged), and a holder of
the old file is fenced because its file is no longer the one on disk.

The authority database itself is :mod:`memidex.write.authority`; the numbered protocol
steps are marked with :func:`memidex._testing.step`, which does nothing unless a test
installed a hook.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from memidex._testing import step
from memidex.errors import FencedError, LeaseError, LeaseHeldError, MemidexError, StorageError
from memidex.store.fsio import atomic_write, dump_json
from memidex.write.authority import (
    AUTHORITY_FILE,
    EPOCH_FILE,
    LEASE_FILE,
    Authority,
    Holder,
    Unusable,
    connect,
    is_busy,
    read_holder,
    same_file,
    storage_failure,
)
from memidex.write.procs import current_process, kernel_clock

__all__ = ["AUTHORITY_FILE", "EPOCH_FILE", "LEASE_FILE", "Fenced", "Holder", "Lease"]


class Fenced:
    """Inside :meth:`Lease.fence`: the lease is provably ours until the block ends.

    The ``applied`` table of committed write steps is reached only through this handle.
    """

    def __init__(self, conn: sqlite3.Connection, epoch: int | None) -> None:
        self._conn = conn
        self.epoch = epoch

    def applied(self, step_id: str) -> bool:
        """Whether the step was committed already (a replay after a crash)."""
        return self._conn.execute(
            "SELECT 1 FROM applied WHERE step_id = ?", (step_id,)).fetchone() is not None

    def record_applied(self, step_id: str, path: str, sha256: str | None) -> None:
        """Record the step as applied; it becomes durable when the fence commits."""
        self._conn.execute("INSERT INTO applied (step_id, epoch, path, sha256) "
                           "VALUES (?, ?, ?, ?)", (step_id, self.epoch, path, sha256))


class Lease:
    """One process's claim on a knowledge folder's writer lease."""

    def __init__(self, folder: Path, *, ttl: float, clock: Callable[[], float] = time.time,
                 busy_timeout: float = 5.0,
                 epoch_floor: Callable[[], int] | None = None,
                 mono: Callable[[], float] = time.monotonic,
                 kernel: Callable[[], float | None] = kernel_clock) -> None:
        """``clock``: the wall clock the heartbeat records (shown by ``doctor``); ``mono``:
        the machine's monotonic clock and ``kernel`` the kernel's time since boot, which
        decide — with the wall clock — whether a heartbeat is stale (tests inject all three
        to fake a stale holder without sleeping)."""
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.folder = folder
        self.ttl = ttl
        self.clock = clock
        self.mono = mono
        self.kernel = kernel
        self.busy_timeout = busy_timeout
        self.authority = Authority(folder, busy_timeout=busy_timeout, epoch_floor=epoch_floor)
        self.me = current_process()
        self.epoch: int | None = None
        self.token: str | None = None
        self.took_over: str | None = None  # why the previous holder lost it
        self._conn: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_beat = 0.0
        self._watched: tuple[object, float] = (None, mono())
        """The holder's last beat we saw while waiting, and when (our monotonic clock)."""

    # --- acquiring ---

    def acquire(self, *, wait: float, maintenance: bool = False) -> int:
        """Take the lease (waiting up to ``wait`` seconds); returns the new epoch.

        ``maintenance`` refuses at once when a live holder has it. Raises
        :class:`LeaseHeldError` (``writer lease is held by pid N ...``) otherwise.
        """
        if self.epoch is not None:
            raise LeaseError("this lease object is already held")
        self.folder.mkdir(parents=True, exist_ok=True)
        self._check_copies()
        wait = 0.0 if maintenance else max(0.0, wait)
        deadline = time.monotonic() + wait
        backoff = 0.005
        while True:
            remaining = deadline - time.monotonic()
            busy = min(self.busy_timeout, max(remaining, 1.0 if maintenance else 0.25))
            holder = self._try_acquire(busy)
            if holder is not None and holder.held:
                key = holder.beat_key()  # the beat we watch (its age by our own clock)
                if key != self._watched[0]:
                    self._watched = (key, self.mono())
            if holder is None:
                assert self.epoch is not None
                return self.epoch
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                message = holder.describe(self.clock())
                if wait > 0:
                    message += f"; gave up after waiting {wait:g}s"
                raise LeaseHeldError(message)
            time.sleep(min(remaining, backoff * random.uniform(0.5, 1.5)))
            backoff = min(backoff * 2, 0.05)

    def _check_copies(self) -> None:
        """``.lease`` and ``.epoch`` must be files (or absent): say so precisely, before
        a grant fails half-way on a folder a person or a tool put there."""
        for name in (LEASE_FILE, EPOCH_FILE, AUTHORITY_FILE):
            path = self.folder / name
            if path.is_dir():
                raise StorageError(
                    f"{path} is a folder; memidex keeps a writer-lease file there",
                    hint=f"move it aside (mv {path} {path}.aside); memidex writes it again")

    def _ensure_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn, self._file = self.authority.open()
        return self._conn

    def _drop_conn(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
        self._conn = None
        self._file = None

    def _try_acquire(self, busy: float, attempts: int = 3) -> Holder | None:
        """Grant the lease to us (None), or return the live holder."""
        conn = self._ensure_conn()
        conn.execute(f"PRAGMA busy_timeout = {int(busy * 1000)}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                self._drop_conn()
                raise storage_failure(exc, self.folder) or LeaseError(
                    f"writer authority database: {exc}") from None
            # SQLITE_BUSY: someone is inside a transaction; the lease counts as held.
            try:
                holder = read_holder(conn)
            except sqlite3.Error:
                holder = None
            return holder or Holder(0, "?", None, None, None, None, None, None)
        try:
            step("acquire.begun")
            if not same_file(self.authority.db, self._file):
                raise Unusable("replaced")
            holder = read_holder(conn)
            if holder is None:
                raise Unusable("no lease row")
            now = self.clock()
            mono = self.mono()
            kernel = self.kernel()
            watched, since = self._watched
            unchanged = mono - since if watched == holder.beat_key() else 0.0
            reason = holder.free_reason(now, self.ttl, mono=mono, kernel=kernel,
                                        unchanged_for=unchanged)
            if reason is None:
                conn.execute("ROLLBACK")
                return holder
            epoch = holder.epoch + 1
            token = os.urandom(16).hex()
            conn.execute(
                "UPDATE lease SET epoch = ?, token = ?, pid = ?, pid_start = ?, boot_id = ?, "
                "host = ?, heartbeat = ?, ttl = ?, acquired = ?, heartbeat_mono = ?, "
                "heartbeat_kernel = ? WHERE id = 1",
                (epoch, token, self.me.pid, self.me.start, self.me.boot_id, self.me.host,
                 now, self.ttl, now, mono, kernel),
            )
            atomic_write(self.folder / EPOCH_FILE, f"{epoch}\n".encode())
            self._write_lease_copy(epoch, now)
            step("acquire.copies")
            conn.execute("COMMIT")
        except Unusable:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self._drop_conn()
            if attempts <= 1:
                raise LeaseError("the writer authority database keeps being replaced",
                                 hint="another process is recreating it; try again") from None
            return self._try_acquire(busy, attempts - 1)
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self._drop_conn()
            if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
                return Holder(0, "?", None, None, None, None, None, None)
            raise storage_failure(exc, self.folder) or LeaseError(
                f"writer authority database is unusable: {exc}") from None
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        step("acquire.committed")
        self.epoch, self.token = epoch, token
        self.took_over = None if reason == "free" else reason
        self._last_beat = time.monotonic()
        return None

    def _write_lease_copy(self, epoch: int, now: float) -> None:
        data = {**self.me.as_dict(), "epoch": epoch, "heartbeat": round(now, 3),
                "expires": round(now + self.ttl, 3), "ttl": self.ttl}
        atomic_write(self.folder / LEASE_FILE, dump_json(data, indent=2), durable=False)

    # --- holding ---

    @property
    def held(self) -> bool:
        return self.epoch is not None and not self._lost.is_set()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def fenced_error(self, why: str) -> FencedError:
        return FencedError(f"writer lease lost: {why}; nothing it staged was applied")

    def lost_error(self) -> FencedError:
        """The fencing error for a lease the heartbeat found lost, saying who has it now."""
        why = f"epoch {self.epoch} is no longer current"
        try:
            if not same_file(self.authority.db, self._file):
                why = (f"the authority database of epoch {self.epoch} was deleted, "
                       "replaced or damaged")
            else:
                holder = read_holder(self._ensure_conn())
                if holder is not None and holder.epoch != self.epoch:
                    why = f"epoch {self.epoch} was superseded by epoch {holder.epoch}"
        except sqlite3.DatabaseError as exc:
            why = f"the authority database is unusable ({exc})"
        except LeaseError:
            pass
        return self.fenced_error(why)

    def _verify(self, conn: sqlite3.Connection, file_id: tuple[int, int] | None) -> None:
        """Inside a write transaction: raise FencedError unless we still hold the lease."""
        if self.epoch is None:
            raise LeaseError("the writer lease is not held")
        if not same_file(self.authority.db, file_id):
            self._lost.set()
            raise self.fenced_error(
                f"the authority database of epoch {self.epoch} was deleted, replaced or damaged")
        holder = read_holder(conn)
        if holder is None or holder.epoch != self.epoch or holder.token != self.token:
            self._lost.set()
            now = holder.epoch if holder is not None else "?"
            raise self.fenced_error(f"epoch {self.epoch} was superseded by epoch {now}")

    def _unusable(self, exc: sqlite3.DatabaseError) -> MemidexError:
        """The error for a failure inside the fence: the disk's (no space, I/O) as it is,
        anything else a lost lease (the authority database cannot be trusted)."""
        failure = storage_failure(exc, self.folder)
        if failure is not None:
            return failure
        self._lost.set()
        return self.fenced_error(f"the authority database is unusable ({exc})")

    @contextlib.contextmanager
    def fence(self) -> Iterator[Fenced]:
        """``BEGIN IMMEDIATE`` + verify epoch and token; commit on success, else roll back.

        Everything done inside happens only while this process provably holds the lease:
        a takeover needs the same write lock.
        """
        conn = self._ensure_conn()
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if is_busy(exc):
                raise LeaseError("writer authority database is locked by another process "
                                 f"for more than {self.busy_timeout:g}s") from None
            raise storage_failure(exc, self.folder) or self.fenced_error(
                f"the authority database is unusable ({exc})") from None
        try:
            step("write.begun")
            try:
                self._verify(conn, self._file)
            except sqlite3.DatabaseError as exc:
                raise self._unusable(exc) from None
            step("write.checked")
            try:
                yield Fenced(conn, self.epoch)
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                # A full disk at COMMIT: rolled back, the lease still ours in the file;
                # what was installed is rolled forward from the journal by the next writer.
                raise self._unusable(exc) from None
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def heartbeat(self, conn: sqlite3.Connection | None = None,
                  file_id: tuple[int, int] | None = None) -> bool:
        """One heartbeat; False (and the lease marked lost) when it is no longer ours."""
        if self.epoch is None or self._lost.is_set():
            return False
        if conn is None:
            conn, file_id = self._ensure_conn(), self._file
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if is_busy(exc) and time.monotonic() - self._last_beat < self.ttl:
                return True  # try again next beat
            self._lost.set()
            return False
        try:
            if not same_file(self.authority.db, file_id):
                raise Unusable("replaced")
            now = self.clock()
            cur = conn.execute("UPDATE lease SET heartbeat = ?, heartbeat_mono = ?, "
                               "heartbeat_kernel = ? WHERE id = 1 AND epoch = ? AND token = ?",
                               (now, self.mono(), self.kernel(), self.epoch, self.token))
            if cur.rowcount != 1:
                raise Unusable("superseded")
            with contextlib.suppress(OSError):
                self._write_lease_copy(self.epoch, now)
            conn.execute("COMMIT")
        except (Unusable, sqlite3.DatabaseError):
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self._lost.set()
            return False
        self._last_beat = time.monotonic()
        return True

    def start_heartbeat(self) -> None:
        if self._thread is not None or self.epoch is None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat_loop, name="memidex-lease-heartbeat",
                                        daemon=True)
        self._thread.start()

    def _beat_loop(self) -> None:
        try:
            conn = connect(self.authority.db, self.busy_timeout)
        except sqlite3.Error:
            self._lost.set()
            return
        try:
            while not self._stop.wait(self.ttl / 3):
                if not self.heartbeat(conn, self._file):
                    return
        finally:
            conn.close()

    def stop_heartbeat(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    # --- releasing ---

    def release(self) -> bool:
        """Clear the holder if it is still us; True when released. Never raises."""
        self.stop_heartbeat()
        if self.epoch is None:
            return False
        step("release.begun")
        released = False
        try:
            if not self._lost.is_set():
                conn = self._ensure_conn()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    ok = same_file(self.authority.db, self._file)
                    cur = conn.execute(
                        "UPDATE lease SET token = NULL, pid = NULL, pid_start = NULL, "
                        "boot_id = NULL, host = NULL, heartbeat = NULL, heartbeat_mono = NULL, "
                        "heartbeat_kernel = NULL "
                        "WHERE id = 1 "
                        "AND epoch = ? AND token = ?", (self.epoch, self.token)) if ok else None
                    released = cur is not None and cur.rowcount == 1
                    if released:
                        data = {"pid": None, "epoch": self.epoch,
                                "released": round(self.clock(), 3)}
                        with contextlib.suppress(OSError):
                            atomic_write(self.folder / LEASE_FILE, dump_json(data),
                                         durable=False)
                    conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
        except (sqlite3.Error, OSError, LeaseError):
            released = False
        finally:
            self.epoch = None
            self.token = None
            self._drop_conn()
        return released
