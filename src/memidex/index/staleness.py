"""Which files may have changed since the index last looked — cheaply, without SQL.

Two methods, reported by ``doctor``:

``git``
    Every record and policy file is visible to git. The snapshot remembers the HEAD
    commit, the mtime of git's index file, the mtime of each folder, the files that are
    not tracked by git, and the paths git named last time. Suspects are:

    * tracked files whose work-tree stat or content differs from git's index
      (``git diff-files`` — git compares every tracked file's stat with its own index,
      in C, the fastest such check there is);
    * when git's index file changed: files staged with other content than HEAD, and the
      files that were staged at the last look (an edit staged with ``git add``, then
      thrown away with ``git reset --hard``, ``git stash`` or ``git checkout HEAD``, is
      named by no git command: the file is HEAD's again in the work tree and in git's
      index, but not what the last look read);
    * when HEAD moved: the paths that differ between the two commits;
    * in a folder whose mtime moved (or is too recent to trust): the untracked files
      there (``git ls-files --others``: new names), a tracked file gone being in
      ``git diff-files`` already — git's ignore rules left out, since a record an ignore
      rule written after the last full scan matches is a record all the same (and is
      stat-ed from then on, as untracked files are);
    * files git does not track, and tracked files git is told not to look at (``git
      update-index --assume-unchanged`` or ``--skip-worktree``, as sparse checkout sets
      it: ``git diff-files`` names none of their edits) — each is stat-ed;
    * whatever git named last time (a file may have been put back as committed).

    Any other file is byte for byte what git has, as it was when the index last looked.
``stat``
    No git, or some files git cannot see (ignored): every file is a suspect.
``watch``
    A long-lived process (the warm server, :mod:`memidex.warm`) registered a watcher of
    the record and policy folders (:func:`watch`): the suspects are the paths it saw
    change since the last look, read synchronously from the kernel's queue, so an edit
    that finished before the look is always among them. It answers only over a git
    snapshot it answered before itself (the index's ``snapshot`` is exactly the one it
    left), and keeps that snapshot's claims true for the next one-shot command by adding
    every path it saw to ``named``; anything else — the first look, a lost event, another
    process's refresh or rebuild, too many named paths — falls back to ``git`` or ``stat``.

The caller then stats each suspect, and hashes it only when its stat differs from what
the index recorded (or is too recent to trust).
"""

from __future__ import annotations

import json
import os
import time

from memidex.index import gitlook
from memidex.index.prefetch import DIFF_FILES, Git
from memidex.index.prefetch import start as _start
from memidex.plain import Plain

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Protocol
else:  # the protocol is mypy's; at run time a plain base does
    Protocol = object

__all__ = ["MAX_GIT_SUSPECTS", "MAX_STAGED", "MAX_WATCH_NAMED", "RACY_NS", "Before",
           "Snapshot", "Suspects", "Watch", "before_scan", "is_watched", "suspects",
           "take_snapshot", "unwatch", "watch"]

RACY_NS = 2_000_000_000
"""A file or folder modified this close to a look may change again within its mtime tick."""
MAX_GIT_SUSPECTS = 5000
"""Past this many suspects — and past half the files the last look saw (``Snapshot.files``:
a suspect costs about what a file of a full scan costs) — a full stat scan is cheaper than
looking at each. (A fixed limit made every command scan every file once 5,000 records
were left uncommitted: a search then cost ~6x.)"""
MAX_STAGED = 1000
"""Past this many files staged at a look, the snapshot keeps only that there were many (a
repository whose first commit is still to come may have every file staged)."""
MAX_WATCH_NAMED = 1000
"""Past this many named paths the watch method asks git again (which names only the
files that differ from git's index), so the snapshot stays small for one-shot commands."""


