"""The staleness check's git calls, started before the work that needs them.

A one-shot reading command spends most of its time in two things that need not wait for
each other: importing memidex and opening the index, and ``git diff-files`` (git's stat
of every tracked record, ~25 ms at 20,000 records, ~0.1 s at 100,000). :func:`prefetch`
starts ``git diff-files`` and the ``rev-parse`` of git's index and HEAD in the
background; :mod:`memidex.index.staleness` collects them (:func:`take`), or
:func:`discard` reaps them. The CLI's first step for ``knowledge search``, ``brief``
and ``doctor`` (:func:`memidex.cli.main.early_git`) starts them from the command line and
:func:`tops_of` alone, before it imports anything else.

The answers are no staler than ones asked for later: a file changed meanwhile is named by
git next time, or was named this time and is looked at again next time (and git's index
is stat-ed when collected). A change set that lands before the caller takes the shared
lock is caught by the visibility generation taken here (:mod:`memidex.store.visibility`):
the collector asks git again. And an early guess of the folders that is wrong (the
configuration is read properly later) only costs the call: the collector looks up the
folders it was given and finds nothing started for them.

Imports only ``os`` and the visibility generation at the top: everything it does runs
before the rest of memidex is imported.
"""

from __future__ import annotations

import os

from memidex.store import visibility

TYPE_CHECKING = False  # not `typing`'s (~2 ms): this runs first
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["DIFF_FILES", "GIT_OPTIONS", "HEAD", "Git", "discard", "prefetch", "start", "take",
           "tops_of"]

HEAD_ARGS = ("rev-parse", "--git-path", "index", "--verify", "-q", "HEAD")
"""git's index, then HEAD's commit; without a commit yet (HEAD unborn) the first line
only, and exit 1."""
DIFF_FILES = ("diff-files", "--name-only", "--relative", "-z")
"""git's stat of every tracked file, its paths relative to memidex's root (``--relative``:
memidex may live in a sub-folder of the repository, and git names paths from its top)."""
GIT_OPTIONS = ("--no-optional-locks", "--literal-pathspecs")
"""Before every command: no optional lock (a look never writes git's index), and every
path given taken as it is — a folder named ``:(glob)kb`` or ``k*b`` is that folder, not
pathspec magic or a wildcard."""
HEAD: tuple[str, ...] = ()
"""The folders key of the ``rev-parse`` call (it does not depend on them)."""

_STARTED: dict[tuple[str, tuple[str, ...]], tuple[Git, str]] = {}


class Git:
    """A running ``git`` whose stdout is piped to this process: the little of
    ``subprocess.Popen`` the staleness check uses. Spawned with ``os.posix_spawnp``:
    importing ``subprocess`` costs ~8 ms, which would come before git could start."""

    def __init__(self, pid: int, out: int) -> None:
        self.pid = pid
        self._out: int | None = out
        self.returncode: int | None = None

    def communicate(self, timeout: float | None = None) -> tuple[bytes, None]:
        """All of git's stdout and its exit (``returncode``), waiting up to ``timeout``
        seconds; past it git is killed and the call answers as a failed one."""
        chunks: list[bytes] = []
        if self._out is not None:
            import select
            import time

            deadline = None if timeout is None else time.monotonic() + timeout
            poller = select.poll()  # (select() refuses a descriptor past 1023)
            poller.register(self._out, select.POLLIN)
            try:
                while True:
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        if left <= 0 or not poller.poll(max(1, int(left * 1000))):
                            os.kill(self.pid, 9)
                            break
                    chunk = os.read(self._out, 1 << 16)
                    if not chunk:
                        break
                    chunks.append(chunk)
            finally:
                os.close(self._out)
                self._out = None
        if self.returncode is None:
            status = os.waitpid(self.pid, 0)[1]
            killed = os.WIFSIGNALED(status)
            self.returncode = -1 if killed else os.waitstatus_to_exitcode(status)
        return b"".join(chunks), None


def start(root: str, *args: str) -> Git | None:
    """``git --no-optional-locks --literal-pathspecs -C ROOT ARGS`` (:data:`GIT_OPTIONS`), its
    stdout piped, stderr discarded."""
    import _signal  # type: ignore[import-not-found]  # (`signal` imports enum)

    try:
        read, write = os.pipe()
    except OSError:  # out of descriptors: the caller asks git the slow way, or fails there
        return None
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        pid = os.posix_spawnp("git", ["git", *GIT_OPTIONS, "-C", root, *args], env,
                              file_actions=[(os.POSIX_SPAWN_DUP2, write, 1),
                                            (os.POSIX_SPAWN_OPEN, 2, os.devnull,
                                             os.O_WRONLY, 0)],
                              setsigdef=(_signal.SIGPIPE,))
    except OSError:
        os.close(read)
        return None
    finally:
        os.close(write)
    return Git(pid, read)


def prefetch(root: str, tops: Sequence[str]) -> None:
    """Start ``git diff-files`` over ``tops`` and the ``rev-parse`` of git's index and
    HEAD in ``root`` (each unless already started), with the visibility generation now:
    if a change set lands before the collector takes the shared lock, git may have seen
    part of it, and the collector asks again."""
    key = (root, tuple(tops))
    if key in _STARTED or not tops or not _in_git(root):
        return
    gen = visibility.generation(os.path.join(root, os.path.dirname(tops[0])))
    diff = start(root, *DIFF_FILES, "--", *tops)
    if diff is None:
        return
    _STARTED[key] = (diff, gen)
    if (root, HEAD) not in _STARTED:
        head = start(root, *HEAD_ARGS)
        if head is not None:
            _STARTED[(root, HEAD)] = (head, gen)


def _in_git(root: str) -> bool:
    """Whether ``root`` is in a git work tree, as far as a ``.git`` in it or above it
    says (a folder, or in a linked worktree or a submodule a file): a few stats, where
    starting git outside one costs a process."""
    here = os.path.abspath(root)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return True
        parent = os.path.dirname(here)
        if parent == here:
            return False
        here = parent


def take(root: str, tops: Sequence[str]) -> tuple[Git, str] | None:
    """The call started for ``tops`` (``HEAD``: the ``rev-parse``) and its generation,
    now the caller's to collect; None when none was started."""
    return _STARTED.pop((root, tuple(tops)), None)


def discard(root: str) -> None:
    """Reap the calls started in ``root`` that nobody collected."""
    for key in [k for k in _STARTED if k[0] == root]:
        proc, _ = _STARTED.pop(key)
        proc.communicate()


def tops_of(root: str) -> list[str] | None:
    """The root-relative records and policies folders (``knowledge_dir/records``,
    ``policies_dir``) as the configuration will resolve them, when that is plain to see:
    the defaults, or plain relative folders set in ``memidex.toml``; else None."""
    from memidex.store.peek import config_keys

    given = config_keys(root, ("knowledge_dir", "policies_dir"))
    if given is None:
        return None
    values = {"knowledge_dir": "agent-qa-knowledge/memory", "policies_dir": "policies"}
    for key, value in given.items():
        if not isinstance(value, str):
            return None
        values[key] = value
    for value in values.values():
        parts = value.split("/")
        if value.startswith("/") or "\\" in value or \
                any(p in ("", ".", "..") for p in parts):
            return None  # not plain: the configuration resolves it
    return [values["knowledge_dir"] + "/records", values["policies_dir"]]
