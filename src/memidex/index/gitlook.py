"""What git says, for the staleness check (:mod:`memidex.index.staleness`): its calls and
the reading of their answers, paths relative to memidex's root.

Every call runs ``git --no-optional-locks -C ROOT`` through
:func:`memidex.index.prefetch.start` (no ``subprocess``: a one-shot command imports as
little as it can), and a call the CLI started early (:mod:`memidex.index.prefetch`) is
taken rather than asked again — unless a change set landed since it was asked. Path
answers are relative to memidex's root, which may be a sub-folder of the repository
(``--relative``; ``ls-files`` answers so by itself).
"""

from __future__ import annotations

import os

from memidex.index.prefetch import DIFF_FILES, HEAD, HEAD_ARGS, Git, start, take

__all__ = ["EMPTY_TREE", "asked", "diff_files", "finish_names", "finish_text", "git_text",
           "index_mtime_and_head", "names", "staged", "tracked"]

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""git's empty tree: what a repository without a commit yet is compared with."""


def git_text(root: str, *args: str) -> str | None:
    """git's stdout, or None when it failed (or took over a minute: it is killed)."""
    return finish_text(start(root, *args))


def folders(root: str) -> tuple[str, str] | None:
    """git's folder and its common one (a linked worktree's differ) of ``root``, both
    absolute and real, or None (not a repository, no git)."""
    out = git_text(root, "rev-parse", "--git-dir", "--git-common-dir")
    lines = out.splitlines() if out is not None else []
    if len(lines) != 2 or not all(lines):
        return None
    git_dir, common = (os.path.realpath(os.path.join(root, line)) for line in lines)
    return git_dir, common

def finish_text(proc: Git | None, ok: tuple[int, ...] = (0,)) -> str | None:
    """A started call's stdout, or None when it could not start or exited otherwise."""
    if proc is None:
        return None
    out, _ = proc.communicate(timeout=60)
    return None if proc.returncode not in ok else out.decode("utf-8", "surrogateescape")


def asked(root: str, key: tuple[str, ...] | list[str], args: tuple[str, ...],
          generation: str | None, ok: tuple[int, ...] = (0,)) -> str | None:
    """git's answer to ``args``: the call :func:`memidex.index.prefetch.prefetch` started
    under ``key``, unless a change set landed since it was asked (then it is asked
    again)."""
    prefetched = take(root, key)
    if prefetched is not None and (generation is None or prefetched[1] == generation):
        return finish_text(prefetched[0], ok)
    if prefetched is not None:
        prefetched[0].communicate()  # asked before a change set landed: reaped, unread
    return finish_text(start(root, *args), ok)


def diff_files(root: str, tops: list[str], generation: str | None = None) -> set[str] | None:
    """The tracked files whose stat or content differs from git's index."""
    return names(asked(root, tops, (*DIFF_FILES, "--", *tops), generation))


def names(out: str | None) -> set[str] | None:
    """The paths of a ``-z`` answer (None stays None: the call failed)."""
    return None if out is None else {p for p in out.split("\0") if p}


def finish_names(proc: Git | None) -> set[str] | None:
    """The paths a started ``-z`` call answers (None: it failed)."""
    return names(finish_text(proc))


def _head(root: str) -> str | None:
    out = git_text(root, "rev-parse", "-q", "--verify", "HEAD")
    return out.strip() if out else None


def _git_index_mtime(root: str) -> int | None:
    path = git_text(root, "rev-parse", "--git-path", "index")
    if path is None:
        return None
    try:
        return os.stat(os.path.join(root, path.strip())).st_mtime_ns
    except OSError:
        return 0


def index_mtime_and_head(root: str, generation: str | None = None
                         ) -> tuple[int | None, str | None]:
    """git's index file's mtime and HEAD's commit, in one git call (HEAD None when it is
    unborn: a repository without a commit yet, exit 1); the call
    :func:`memidex.index.prefetch.prefetch` started, unless a change set landed since."""
    out = asked(root, HEAD, HEAD_ARGS, generation, ok=(0, 1))
    if out is None:  # no git, or not a repository: asking twice more would say so again
        return None, None
    lines = out.split("\n")
    if not lines[0]:
        return _git_index_mtime(root), _head(root)
    head = lines[1].strip() if len(lines) >= 2 and lines[1].strip() else None
    try:
        return os.stat(os.path.join(root, lines[0])).st_mtime_ns, head
    except OSError:
        return 0, head


def tracked(out: str | None, *, every: bool = True
            ) -> tuple[set[str] | None, set[str]] | None:
    """From ``git ls-files -v -z``: the tracked files (None unless ``every`` is asked
    for), and those of them git is told not to look at (assume-unchanged: a lowercase
    tag; skip-worktree: ``S``)."""
    if out is None:
        return None
    if not every and out.count("\0") == out.startswith("H ") + out.count("\0H "):
        return None, set()  # every entry is a plain one (two counts: ~5 ms at 100,000)
    files: set[str] = set()
    unwatched: set[str] = set()
    for entry in out.split("\0"):
        if len(entry) > 2:
            path = entry[2:]
            files.add(path)
            if entry[0] == "S" or entry[0].islower():
                unwatched.add(path)
    return files, unwatched


def staged(root: str, tops: list[str], head: str | None) -> set[str] | None:
    """The files git's index holds with other content than ``head`` (every file in it,
    before the first commit)."""
    return names(git_text(root, "diff-index", "--cached", "--name-only", "--relative", "-z",
                          head or EMPTY_TREE, "--", *tops))