class Snapshot(Plain):
    """What the index last looked at (see the module docstring), kept in its meta."""

    __slots__ = ("method", "head", "git_index_mtime", "dirs", "untracked", "named", "staged",
                 "many_staged", "scan_ns", "files", "tops")

    def __init__(self, method: str = "stat", head: str | None = None,
                 git_index_mtime: int = 0, dirs: dict[str, int] | None = None,
                 untracked: list[str] | None = None, named: list[str] | None = None,
                 staged: list[str] | None = None, many_staged: bool = False,
                 scan_ns: int = 0, files: int = 0, tops: list[str] | None = None) -> None:
        self.method = method
        self.head = head
        self.git_index_mtime = git_index_mtime
        self.dirs: dict[str, int] = {} if dirs is None else dirs
        self.untracked: list[str] = [] if untracked is None else untracked
        self.named: list[str] = [] if named is None else named
        self.staged: list[str] = [] if staged is None else staged
        """The files git's index held with other content than HEAD at the look."""
        self.many_staged = many_staged
        """More than :data:`MAX_STAGED` were (``staged`` is then empty, and a change of
        git's index costs a full scan)."""
        self.scan_ns = scan_ns
        self.files = files
        """About how many record and policy files there are (the full scan's count, plus
        the names added since): what :data:`MAX_GIT_SUSPECTS` compares with."""
        self.tops: list[str] = [] if tops is None else tops
        """The record and policy folders looked at: another (``policies_dir`` changed in
        memidex.toml) is not what the snapshot's claims are about, so the next look
        scans every file."""

    def to_json(self) -> str:
        return json.dumps({"method": self.method, "head": self.head,
                           "git_index_mtime": self.git_index_mtime, "dirs": self.dirs,
                           "untracked": self.untracked, "named": self.named,
                           "staged": None if self.many_staged else self.staged,
                           "scan_ns": self.scan_ns, "files": self.files,
                           "tops": self.tops},
                          sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> Snapshot | None:
        if not text:
            return None
        try:
            d = json.loads(text)
            staged = d["staged"]  # (a snapshot of before it was kept is none: a full scan)
            return cls(method=str(d["method"]), head=d["head"],
                       git_index_mtime=int(d["git_index_mtime"]),
                       dirs={str(k): int(v) for k, v in d["dirs"].items()},
                       untracked=[str(p) for p in d["untracked"]],
                       named=[str(p) for p in d["named"]],
                       staged=None if staged is None else [str(p) for p in staged],
                       many_staged=staged is None, scan_ns=int(d["scan_ns"]),
                       files=int(d.get("files", 0)), tops=[str(t) for t in d["tops"]])
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError):  # (1e400)
            return None

    def same_state(self, other: Snapshot) -> bool:
        """Equal in everything but the time of the look."""
        return (self.method, self.head, self.git_index_mtime, self.dirs, self.untracked,
                self.named, self.staged, self.many_staged, self.files, self.tops) == (
                    other.method, other.head, other.git_index_mtime, other.dirs,
                    other.untracked, other.named, other.staged, other.many_staged,
                    other.files, other.tops)


class Suspects(Plain):
    """What to look at: ``full`` (everything), or these paths; and the next snapshot.
    ``verify``: paths git says hold other content than its index or HEAD, hashed even
    when their stat looks unchanged (an mtime put back by a tool is still a change)."""

    __slots__ = ("method", "full", "paths", "verify", "snapshot", "reason")

    def __init__(self, method: str, full: bool = False, paths: set[str] | None = None,
                 verify: set[str] | None = None, snapshot: Snapshot | None = None,
                 reason: str = "") -> None:
        self.method = method
        self.full = full
        self.paths: set[str] = set() if paths is None else paths
        self.verify: set[str] = set() if verify is None else verify
        self.snapshot = snapshot
        self.reason = reason


class Before(Plain):
    """What a full scan compares against next time, read before it read any file
    (:func:`before_scan`): the time, git's index file's mtime and HEAD. A file edited and
    staged (or committed) after the scan read it changes git's index or HEAD, so the next
    look asks git about it; read after the scan, they would already hold the edit, and
    ``git diff-files`` would name nothing."""

    __slots__ = ("scan_ns", "git_index_mtime", "head")

    def __init__(self, scan_ns: int, git_index_mtime: int | None, head: str | None) -> None:
        self.scan_ns = scan_ns
        self.git_index_mtime = git_index_mtime
        self.head = head


