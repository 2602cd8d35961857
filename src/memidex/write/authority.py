"""The writer lease's authority database, ``.writer-authority.sqlite`` (``docs/lease.md``).

The only truth about the lease: one ``lease`` row (epoch, token, holder, heartbeat)
changed only inside ``BEGIN IMMEDIATE`` transactions, and the ``applied`` table of
committed write steps. When the file is missing or damaged it is recreated under a
file lock (``filelock``), seeded above every epoch still visible, and the old file is
moved aside, so a holder of the old file is fenced because its file is no longer the one on disk.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memidex.errors import (
    LeaseError,
    LeaseHeldError,
    StorageError,
    from_sqlite_error,
    sqlite_fault,
)
from memidex.plain import Frozen, set_field
from memidex.store.fsio import fsync_file, read_int, read_json, swap_into_place
from memidex.write.procs import boot_id, gone_reason, host_name, process_alive

__all__ = ["AUTHORITY_FILE", "EPOCH_FILE", "LEASE_FILE", "Authority", "Holder", "Unusable",
           "connect", "held_by", "is_busy", "lease_copy_epoch", "peek_holder", "read_holder",
           "same_file", "storage_failure"]


AUTHORITY_FILE = ".writer-authority.sqlite"
LEASE_FILE = ".lease"
EPOCH_FILE = ".epoch"
RECOVERY_LOCK = ".writer-authority.lock"
SCHEMA_VERSION = 1
_WAL_WRITE_LOCK_BYTE = 120  # SQLite unix VFS: UNIX_SHM_BASE + WAL_WRITE_LOCK
_MIN_DB_SIZE = 512  # an initialised database is at least one (smallest) page

def lease_copy_epoch(data: dict[str, Any] | None) -> int:
    """The epoch a ``.lease`` copy (as :func:`read_json` gave it) names; 0 when none."""
    value = data.get("epoch") if data else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def held_by(pid: int, epoch: int, heartbeat_age: float) -> str:
    """The one sentence that says who holds the lease (errors, ``doctor``, the daemon)."""
    return (f"writer lease is held by pid {pid} (epoch {epoch}, heartbeat "
            f"{heartbeat_age:.1f}s ago)")


# --- the authority database ----------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS lease (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    epoch INTEGER NOT NULL,
    token TEXT,
    pid INTEGER,
    pid_start INTEGER,
    boot_id TEXT,
    host TEXT,
    heartbeat REAL,
    ttl REAL,
    acquired REAL,
    heartbeat_mono REAL,
    heartbeat_kernel REAL
);
CREATE TABLE IF NOT EXISTS applied (
    step_id TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL,
    path TEXT NOT NULL,
    sha256 TEXT
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class Holder(Frozen):
    """The lease row as read from the authority DB."""

    epoch: int
    token: str | None
    pid: int | None
    pid_start: int | None
    boot_id: str | None
    host: str | None
    heartbeat: float | None
    ttl: float | None
    heartbeat_mono: float | None
    """The holder's ``time.monotonic()`` at its last beat: the machine's own clock since
    boot, shared by every process on it and never stepped — a wall clock that jumps (or a
    process whose wall clock is ahead) cannot make a live lease look stale."""
    heartbeat_kernel: float | None
    """The kernel's seconds since boot at the holder's last beat (``/proc/uptime``,
    :func:`memidex.write.procs.kernel_clock`): no process can fake it, so a process whose
    clock functions are faked (libfaketime moves the monotonic clock too) still sees a
    live holder fresh."""

    __slots__ = ("epoch", "token", "pid", "pid_start", "boot_id", "host", "heartbeat",
                 "ttl", "heartbeat_mono", "heartbeat_kernel")

    def __init__(self, epoch: int, token: str | None, pid: int | None,
                 pid_start: int | None, boot_id: str | None, host: str | None,
                 heartbeat: float | None, ttl: float | None,
                 heartbeat_mono: float | None = None,
                 heartbeat_kernel: float | None = None) -> None:
        set_field(self, "epoch", epoch)
        set_field(self, "token", token)
        set_field(self, "pid", pid)
        set_field(self, "pid_start", pid_start)
        set_field(self, "boot_id", boot_id)
        set_field(self, "host", host)
        set_field(self, "heartbeat", heartbeat)
        set_field(self, "ttl", ttl)
        set_field(self, "heartbeat_mono", heartbeat_mono)
        set_field(self, "heartbeat_kernel", heartbeat_kernel)

    @property
    def held(self) -> bool:
        return self.token is not None

    def alive(self) -> bool:
        return self.held and process_alive(self.pid, self.pid_start, self.boot_id, self.host)

    def free_reason(self, now: float, default_ttl: float, *, mono: float | None = None,
                    kernel: float | None = None,
                    unchanged_for: float = 0.0) -> str | None:
        """Why the lease can be taken (None while the holder is live and fresh).

        A heartbeat is stale when the wall clock AND — for a holder on this boot — the
        monotonic clock AND the kernel's time since boot all say it is older than the TTL
        (``mono``: the caller's ``time.monotonic()``; ``kernel``: its
        :func:`~memidex.write.procs.kernel_clock`), so no clock alone can expire a live
        lease: a wall clock stepped forward, a process whose wall clock runs ahead, or one
        whose clock functions are all faked (libfaketime) still sees a fresh beat; a
        suspended machine (the kernel's count goes on, the monotonic clock does not) too.
        Or when the caller itself watched the same beat for longer than the TTL
        (``unchanged_for``, by its own monotonic clock), which needs no clock of the
        holder's at all."""
        if not self.held:
            return "free"
        gone = gone_reason(self.pid, self.pid_start, self.boot_id, self.host)
        if gone is not None:
            return _GONE[gone]
        ttl = self.ttl if self.ttl is not None else default_ttl
        if unchanged_for > ttl:
            return "stale heartbeat"
        wall_stale = self.heartbeat is None or now - self.heartbeat > ttl
        if not wall_stale:
            return None
        if self.boot_id != boot_id() or self.boot_id == "":
            return "stale heartbeat"  # another boot or host: its clocks mean nothing here
        if _fresh(mono, self.heartbeat_mono, ttl) or _fresh(kernel, self.heartbeat_kernel, ttl):
            return None
        return "stale heartbeat"

    def beat_key(self) -> tuple[int, str | None, float | None, float | None]:
        """What changes with every heartbeat: a caller that sees the same key for longer
        than the TTL has watched the holder stop."""
        return (self.epoch, self.token, self.heartbeat, self.heartbeat_mono)

    def describe(self, now: float) -> str:
        if self.pid is None:
            return f"writer lease is held by another process (epoch {self.epoch})"
        age = max(0.0, now - self.heartbeat) if self.heartbeat is not None else float("nan")
        text = held_by(self.pid, self.epoch, age)
        if self.host and self.host != host_name():
            text += f" on host {self.host}"
        return text


def _fresh(now: float | None, beat: float | None, ttl: float) -> bool:
    """Whether one clock shared by holder and caller says the beat is at most ``ttl`` old.
    A beat ahead of ``now`` says the two did not read the same clock (one of them faked
    it): no evidence either way."""
    if now is None or beat is None:
        return False
    return -0.5 <= now - beat <= ttl


_GONE = {"rebooted": "holder's machine rebooted", "dead": "holder is dead",
         "reused": "holder's pid was reused"}
_HOLDER_COLUMNS = "epoch, token, pid, pid_start, boot_id, host, heartbeat, ttl"


_LATER_COLUMNS = ("heartbeat_mono", "heartbeat_kernel")
"""Columns of the lease table an earlier memidex did not make (in the order added); an
authority DB made before one gains it when a writer opens it (:meth:`Authority.open`)."""


def _missing_columns(conn: sqlite3.Connection) -> list[str]:
    have = {row[1] for row in conn.execute("PRAGMA table_info(lease)").fetchall()}
    return [name for name in _LATER_COLUMNS if name not in have]


def read_holder(conn: sqlite3.Connection) -> Holder | None:
    missing = _missing_columns(conn)
    later = ", ".join("NULL" if name in missing else name for name in _LATER_COLUMNS)
    row = conn.execute(f"SELECT {_HOLDER_COLUMNS}, {later} FROM lease WHERE id = 1").fetchone()
    return Holder(*row) if row is not None else None


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite said the database is locked by another connection (its result
    code, never its message)."""
    return sqlite_fault(exc) == "busy"


def storage_failure(exc: BaseException, folder: Path) -> StorageError | None:
    """The :class:`StorageError` for a SQLite error that is the disk's fault — full or an
    I/O error (:func:`memidex.errors.from_sqlite_error`) — else None. Such a file is not
    damaged: it must not be recreated, and doctor must not call it damaged."""
    return from_sqlite_error(exc, folder)


class Unusable(Exception):
    """The authority DB is missing or damaged (internal; triggers a safe recreation)."""


def connect(db: Path, busy_timeout: float, *, readonly: bool = False) -> sqlite3.Connection:
    mode = "ro" if readonly else "rw"
    conn = sqlite3.connect(f"file:{quote(str(db))}?mode={mode}", uri=True,
                           timeout=busy_timeout, isolation_level=None,
                           check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        if not readonly:
            conn.execute("PRAGMA synchronous = FULL")
    except BaseException:
        conn.close()
        raise
    return conn


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def same_file(path: Path, file_id: tuple[int, int] | None) -> bool:
    """Whether ``path`` is still the DB file we opened, and not cut short (``stat`` only)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    return (st.st_dev, st.st_ino) == file_id and st.st_size >= _MIN_DB_SIZE


class Authority:
    """Opening (and, when needed, safely recreating) one folder's authority DB.

    Nothing here opens the DB file except SQLite: POSIX locks belong to the process, and
    closing any other descriptor of the file drops the locks SQLite holds through its
    own, so another process would believe it is the last connection and delete the
    ``-wal`` under us. Identity checks use ``stat`` only.
    """

    def __init__(self, folder: Path, *, busy_timeout: float,
                 epoch_floor: Callable[[], int] | None = None) -> None:
        self.folder = folder
        self.db = folder / AUTHORITY_FILE
        self.busy_timeout = busy_timeout
        self.epoch_floor = epoch_floor

    def open(self) -> tuple[sqlite3.Connection, tuple[int, int]]:
        """A validated connection and the (dev, inode) of the file it opened."""
        for _ in range(5):
            try:
                return self._open_existing()
            except Unusable:
                self._recreate()
        raise LeaseError(f"cannot open the writer authority database {self.db}",
                         hint="check the knowledge folder's permissions")

    def _open_existing(self) -> tuple[sqlite3.Connection, tuple[int, int]]:
        before = _file_id(self.db)
        if before is None:
            raise Unusable("missing")
        try:
            conn = connect(self.db, self.busy_timeout)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
                raise
            raise storage_failure(exc, self.folder) or Unusable(str(exc)) from None
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()
            holder = read_holder(conn)
            if mode is None or mode[0] != "wal" or holder is None:
                raise Unusable("schema")
            for name in _missing_columns(conn):  # made by an earlier memidex
                conn.execute(f"ALTER TABLE lease ADD COLUMN {name} REAL")
        except sqlite3.DatabaseError as exc:
            conn.close()
            if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
                raise
            raise storage_failure(exc, self.folder) or Unusable(str(exc)) from None
        except Unusable:
            conn.close()
            raise
        if _file_id(self.db) != before:
            conn.close()
            raise Unusable("replaced while opening")
        return conn, before

    def _recreate(self) -> None:
        """Create the authority DB, or replace a damaged one, under an exclusive file lock.

        The recovery lock is an ordinary OS lock on its own file, so it is filelock's
        (``flock`` on Unix, ``LockFileEx`` on Windows). The lock file is never deleted
        (``preserve_lock_file``; filelock 3.20.4–3.29.4 unlinked it on release, which let
        two processes hold it at once), and filelock's soft-file fallback is off with it:
        a marker file would outlive a crashed holder.
        """
        from filelock import FileLock, Timeout

        lock = FileLock(self.folder / RECOVERY_LOCK, timeout=max(self.busy_timeout, 1.0),
                        poll_interval=0.02, preserve_lock_file=True, is_singleton=False)
        try:
            lock.acquire()
        except Timeout:
            raise LeaseHeldError(
                "writer authority database is being recreated by another process") from None
        try:
            try:
                conn, _ = self._open_existing()
                conn.close()
                return  # someone else repaired it meanwhile
            except Unusable:
                pass
            self._replace_db()
        finally:
            lock.release()  # unlocks; the lock file stays for the next recovery

    def _seed(self, salvaged: int) -> int:
        seen = [
            read_int(self.folder / EPOCH_FILE),
            lease_copy_epoch(read_json(self.folder / LEASE_FILE)),
            salvaged,
            self.epoch_floor() if self.epoch_floor is not None else 0,
        ]
        return max(seen)

    def _salvage(self) -> tuple[bool, int]:
        """Whether an old DB file exists, and the highest epoch still readable in it."""
        if not self.db.exists():
            return False, 0
        best = 0
        with contextlib.suppress(sqlite3.Error, OSError):
            conn = sqlite3.connect(f"file:{quote(str(self.db))}?mode=ro", uri=True,
                                   timeout=0.1)
            try:
                for sql in ("SELECT max(epoch) FROM lease", "SELECT max(epoch) FROM applied"):
                    with contextlib.suppress(sqlite3.Error):
                        row = conn.execute(sql).fetchone()
                        if row and isinstance(row[0], int):
                            best = max(best, row[0])
            finally:
                conn.close()
        return True, best

    @contextlib.contextmanager
    def _old_write_lock(self) -> Iterator[None]:
        """Hold the old database's WAL write lock while it is swapped out.

        A holder of the old file may be inside its fence transaction; its check passed
        and it is about to install. The swap must wait for that transaction to end, just
        as a takeover would; afterwards the holder's next fence sees another file. The
        lock is SQLite's own: byte 120 of the ``-shm`` file (``WAL_WRITE_LOCK``), taken
        with ``fcntl`` like the unix VFS does. Nothing else in this process has that
        file open (no SQLite connection could open the damaged database).

        This one stays ``fcntl`` and not filelock: it must be the very byte-range POSIX
        lock SQLite takes (filelock takes a whole-file ``flock`` on a file of its own,
        which SQLite would never see).
        """
        shm = Path(f"{self.db}-shm")
        try:
            fd = os.open(shm, os.O_RDWR)
        except OSError:
            yield  # no -shm: no connection can be inside a transaction on the old file
            return
        try:
            deadline = time.monotonic() + self.busy_timeout
            while True:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _WAL_WRITE_LOCK_BYTE)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() > deadline:
                        raise LeaseHeldError(
                            "writer lease is held by a process still writing to the old "
                            "authority database") from None
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)

    def _replace_db(self) -> None:
        try:
            self._replace_db_now()
        except sqlite3.Error as exc:
            failure = storage_failure(exc, self.folder)
            if failure is None:
                raise LeaseError(f"cannot create the writer authority database {self.db} "
                                 f"({exc})", hint="check the knowledge folder") from None
            raise failure from None

    def _replace_db_now(self) -> None:
        existed, salvaged = self._salvage()
        seed = self._seed(salvaged)
        evidence = existed or seed > 0 or (self.folder / LEASE_FILE).exists()
        if evidence:
            seed += 1  # above every epoch that may have been granted and not yet copied
        stamp = time.strftime("%Y%m%dT%H%M%S")
        tmp = self.folder / f"{AUTHORITY_FILE}.new-{os.urandom(4).hex()}"
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("INSERT INTO lease (id, epoch) VALUES (1, ?)", (seed,))
                reason = "new" if not evidence else ("damaged" if existed else "missing")
                conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [
                    ("created", stamp), ("created_because", reason), ("seed_epoch", str(seed)),
                ])
            finally:
                conn.close()
            fsync_file(tmp)
            with self._old_write_lock():
                if existed:
                    aside = self.folder / (f"{AUTHORITY_FILE}.damaged-{stamp}-"
                                           f"{os.urandom(3).hex()}")
                    swap_into_place(self.db, aside)
                for suffix in ("-wal", "-shm", "-journal"):
                    # Never leave an old -wal beside a recreated file: it would be replayed.
                    Path(f"{self.db}{suffix}").unlink(missing_ok=True)
                swap_into_place(tmp, self.db)
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{tmp}{suffix}").unlink(missing_ok=True)


# --- doctor ----------------------------------------------------------------------------


def peek_holder(db: Path) -> Holder | None:
    """Read the lease row without writing anything.

    Only SQLite opens the DB file: closing any other descriptor of it would drop this
    process's POSIX locks on it (and let another process delete a live ``-wal``).

    With no ``-wal`` beside it nothing is pending in a log, so the file is read as
    immutable (no ``-wal``/``-shm`` get created); otherwise a read-only connection.
    """
    immutable = not Path(f"{db}-wal").exists()
    for attempt in ("immutable", "ro") if immutable else ("ro",):
        flag = "&immutable=1" if attempt == "immutable" else ""
        conn = sqlite3.connect(f"file:{quote(str(db))}?mode=ro{flag}", uri=True, timeout=1.0)
        try:
            return read_holder(conn)
        except sqlite3.DatabaseError:
            if attempt == "ro" or not Path(f"{db}-wal").exists():
                raise  # a torn read during a checkpoint only happens with a -wal present
        finally:
            conn.close()
    return None
