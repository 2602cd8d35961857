"""The one exception tree of memidex.

Every user-facing failure is a :class:`MemidexError`. Each class carries the exit
code it maps to (SPEC §7) and an optional hint; the CLI turns them into a single
``error:`` line in exactly one place (``memidex.cli.main``). Nothing else in the
package decides exit codes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_USAGE",
    "EXIT_LEASE",
    "EXIT_INVALID",
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
    "StorageError",
    "UnsafePathError",
    "UsageError",
]

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_LEASE = 3
EXIT_INVALID = 4


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem in one file: where it is and a one-line reason."""

    path: str
    line: int
    reason: str

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