def before_scan(root: str) -> Before:
    """:class:`Before`, now: call it before a full scan lists or reads anything."""
    now = time.time_ns()
    index_mtime, head = gitlook.index_mtime_and_head(root)
    return Before(now, index_mtime, head)


def take_snapshot(root: str, tops: list[str], paths: set[str], dirs: dict[str, int],
                  before: Before) -> Snapshot:
    """The state to compare against next time, after a full scan found ``paths`` in
    ``dirs`` (each folder's mtime as the scan saw it, before listing it), having read
    :func:`before_scan`'s ``before`` first. The git method is chosen only when git can
    see every one of those files."""
    now = before.scan_ns
    index_mtime = before.git_index_mtime
    if index_mtime is None:  # no git here
        return Snapshot(method="stat", scan_ns=now)
    listed = gitlook.tracked(gitlook.git_text(root, "ls-files", "-v", "-z", "--", *tops))
    if listed is None or listed[0] is None:
        return Snapshot(method="stat", scan_ns=now)
    tracked, unwatched = listed[0], listed[1]
    others = gitlook.names(gitlook.git_text(root, "ls-files", "-z", "--others",
                                            "--exclude-standard", "--", *tops))
    if others is None or not paths <= tracked | others:
        return Snapshot(method="stat", scan_ns=now)  # some files are ignored by git
    named = gitlook.names(gitlook.git_text(root, *DIFF_FILES, "--", *tops)) or set()
    head = before.head
    staged = gitlook.staged(root, tops, head)
    if staged is None:
        return Snapshot(method="stat", scan_ns=now)
    return Snapshot(method="git", head=head, git_index_mtime=index_mtime, dirs=dict(dirs),
                    untracked=sorted((paths - tracked) | (paths & unwatched)),
                    named=sorted(named), scan_ns=now, files=len(paths), tops=list(tops),
                    **_staged_fields(staged))


def _staged_fields(staged: set[str]) -> dict[str, Any]:
    if len(staged) > MAX_STAGED:
        return {"staged": [], "many_staged": True}
    return {"staged": sorted(staged), "many_staged": False}


class Watch(Protocol):
    """A watcher of the record and policy folders (:class:`memidex.warm.watch.Watcher`)."""

    def drain(self) -> set[str] | None:
        """Root-relative record and policy paths changed since the last drain, read now
        (every change that finished before the call is among them); ``None`` when events
        may have been lost, or git's HEAD, refs or index may have moved (the caller then
        looks the slow way)."""
        # pragma: no cover - a protocol

    def follow_git(self, folders: tuple[str, str] | None) -> None:
        """Follow git's folder and its common one as well (None: outside git)."""
        # pragma: no cover - a protocol


class _Watched:
    """A watcher, its folders, and ``expect``: the snapshot JSON the index may hold after
    the last answer — the one answered, or the one it held, when the refresh had no
    reason to write (see refresh.refresh)."""

    __slots__ = ("watch", "tops", "expect")

    def __init__(self, watch: Watch, tops: tuple[str, ...]) -> None:
        self.watch = watch
        self.tops = tops
        self.expect: set[str] = set()


_WATCHED: dict[str, _Watched] = {}


def watch(root: str, tops: list[str], watcher: Watch) -> None:
    """Let ``watcher`` name the suspects of ``root`` in this process (see ``watch`` in the
    module docstring) until :func:`unwatch`."""
    watcher.follow_git(gitlook.folders(root))  # HEAD and git's index move it too
    _WATCHED[root] = _Watched(watcher, tuple(tops))


def unwatch(root: str) -> None:
    _WATCHED.pop(root, None)


def is_watched(root: str) -> bool:
    """Whether a watcher names ``root``'s changes in this process (:func:`watch`)."""
    return root in _WATCHED


def _racy(snap: Snapshot) -> bool:
    limit = snap.scan_ns - RACY_NS
    return snap.git_index_mtime >= limit or any(m >= limit for m in snap.dirs.values())


