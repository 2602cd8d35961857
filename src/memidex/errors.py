"""The one exception tree of memidex.

Every user-facing failure is a :class:`MemidexError`. Each class carries the exit
code it maps to (SPEC §7) and an optional hint; the CLI turns them into a single
``error:`` line in exactly one place (``memidex.cli.main``), the MCP server into a tool
error. Nothing else in the package decides exit codes.

Lower-level errors are mapped here, once, by their numbers — never by their message:
:func:`from_os_error` by ``errno`` and :func:`sqlite_fault` / :func:`from_sqlite_error` by
SQLite's result codes. The CLI, the MCP server and the services all call them, so the
same fault is the same error everywhere (a full disk is a :class:`NoSpaceError`).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Sequence
from pathlib import Path

from memidex.plain import Frozen, set_field

__all__ = [
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_USAGE",
    "EXIT_LEASE",
    "EXIT_INVALID",
    "EXIT_INTERRUPTED",
    "LANDED_NOTE",
    "AmbiguousIdError",
    "ConfigError",
    "ConflictError",
    "FencedError",
    "IndexDamagedError",
    "IndexLockedError",
    "IndexUnavailableError",
    "InvalidInputError",
    "LeaseError",
    "LeaseHeldError",
    "MemidexError",
    "NoSpaceError",
    "NotFoundError",
    "Problem",
    "ProblemsFound",
    "RecordError",
    "StateDamagedError",
    "StorageError",
    "UnsafePathError",
    "UsageError",
    "from_os_error",
    "from_sqlite_error",
    "sqlite_fault",
]

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_LEASE = 3
EXIT_INVALID = 4
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + 2, as a shell reports it


class Problem(Frozen):
    """One problem in one file: where it is and a one-line reason."""

    __slots__ = ("path", "line", "reason")
    path: str
    line: int
    reason: str

    def __init__(self, path: str, line: int, reason: str) -> None:
        set_field(self, "path", path)
        set_field(self, "line", line)
        set_field(self, "reason", reason)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "reason": self.reason}


class MemidexError(Exception):
    """Base of every error memidex reports to a user."""

    exit_code: int = EXIT_INVALID
    default_hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = self.default_hint if hint is None else hint


class UsageError(MemidexError):
    """The command was called wrongly (bad flag combination, unknown value)."""

    exit_code = EXIT_USAGE
    default_hint = "see --help"


class NotFoundError(UsageError):
    """A record, file or folder that was asked for does not exist."""

    default_hint = "`memidex knowledge list` shows the records there are"


class AmbiguousIdError(UsageError):
    """An id prefix matches more than one record."""

    default_hint = "give more characters of the id"


class InvalidInputError(MemidexError):
    """Input that cannot be accepted: a bad record, run file, policy or config."""

    exit_code = EXIT_INVALID


class RecordError(InvalidInputError):
    """A record or policy file that does not parse or validate.

    Carries every problem found in the file; the message names the first.
    """

    default_hint = "fix the file by hand; memidex never rewrites it"

    def __init__(self, problems: Sequence[Problem], *, hint: str | None = None) -> None:
        if not problems:
            raise ValueError("RecordError needs at least one problem")
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{problems[0]}{more}", hint=hint)
        self.problems = tuple(problems)

    @property
    def problem(self) -> Problem:
        return self.problems[0]


class ConfigError(InvalidInputError):
    """memidex.toml or an environment variable has a bad value."""

    default_hint = "see docs/configuration.md"


class StateDamagedError(InvalidInputError):
    """A local state file of memidex's own (under the state folder or ``queue/``) that
    cannot be read back: never taken for an absent one."""

    default_hint = ("it is local state, derived from the runs: move it aside and run the "
                    "command again")


class UnsafePathError(InvalidInputError):
    """An id, anchor or path would escape the knowledge folder."""

    default_hint = "ids and paths must stay inside the knowledge folder"


class LeaseError(MemidexError):
    """Anything about the writer lease (SPEC §6)."""

    exit_code = EXIT_LEASE


class LeaseHeldError(LeaseError):
    """Another live process holds the writer lease."""

    default_hint = "wait for it to finish, or stop the daemon holding it"


class FencedError(LeaseError):
    """This writer lost its lease; nothing it staged was applied."""

    default_hint = "another writer took over; run the command again"


class ConflictError(MemidexError):
    """A record changed on disk between reading and writing it."""

    exit_code = EXIT_LEASE
    default_hint = "someone edited the record meanwhile; run the command again"


class IndexUnavailableError(MemidexError):
    """The derived index is missing, locked or damaged (callers fall back to a scan)."""

    exit_code = EXIT_PROBLEMS
    default_hint = "run `memidex knowledge rebuild-index`"


class IndexLockedError(IndexUnavailableError):
    """The index is locked by another process or read-only; readers scan the records."""


class IndexDamagedError(IndexUnavailableError):
    """The index file is damaged (SQLite said so); readers scan the records."""


class StorageError(MemidexError):
    """The disk refused a write (full, I/O error, permissions); nothing partial was left."""

    exit_code = EXIT_PROBLEMS
    default_hint = "free space or fix the disk, then run the command again"


class NoSpaceError(StorageError):
    """The disk (or quota) is full: nothing was written or the write was undone; every
    record stays at its old version, and the command works again once there is space."""

    default_hint = ("free some space on that disk, then run the command again; no record "
                    "was changed")


class ProblemsFound(MemidexError):
    """A check or doctor found problems (exit 1); the report was already printed."""

    exit_code = EXIT_PROBLEMS


# --- one map from lower-level errors ---------------------------------------------------

_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


LANDED_NOTE = "memidex_landed"
"""The attribute the writer sets on an ``OSError`` raised after a change set landed (its
records in place, its ledger entry or journal marks not written): what landed."""


def from_os_error(exc: OSError) -> StorageError:
    """The :class:`StorageError` (or :class:`NoSpaceError`) for an ``OSError``, by its
    ``errno``, with a hint that fits it (not "free space" for a folder in the way). After
    a change set landed (:data:`LANDED_NOTE`) it says so, and that the next write finishes
    it — never that no record was changed."""
    landed = getattr(exc, LANDED_NOTE, None)
    if isinstance(landed, str):
        plain = _from_os_error(exc)
        first = ("free some space, then" if isinstance(plain, NoSpaceError) else
                 "fix the disk, then")
        return type(plain)(f"{plain.message} {landed}",
                           hint=f"{first} run any write (e.g. `memidex daemon --once`): it "
                           "finishes the change set from its journal; nothing is lost")
    return _from_os_error(exc)


def _from_os_error(exc: OSError) -> StorageError:
    where = f": {exc.filename}" if exc.filename else ""
    code = exc.errno
    if code in _SPACE_ERRNOS:
        return NoSpaceError(f"no space left on the device{where}")
    if code == errno.EISDIR:
        return StorageError(f"{exc.filename or 'a path'} is a folder where memidex writes "
                            "a file", hint="move that folder aside, then run the "
                            "command again")
    if code in (errno.ENOTDIR, errno.ENOENT):
        return StorageError(f"{exc.strerror or exc}{where}",
                            hint="check that the folder exists and is not a file")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StorageError(f"{exc.strerror or exc}{where}",
                            hint="memidex needs write access there: check the folder's "
                            "permissions and that the disk is not mounted read-only")
    if code == errno.EIO:
        return StorageError(f"I/O error{where}", hint="check the disk (dmesg); no record "
                            "was changed partially; run the command again")
    return StorageError(f"{exc.strerror or exc}{where}")


# SQLite's primary result codes (https://sqlite.org/rescode.html); the numbers, so that
# this module needs no sqlite3 import.
_SQLITE_ERROR, _SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY = 1, 5, 6, 8
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN = 10, 11, 13, 14
_SQLITE_SCHEMA, _SQLITE_NOTADB = 17, 26
_LOW_SPACE = 256 * 1024
"""Bytes free below which SQLite's I/O error is taken for a full disk (SQLite reports a
``-shm`` or journal it could not grow on a full disk as ``SQLITE_IOERR``)."""


def sqlite_fault(exc: BaseException, folder: Path | None = None) -> str | None:
    """What kind of fault a SQLite error is, from its result code: ``"full"``, ``"io"``
    (the disk's fault), ``"busy"`` (locked by another connection), ``"readonly"``,
    ``"damaged"`` (corrupt, not a database, or its schema is missing: SQLite's generic
    error on a query of a table that is not there), ``"cantopen"``, or None (no result code:
    not a SQLite error). ``folder``: where the file lives, to tell a full disk from an
    I/O error."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int):
        return None
    primary = code & 0xFF
    if primary == _SQLITE_FULL:
        return "full"
    if primary == _SQLITE_IOERR:
        if folder is not None:
            with contextlib.suppress(OSError):
                st = os.statvfs(folder)
                if st.f_bavail * st.f_frsize < _LOW_SPACE:
                    return "full"
        return "io"
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return "busy"
    if primary == _SQLITE_READONLY:
        return "readonly"
    if primary == _SQLITE_CANTOPEN:
        return "cantopen"
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB, _SQLITE_ERROR, _SQLITE_SCHEMA):
        return "damaged"
    return "damaged"


def from_sqlite_error(exc: BaseException, folder: Path | None = None, *,
                      what: str = "") -> StorageError | None:
    """The :class:`StorageError` for a SQLite error that is the disk's fault (full, I/O),
    else None — such a file is not damaged: it must not be recreated, nor called damaged.
    ``what`` says what was being done (``while building the index``)."""
    fault = sqlite_fault(exc, folder)
    place = f" in {folder}" if folder is not None else ""
    doing = f" {what}" if what else ""
    if fault == "full":
        return NoSpaceError(f"no space left on the device{doing}{place} ({exc})")
    if fault == "io":
        return StorageError(f"disk I/O error{doing}{place} ({exc})",
                            hint="check the disk (dmesg), then run the command again; no "
                            "record was changed")
    return None
