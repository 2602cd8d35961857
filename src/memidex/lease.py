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

The numbered protocol steps (:data:`STEPS`) call :func:`step`, which does nothing unless
a test installed a hook with :func:`set_step_hook`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import random
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memidex.errors import FencedError, LeaseError, LeaseHeldError
from memidex.store import swap_into_place

__all__ = [
    "AUTHORITY_FILE",
    "EPOCH_FILE",
    "LEASE_FILE",
    "STEPS",
    "Holder",
    "Lease",
    "ProcessId",
    "atomic_write",
    "current_process",
    "lease_status",
    "pid_start_time",
    "process_alive",
    "read_json",
    "set_step_hook",
    "step",
]

AUTHORITY_FILE = ".writer-authority.sqlite"
LEASE_FILE = ".lease"
EPOCH_FILE = ".epoch"
RECOVERY_LOCK = ".writer-authority.lock"
SCHEMA_VERSION = 1
_WAL_WRITE_LOCK_BYTE = 120  # SQLite unix VFS: UNIX_SHM_BASE + WAL_WRITE_LOCK
_MIN_DB_SIZE = 512  # an initialised database is at least one (smallest) page

STEPS: tuple[str, ...] = (
    "acquire.begun",      # 1  BEGIN IMMEDIATE held for a grant
    "acquire.copies",     # 2  .epoch/.lease replaced, grant not committed
    "acquire.committed",  # 3  grant committed
    "recover.cleaned",    # 4  staging of older epochs removed, journal not replayed
    "journal.written",    # 5  change set durable in queue/journal/
    "write.staged",       # 6  the staged file is written and fsynced
    "write.begun",        # 7  BEGIN IMMEDIATE held (the fence)
    "write.checked",      # 8  epoch and token re-read and still ours
    "write.installed",    # 9  os.replace done and folder fsynced
    "write.recorded",     # 10 step inserted into `applied`, not committed
    "write.committed",    # 11 committed
    "journal.marked",     # 12 step marked done in the journal
    "journal.finished",   # 13 change set removed from the journal
    "release.begun",      # 14 about to clear the holder
)
"""The numbered protocol steps, in the order one session passes them."""

_hook: Callable[[str], None] | None = None


def set_step_hook(hook: Callable[[str], None] | None) -> None:
    """Install (or remove) a test hook called with each step name. Tests only."""
    global _hook
    _hook = hook


def step(name: str) -> None:
    """Mark protocol step ``name``; free unless a test hook is installed."""
    if _hook is not None:
        _hook(name)


# --- processes -----------------------------------------------------------------------


@cache
def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return ""


@cache
def host_name() -> str:
    return socket.gethostname()


def pid_start_time(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (start time in clock ticks); None if dead or a zombie."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    rest = data[data.rindex(b")") + 2 :].split()
    if rest[0] in (b"Z", b"X"):
        return None
    return int(rest[19])


@dataclass(frozen=True, slots=True)
class ProcessId:
    """Who a process is, in a way that survives pid reuse and reboots."""

    pid: int
    start: int | None
    boot_id: str
    host: str

    def as_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "pid_start": self.start, "boot_id": self.boot_id,
                "host": self.host}


def current_process() -> ProcessId:
    pid = os.getpid()
    return ProcessId(pid, pid_start_time(pid), boot_id(), host_name())


def process_alive(pid: int | None, start: int | None, boot: str | None,
                  host: str | None) -> bool:
    """Whether that process still runs. On another host we cannot tell: assume alive."""
    if pid is None:
        return False
    if host is not None and host != host_name():
        return True
    if boot and boot_id() and boot != boot_id():
        return False
    now = pid_start_time(pid)
    if now is None:
        return False
    return start is None or now == start