def _kept(old: Snapshot | None, new: Snapshot) -> set[str]:
    """What the index holds after a refresh answered ``new`` over ``old``: ``new``, or
    ``old`` when nothing changed and the refresh writes nothing (the same rule as
    :func:`memidex.index.refresh.refresh`)."""
    kept = {new.to_json()}
    if old is not None and old.same_state(new) and not _racy(old):
        kept.add(old.to_json())
    return kept


def suspects(root: str, tops: list[str], snap: Snapshot | None, *,
             keep: Callable[[str], bool], generation: str | None = None) -> Suspects:
    """The paths to look at since ``snap`` (see the module docstring). ``generation``:
    the visibility generation the caller holds the shared lock under. ``keep``: whether
    a path can matter (a record or policy file: not an editor's swap file, which no
    ignore rule now leaves out; a folder, ending in ``/``: one the scan walks)."""
    watched = _WATCHED.get(root)
    if watched is None or watched.tops != tuple(tops):
        return _looked(root, tops, snap, generation, keep)
    changed = watched.watch.drain()  # first: what changes after it, the next drain names
    if changed is not None and snap is not None and snap.method == "git" and \
            snap.to_json() in watched.expect:
        named = set(snap.named) | changed
        if len(named) <= MAX_WATCH_NAMED:
            nxt = snap.replace(named=sorted(named))
            watched.expect = _kept(snap, nxt)
            return Suspects(method="watch", paths=set(changed), verify=set(changed),
                            snapshot=nxt, reason="watched")
    sus = _looked(root, tops, snap, generation, keep)
    watched.expect = _kept(snap, sus.snapshot) if (sus.snapshot is not None and
                                                   not sus.full) else set()
    return sus


def _listed(root: str, rel: str, dirs: dict[str, int], keep: Callable[[str], bool]
            ) -> set[str] | None:
    """The files that matter in the folder ``rel`` (not its sub-folders'); None when it
    holds a sub-folder the snapshot does not watch (or cannot be read)."""
    out: set[str] = set()
    try:
        with os.scandir(os.path.join(root, rel)) as entries:
            for entry in entries:
                path = f"{rel}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    if keep(path + "/") and path not in dirs:
                        return None
                elif keep(path):
                    out.add(path)
    except OSError:
        return None
    return out


def _looked(root: str, tops: list[str], snap: Snapshot | None,
            generation: str | None, keep: Callable[[str], bool]) -> Suspects:
    """The suspects by asking git (or every file, without a git snapshot)."""
    if snap is None or snap.method != "git":
        return Suspects(method="stat", full=True, reason="no git snapshot")
    if snap.tops != tops:
        return Suspects(method="git", full=True, reason="the folders are others")
    now = time.time_ns()
    racy_after = snap.scan_ns - RACY_NS
    dirs = dict(snap.dirs)
    moved: list[str] = []
    for rel, old in snap.dirs.items():
        try:
            mtime = os.stat(os.path.join(root, rel)).st_mtime_ns
        except OSError:
            return Suspects(method="git", full=True, reason=f"{rel} is gone")
        if mtime != old or mtime >= racy_after:
            dirs[rel] = mtime
            moved.append(rel)
    for top in tops:  # a folder that was not there at the last scan (no mtime to compare)
        if top not in snap.dirs and os.path.isdir(os.path.join(root, top)):
            return Suspects(method="git", full=True, reason=f"{top} appeared")
    # A name added to a folder is untracked (or staged, seen below); a tracked file that
    # is gone is in diff-files; an untracked one is in the snapshot. Listing the untracked
    # files of a moved folder runs alongside the other git calls.
    lister = _start(root, "ls-files", "-z", "--others", "--directory", "--",
                    *moved) if moved else None
    try:
        return _suspects(root, tops, snap, now, racy_after, dirs, moved, lister,
                         generation, keep)
    finally:
        if lister is not None and lister.returncode is None:
            lister.communicate()


