"""Change sets become visible whole: the lock between the writer's install and readers.

A change set of several records (a supersede writes two) is installed file by file with
``os.replace``; each file flips atomically, the set does not. So the writer installs every
file of a change set while holding an **exclusive** ``flock`` on ``queue/visibility.lock``,
and memidex's own readers — the index refresh and its staleness scan — read the record
files while holding it **shared**. A reader therefore sees every file of a change set old
or every file new, never a mix.

The writer also keeps ``queue/landing.json``: ``{"state": "installing", "id": …}`` is
written (under the exclusive lock) before the first file moves and ``{"state": "landed",
"id": …}`` after the last. A reader holding the shared lock that finds ``installing``
knows the writer died mid-install (a live one would still hold the lock): it reports the
change set as *interrupted* until the next writer's recovery rolls it forward. The
marker's content is also the *generation* of the visible state: a reader compares it to
tell whether a change set landed since it last looked (the staleness prefetch does).

Both sides are ``fcntl.flock`` directly: importing ``filelock`` costs ~10-40 ms, more
than a whole ``knowledge search`` on an up-to-date index (and a few per cent of a one-shot
ingest); ``fcntl`` costs ~0.3 ms. The lock file is never deleted, so two holders can
never lock two different inodes; readers and the writer take ``flock`` on the same file,
so they exclude each other. A reader never waits long: a writer paused (SIGSTOP) while
installing would otherwise stall every search; after ``READER_WAIT`` seconds the reader
goes on without the lock and reports the change set as interrupted.
"""

from __future__ import annotations

import fcntl
import os
import time

TYPE_CHECKING = False  # not `typing`'s: importing typing costs milliseconds on the search path
if TYPE_CHECKING:  # nor pathlib, json or fsio: the CLI reads the generation before they
    from pathlib import Path  # are imported (memidex.index.prefetch)

__all__ = ["LANDING_FILE", "LOCK_FILE", "READER_WAIT", "Exclusive", "Visibility",
           "exclusive", "generation", "settle", "shared"]

LOCK_FILE = "queue/visibility.lock"
LANDING_FILE = "queue/landing.json"
READER_WAIT = 2.0
"""Seconds a reader waits for an install in progress before it reads without the lock."""


class Visibility:
    """What a reader found when it took the shared lock. (A plain class: a dataclass
    costs a millisecond of import on the search path.)"""

    __slots__ = ("generation", "interrupted", "locked")

    def __init__(self, locked: bool, generation: str, interrupted: str | None = None
                 ) -> None:
        self.locked = locked  # False: read without the lock (none possible, or waited out)
        self.generation = generation  # the landing marker's content ("" when none yet)
        self.interrupted = interrupted  # a change set whose install did not finish

    def __repr__(self) -> str:
        return (f"Visibility(locked={self.locked}, generation={self.generation!r}, "
                f"interrupted={self.interrupted!r})")


def _text(knowledge: str) -> str:
    """The landing marker's content ("" when there is none yet)."""
    try:
        with open(os.path.join(knowledge, LANDING_FILE), "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _marker(knowledge: str) -> tuple[str, str | None]:
    """(generation, id of the change set being installed or None)."""
    text = _text(knowledge)
    if not text:
        return "", None
    import json

    try:
        data = json.loads(text)
    except ValueError:
        return text, None
    if isinstance(data, dict) and data.get("state") == "installing":
        return text, str(data.get("id"))
    return text, None


def generation(knowledge: str | os.PathLike[str]) -> str:
    """The landing marker's content right now (no lock taken)."""
    return _text(os.fspath(knowledge))


def _open_lock(knowledge: str) -> int | None:
    path = os.path.join(knowledge, LOCK_FILE)
    for _ in range(2):
        try:
            # never follows a symlink: a planted link would make a reader create a file
            # outside the repository (ELOOP: read without the lock; writers refuse it)
            return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                           0o644)
        except FileNotFoundError:
            try:  # no queue/ yet: make it, so that the first writer's install is seen
                os.makedirs(os.path.dirname(path), exist_ok=True)
            except OSError:
                return None
        except OSError:  # a read-only checkout: nobody can install anything here
            return None
    return None


class shared:  # noqa: N801 - used like a function: ``with shared(folder) as vis:``
    """Hold the visibility lock shared for the ``with`` block (readers of record files).

    A class, not ``contextlib.contextmanager``: importing contextlib (and the collections
    and functools it pulls in) costs milliseconds on the search path, this costs none."""

    def __init__(self, knowledge: str | os.PathLike[str], *, wait: float = READER_WAIT
                 ) -> None:
        self._folder = os.fspath(knowledge)
        self._wait = wait
        self._fd: int | None = None

    def __enter__(self) -> Visibility:
        folder = self._folder
        fd = self._fd = _open_lock(folder)
        locked = False
        if fd is not None:
            deadline = time.monotonic() + self._wait
            delay = 0.001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    locked = True
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(delay)
                    delay = min(delay * 2, 0.02)
                except BaseException:
                    self._close()
                    raise
        gen, installing = _marker(folder)
        if installing is None and fd is not None and not locked:
            installing = "?"  # an install still in progress after the wait
        return Visibility(locked, gen, installing)

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


# --- the writer side -------------------------------------------------------------------


class Exclusive:
    """Inside :func:`exclusive`: mark the change set being installed, then landed."""

    def __init__(self, folder: Path) -> None:
        self._marker = folder / LANDING_FILE
        self.installing: str | None = None

    def begin(self, cs_id: str) -> None:
        """Before the first file of change set ``cs_id`` moves into place."""
        self._write({"state": "installing", "id": cs_id, "pid": os.getpid()})
        self.installing = cs_id

    def end(self, cs_id: str, state: str = "landed") -> None:
        """After the last file moved (``state``: ``landed``, or ``recovered`` when a
        recovery found an install nobody can finish)."""
        self._write({"state": state, "id": cs_id, "pid": os.getpid()})
        self.installing = None

    def _write(self, data: dict[str, object]) -> None:
        # Not fsynced: the marker only has to survive the death of a process, not of the
        # machine (after a power cut the journal replay rewrites it anyway).
        from memidex.store import fsio

        fsio.atomic_write(self._marker, fsio.dump_json(data), durable=False)


class exclusive:  # noqa: N801 - used like a function: ``with exclusive(...) as ex:``
    """Hold the visibility lock exclusively (the writer, while installing a change set).

    Raises ``TimeoutError`` when readers (or a paused writer) kept it for ``timeout``
    seconds.
    """

    def __init__(self, knowledge: Path, *, timeout: float) -> None:
        self._knowledge = knowledge
        self._timeout = timeout
        self._fd: int | None = None

    def __enter__(self) -> Exclusive:
        path = self._knowledge / LOCK_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        from memidex.store import fsio

        fsio.refuse_symlink(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        deadline = time.monotonic() + self._timeout
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(
                            f"{path} stayed locked for {self._timeout:g}s") from None
                    time.sleep(0.005)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return Exclusive(self._knowledge)

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock; the file stays
            self._fd = None


def settle(knowledge: Path) -> str | None:
    """An ``installing`` marker left by a dead writer whose change set recovery could not
    finish (abandoned): mark it ``recovered``. Returns the change set id, or None.

    Takes the lock without waiting: a live (paused) installer keeps its marker.
    """
    if _marker(os.fspath(knowledge))[1] is None:
        return None
    try:
        with exclusive(knowledge, timeout=0) as ex:
            cs_id = _marker(os.fspath(knowledge))[1]
            if cs_id is None:
                return None
            ex.end(cs_id, "recovered")
            return cs_id
    except TimeoutError:
        return None