# --- files ---------------------------------------------------------------------------


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to a unique temp file beside ``path`` and swap it into place.

    ``durable`` (the default) fsyncs the file before the swap; informational copies
    (``.lease``) skip that and are still never seen half-written.
    """
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
        os.close(fd)
        fd = -1
        swap_into_place(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise


def _read_int(path: Path) -> int:
    try:
        return max(0, int(path.read_text(encoding="utf-8").strip()))
    except (OSError, ValueError, UnicodeDecodeError):
        return 0


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from a small state file, or None if it is missing or not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _lease_copy_epoch(path: Path) -> int:
    data = read_json(path)
    value = data.get("epoch") if data else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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
    acquired REAL
);
CREATE TABLE IF NOT EXISTS applied (
    step_id TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL,
    path TEXT NOT NULL,
    sha256 TEXT
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Holder:
    """The lease row as read from the authority DB."""

    epoch: int
    token: str | None
    pid: int | None
    pid_start: int | None
    boot_id: str | None
    host: str | None
    heartbeat: float | None
    ttl: float | None

    @property
    def held(self) -> bool:
        return self.token is not None

    def alive(self) -> bool:
        return self.held and process_alive(self.pid, self.pid_start, self.boot_id, self.host)

    def free_reason(self, now: float, default_ttl: float) -> str | None:
        """Why the lease can be taken (None while the holder is live and fresh)."""
        if not self.held:
            return "free"
        ttl = self.ttl if self.ttl is not None else default_ttl
        if self.heartbeat is None or now - self.heartbeat > ttl:
            return "stale heartbeat"
        if self.host is not None and self.host != host_name():
            return None
        if self.boot_id and boot_id() and self.boot_id != boot_id():
            return "holder's machine rebooted"
        start = pid_start_time(self.pid) if self.pid is not None else None
        if start is None:
            return "holder is dead"
        if self.pid_start is not None and start != self.pid_start:
            return "holder's pid was reused"
        return None

    def describe(self, now: float) -> str:
        if self.pid is None:
            return f"writer lease is held by another process (epoch {self.epoch})"
        age = max(0.0, now - self.heartbeat) if self.heartbeat is not None else float("nan")
        text = (f"writer lease is held by pid {self.pid} (epoch {self.epoch}, "
                f"heartbeat {age:.1f}s ago)")
        if self.host and self.host != host_name():
            text += f" on host {self.host}"
        return text


_HOLDER_COLUMNS = "epoch, token, pid, pid_start, boot_id, host, heartbeat, ttl"


def _read_holder(conn: sqlite3.Connection) -> Holder | None:
    row = conn.execute(f"SELECT {_HOLDER_COLUMNS} FROM lease WHERE id = 1").fetchone()
    return Holder(*row) if row is not None else None


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


class _Unusable(Exception):
    """The authority DB is missing or damaged (internal; triggers a safe recreation)."""


def _connect(db: Path, busy_timeout: float, *, readonly: bool = False) -> sqlite3.Connection:
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


def _same_file(path: Path, file_id: tuple[int, int] | None) -> bool:
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
            except _Unusable:
                self._recreate()
        raise LeaseError(f"cannot open the writer authority database {self.db}",
                         hint="check the knowledge folder's permissions")

    def _open_existing(self) -> tuple[sqlite3.Connection, tuple[int, int]]:
        before = _file_id(self.db)
        if before is None:
            raise _Unusable("missing")
        try:
            conn = _connect(self.db, self.busy_timeout)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
                raise
            raise _Unusable(str(exc)) from None
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()
            holder = _read_holder(conn)
            if mode is None or mode[0] != "wal" or holder is None:
                raise _Unusable("schema")
        except sqlite3.DatabaseError as exc:
            conn.close()
            if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
                raise
            raise _Unusable(str(exc)) from None
        except _Unusable:
            conn.close()
            raise
        if _file_id(self.db) != before:
            conn.close()
            raise _Unusable("replaced while opening")
        return conn, before

    def _recreate(self) -> None:
        """Create the authority DB, or replace a damaged one, under an exclusive flock."""
        lock_fd = os.open(self.folder / RECOVERY_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + max(self.busy_timeout, 1.0)
            while True:
                try:
                    fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise LeaseHeldError(
                            "writer authority database is being recreated by another process"
                        ) from None
                    time.sleep(0.02)
            try:
                conn, _ = self._open_existing()
                conn.close()
                return  # someone else repaired it meanwhile
            except _Unusable:
                pass
            self._replace_db()
        finally:
            os.close(lock_fd)  # closing releases the flock; the lock file is never deleted

    def _seed(self, salvaged: int) -> int:
        seen = [
            _read_int(self.folder / EPOCH_FILE),
            _lease_copy_epoch(self.folder / LEASE_FILE),
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
        existed, salvaged = self._salvage()
        seed = self._seed(salvaged)
        evidence = existed or seed > 0 or (self.folder / LEASE_FILE).exists()
        if evidence:
            seed += 1  # above every epoch that may have been granted and not yet copied
        stamp = time.strftime("%Y%m%dT%H%M%S")
        tmp = self.folder / f"{AUTHORITY_FILE}.new-{secrets.token_hex(4)}"
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
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            with self._old_write_lock():
                if existed:
                    aside = self.folder / (f"{AUTHORITY_FILE}.damaged-{stamp}-"
                                           f"{secrets.token_hex(3)}")
                    swap_into_place(self.db, aside)
                for suffix in ("-wal", "-shm", "-journal"):
                    # Never leave an old -wal beside a recreated file: it would be replayed.
                    Path(f"{self.db}{suffix}").unlink(missing_ok=True)
                swap_into_place(tmp, self.db)
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{tmp}{suffix}").unlink(missing_ok=True)


# --- the lease -----------------------------------------------------------------------


class Lease:
    """One process's claim on a knowledge folder's writer lease."""

    def __init__(self, folder: Path, *, ttl: float, clock: Callable[[], float] = time.time,
                 busy_timeout: float = 5.0,
                 epoch_floor: Callable[[], int] | None = None) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.folder = folder
        self.ttl = ttl
        self.clock = clock
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

    # --- acquiring ---

    def acquire(self, *, wait: float, maintenance: bool = False) -> int:
        """Take the lease (waiting up to ``wait`` seconds); returns the new epoch.

        ``maintenance`` refuses at once when a live holder has it. Raises
        :class:`LeaseHeldError` (``writer lease is held by pid N ...``) otherwise.
        """
        if self.epoch is not None:
            raise LeaseError("this lease object is already held")
        self.folder.mkdir(parents=True, exist_ok=True)
        wait = 0.0 if maintenance else max(0.0, wait)
        deadline = time.monotonic() + wait
        backoff = 0.005
        while True:
            remaining = deadline - time.monotonic()
            busy = min(self.busy_timeout, max(remaining, 1.0 if maintenance else 0.25))
            holder = self._try_acquire(busy)
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
            if not _is_busy(exc):
                self._drop_conn()
                raise LeaseError(f"writer authority database: {exc}") from None
            # SQLITE_BUSY: someone is inside a transaction; the lease counts as held.
            try:
                holder = _read_holder(conn)
            except sqlite3.Error:
                holder = None
            return holder or Holder(0, "?", None, None, None, None, None, None)
        try:
            step("acquire.begun")
            if not _same_file(self.authority.db, self._file):
                raise _Unusable("replaced")
            holder = _read_holder(conn)
            if holder is None:
                raise _Unusable("no lease row")
            now = self.clock()
            reason = holder.free_reason(now, self.ttl)
            if reason is None:
                conn.execute("ROLLBACK")
                return holder
            epoch = holder.epoch + 1
            token = secrets.token_hex(16)
            conn.execute(
                "UPDATE lease SET epoch = ?, token = ?, pid = ?, pid_start = ?, boot_id = ?, "
                "host = ?, heartbeat = ?, ttl = ?, acquired = ? WHERE id = 1",
                (epoch, token, self.me.pid, self.me.start, self.me.boot_id, self.me.host,
                 now, self.ttl, now),
            )
            atomic_write(self.folder / EPOCH_FILE, f"{epoch}\n".encode())
            self._write_lease_copy(epoch, now)
            step("acquire.copies")
            conn.execute("COMMIT")
        except _Unusable:
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
            if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
                return Holder(0, "?", None, None, None, None, None, None)
            raise LeaseError(f"writer authority database is unusable: {exc}") from None
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
        data = {
            "pid": self.me.pid, "host": self.me.host, "epoch": epoch,
            "heartbeat": round(now, 3), "expires": round(now + self.ttl, 3),
            "ttl": self.ttl, "boot_id": self.me.boot_id, "pid_start": self.me.start,
        }
        atomic_write(self.folder / LEASE_FILE,
                     (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(),
                     durable=False)

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
            if not _same_file(self.authority.db, self._file):
                why = (f"the authority database of epoch {self.epoch} was deleted, "
                       "replaced or damaged")
            else:
                holder = _read_holder(self._ensure_conn())
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
        if not _same_file(self.authority.db, file_id):
            self._lost.set()
            raise self.fenced_error(
                f"the authority database of epoch {self.epoch} was deleted, replaced or damaged")
        holder = _read_holder(conn)
        if holder is None or holder.epoch != self.epoch or holder.token != self.token:
            self._lost.set()
            now = holder.epoch if holder is not None else "?"
            raise self.fenced_error(f"epoch {self.epoch} was superseded by epoch {now}")

    @contextlib.contextmanager
    def fence(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` + verify epoch and token; commit on success, else roll back.

        Everything done inside happens only while this process provably holds the lease:
        a takeover needs the same write lock.
        """
        conn = self._ensure_conn()
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise LeaseError("writer authority database is locked by another process "
                                 f"for more than {self.busy_timeout:g}s") from None
            raise self.fenced_error(f"the authority database is unusable ({exc})") from None
        try:
            step("write.begun")
            try:
                self._verify(conn, self._file)
            except sqlite3.DatabaseError as exc:
                self._lost.set()
                raise self.fenced_error(f"the authority database is unusable ({exc})") from None
            step("write.checked")
            try:
                yield conn
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                self._lost.set()
                raise self.fenced_error(f"the authority database is unusable ({exc})") from None
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
            if _is_busy(exc) and time.monotonic() - self._last_beat < self.ttl:
                return True  # try again next beat
            self._lost.set()
            return False
        try:
            if not _same_file(self.authority.db, file_id):
                raise _Unusable("replaced")
            now = self.clock()
            cur = conn.execute("UPDATE lease SET heartbeat = ? WHERE id = 1 AND epoch = ? "
                               "AND token = ?", (now, self.epoch, self.token))
            if cur.rowcount != 1:
                raise _Unusable("superseded")
            with contextlib.suppress(OSError):
                self._write_lease_copy(self.epoch, now)
            conn.execute("COMMIT")
        except (_Unusable, sqlite3.DatabaseError):
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
            conn = _connect(self.authority.db, self.busy_timeout)
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
                    ok = _same_file(self.authority.db, self._file)
                    cur = conn.execute(
                        "UPDATE lease SET token = NULL, pid = NULL, pid_start = NULL, "
                        "boot_id = NULL, host = NULL, heartbeat = NULL WHERE id = 1 "
                        "AND epoch = ? AND token = ?", (self.epoch, self.token)) if ok else None
                    released = cur is not None and cur.rowcount == 1
                    if released:
                        data = {"pid": None, "epoch": self.epoch,
                                "released": round(self.clock(), 3)}
                        with contextlib.suppress(OSError):
                            atomic_write(self.folder / LEASE_FILE,
                                         (json.dumps(data, sort_keys=True) + "\n").encode(),
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


# --- doctor ----------------------------------------------------------------------------


def _peek_holder(db: Path) -> Holder | None:
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
            return _read_holder(conn)
        except sqlite3.DatabaseError:
            if attempt == "ro" or not Path(f"{db}-wal").exists():
                raise  # a torn read during a checkpoint only happens with a -wal present
        finally:
            conn.close()
    return None


def lease_status(folder: Path, *, clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """What ``doctor`` reports about the lease. Never takes the lease, never writes."""
    from memidex.journal import Journal

    db = folder / AUTHORITY_FILE
    out: dict[str, Any] = {
        "authority": "missing", "held": False, "pid": None, "host": None, "epoch": None,
        "heartbeat_age_seconds": None, "alive": None, "pending_journal": 0,
        "epoch_file": _read_int(folder / EPOCH_FILE) or None,
    }
    holder: Holder | None = None
    if db.exists():
        try:
            holder = _peek_holder(db)
            out["authority"] = "ok" if holder is not None else "damaged"
        except sqlite3.OperationalError as exc:
            out["authority"] = "locked" if _is_busy(exc) else "damaged"
        except sqlite3.DatabaseError:
            out["authority"] = "damaged"
        except OSError as exc:
            out["authority"] = f"unreadable: {exc.strerror}"
    if holder is None:
        copy = read_json(folder / LEASE_FILE)
        if copy is not None and isinstance(copy.get("pid"), int):
            hb = copy.get("heartbeat")
            holder = Holder(_lease_copy_epoch(folder / LEASE_FILE), "?", copy["pid"],
                            copy.get("pid_start"), copy.get("boot_id"), copy.get("host"),
                            hb if isinstance(hb, int | float) else None, copy.get("ttl"))
    if holder is not None:
        now = clock()
        out["epoch"] = holder.epoch
        if holder.held:
            out.update(
                held=True, pid=holder.pid, host=holder.host,
                heartbeat_age_seconds=(round(now - holder.heartbeat, 3)
                                       if holder.heartbeat is not None else None),
                alive=holder.alive(),
                stale=holder.free_reason(now, holder.ttl or 30.0) is not None,
            )
    journal = Journal(folder / "queue")
    out["pending_journal"] = journal.count_pending()
    out["abandoned_journal"] = journal.count_abandoned()
    return out