def _suspects(root: str, tops: list[str], snap: Snapshot, now: int, racy_after: int,
              dirs: dict[str, int], moved: list[str],
              lister: Git | None, generation: str | None,
              keep: Callable[[str], bool]) -> Suspects:
    index_mtime, head = gitlook.index_mtime_and_head(root, generation)
    modified = gitlook.diff_files(root, tops, generation)
    if index_mtime is None or modified is None:
        return Suspects(method="stat", full=True, reason="git is not available here")
    was_untracked = set(snap.untracked)
    paths = modified | set(snap.named) | was_untracked
    verify = set(modified)
    # git's index, listed when it changed: files the snapshot took as untracked may be
    # tracked now (added, committed)
    tracked: set[str] | None = None
    unwatched: set[str] = set()
    staged_fields: dict[str, Any] = {"staged": snap.staged, "many_staged": snap.many_staged}
    if head != snap.head or index_mtime != snap.git_index_mtime or \
            index_mtime >= racy_after:
        if snap.many_staged:
            return Suspects(method="git", full=True,
                            reason=f"over {MAX_STAGED} files were staged")
        listing = _start(root, "ls-files", "-v", "-z", "--", *tops)
        staged = gitlook.staged(root, tops, head)
        listed = gitlook.tracked(gitlook.finish_text(listing), every=bool(snap.untracked))
        if staged is None or listed is None:
            return Suspects(method="git", full=True,
                            reason="git diff-index or ls-files failed")
        tracked, unwatched = listed
        paths |= unwatched
        verify |= unwatched
        staged_fields = _staged_fields(staged)
        staged |= set(snap.staged)  # what was staged then may be HEAD's again now
        paths |= staged
        verify |= staged
        if head != snap.head:
            if snap.head is None or head is None:
                return Suspects(method="git", full=True, reason="HEAD appeared or vanished")
            between = gitlook.names(gitlook.git_text(
                root, "diff", "--name-only", "--relative", "-z", "--no-renames", snap.head,
                head, "--", *tops))
            if between is None:
                return Suspects(method="git", full=True, reason="HEAD moved too far")
            paths |= between
            verify |= between
    added: set[str] = set()
    if moved:
        others = gitlook.finish_names(lister)
        if others is None:
            return Suspects(method="git", full=True, reason="git ls-files failed")
        whole: list[str] = []  # folders watched already that git tracks nothing in
        for path in others:
            if not keep(path):
                continue
            if path.endswith("/"):  # a folder git tracks nothing in: empty, or all new
                if path[:-1] not in dirs:
                    return Suspects(method="git", full=True, reason="a new folder appeared")
                whole.append(path)
                continue
            added.add(path)
        for rel in moved:  # git named those only as a whole: their names, listed here
            if any(rel == w[:-1] or rel.startswith(w) for w in whole):
                names = _listed(root, rel, dirs, keep)
                if names is None:
                    return Suspects(method="git", full=True, reason="a new folder appeared")
                added |= names
    paths |= added
    # Every file that matters must be in a folder the snapshot watches: a record written
    # later into a folder it does not moves only that folder's mtime. (A new folder whose
    # files git tracks already — added, pulled — is not among git's untracked ones.)
    if any(keep(p) and p.rsplit("/", 1)[0] not in dirs for p in paths):
        return Suspects(method="git", full=True, reason="a new folder appeared")
    if len(paths) > max(MAX_GIT_SUSPECTS, snap.files // 2):
        return Suspects(method="git", full=True, reason=f"{len(paths)} files to look at")
    # (a file git now tracks leaves the list: git's diff-files names its changes from now
    # on — unless git is told not to look at it)
    untracked = sorted(p for p in was_untracked | added | unwatched
                       if (tracked is None or p not in tracked or p in unwatched) and
                       os.path.lexists(os.path.join(root, p)))
    nxt = Snapshot(method="git", head=head, git_index_mtime=index_mtime, dirs=dirs,
                   untracked=untracked, named=sorted(modified), scan_ns=now,
                   files=snap.files + len(added - was_untracked), tops=list(tops),
                   **staged_fields)
    return Suspects(method="git", paths=paths, verify=verify, snapshot=nxt)
