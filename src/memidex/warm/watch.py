"""The watcher of the record and policy folders: Linux inotify through ``inotify_simple``
(imported here only, by a warm server), read synchronously.

There is no reader thread. :meth:`Watcher.drain` reads, without blocking, every event the
kernel has queued for the watches. The kernel queues an event inside the system call
that made the change (a ``write``, a ``rename``, an ``unlink``) before that call returns,
so every change that finished before :meth:`drain` was called is among the paths it
returns: a command that runs after an edit always sees it.

What it cannot name exactly it reports as lost (``None``), and the caller then looks the
slow way (``git`` or a full scan): a queue overflow, a folder created, deleted or moved
(the watches are set again over the folders as they now are), a watched folder gone, a
folder on the way from the root to the records or policies folder replaced (each of
those is watched for the next name: a watch follows the folder it was set on, not its
name).

Only record files (``*.md`` under the records folder) and policy files (``*.yaml`` and
``*.yml`` directly in the policies folder) are named; names starting with a dot (editors'
temporary files) are not.

It also watches where git keeps HEAD, the refs and its index (the git folder, the common
folder of a worktree, ``refs/`` and every folder under it, ``reftable/``): a commit, a
checkout, a reset, ``git add`` or refs packed change what the slow way names — and the
commit each answer names — without a record file changing, so a drain after any change
there is ``None`` too (the watches stay as they are) — but for git's lock files
(``index.lock``, ``HEAD.lock``, ``refs/heads/main.lock``, which ``git status`` takes and
drops on every call): every change git makes under a lock lands as a rename of the lock
onto the name, which is heard. The index names those folders
(:meth:`Watcher.follow_git`, from :func:`memidex.index.staleness.watch`); until it has,
outside git, or where one of them cannot be watched, every drain is ``None``.

A records or policies folder that cannot be watched (the user's inotify limits reached)
fails the watcher's start (``OSError``); met when the watches are set again, it leaves
the watcher blind: every drain is then ``None``.

A file with another name outside the watched folders (a hard link: ``st_nlink`` above
one, as ``cp -al`` leaves) can change through that name, and no watch hears it: the kernel
reports a change to the watch on the folder of the name it was made through. So every such
file the watcher has seen — when it set its watches, or since, through an event — is among
the paths of every drain, for the caller to stat. A link made to a watched file from
outside after the watcher last saw it is the one change it cannot know of (``link`` tells
no watch of the file's folder), until the file's next event; ``docs/warm.md`` says so.
"""

from __future__ import annotations

import os
import stat
from typing import Any

__all__ = ["LOCAL_FILESYSTEMS", "NotLocal", "Watcher", "available", "filesystem_of"]

# inotify(7) masks (the kernel's ABI; inotify_simple.flags has the same values)
_MODIFY, _ATTRIB, _CLOSE_WRITE = 0x2, 0x4, 0x8
_MOVED_FROM, _MOVED_TO, _CREATE, _DELETE = 0x40, 0x80, 0x100, 0x200
_DELETE_SELF, _MOVE_SELF = 0x400, 0x800
_UNMOUNT, _Q_OVERFLOW, _IGNORED = 0x2000, 0x4000, 0x8000
_ONLYDIR, _DONT_FOLLOW, _EXCL_UNLINK, _ISDIR = 0x01000000, 0x02000000, 0x04000000, 0x40000000
_MASK_ADD = 0x20000000  # a folder watched in two roles keeps both masks

_FOLDER_MASK = (_MODIFY | _ATTRIB | _CLOSE_WRITE | _MOVED_FROM | _MOVED_TO | _CREATE |
                _DELETE | _DELETE_SELF | _MOVE_SELF | _ONLYDIR | _DONT_FOLLOW | _EXCL_UNLINK)
_PARENT_MASK = (_MOVED_FROM | _MOVED_TO | _CREATE | _DELETE | _DELETE_SELF | _MOVE_SELF |
                _ONLYDIR | _DONT_FOLLOW)
_LOST = _Q_OVERFLOW | _UNMOUNT | _IGNORED | _DELETE_SELF | _MOVE_SELF
_GIT_MASK = (_MODIFY | _CLOSE_WRITE | _MOVED_FROM | _MOVED_TO | _CREATE | _DELETE |
             _DELETE_SELF | _MOVE_SELF | _ONLYDIR)
_GIT_REFS = ("refs", "reftable")

LOCAL_FILESYSTEMS = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "bcachefs", "reiserfs", "jfs",
    "nilfs2", "tmpfs", "ramfs", "overlay", "vfat", "msdos", "exfat", "ntfs3", "hfsplus",
    "squashfs", "erofs", "iso9660", "udf"})
"""File systems whose every change goes through this kernel, which tells inotify. On any
other — NFS, SMB, 9p (WSL's ``/mnt/c``), virtiofs, a FUSE one (sshfs, bindfs, a VM's or
container's shared folder) — a change made from elsewhere (another machine, the host, the
folder it mirrors) reaches no watch."""


class NotLocal(OSError):
    """A watched folder is on a file system whose changes inotify may not hear."""


def available() -> str | None:
    """Why a watcher cannot run here (``None``: it can)."""
    import sys

    if not sys.platform.startswith("linux"):
        return "file watching needs Linux inotify"
    try:
        import inotify_simple  # noqa: F401
    except ImportError:
        return "inotify_simple is not installed"
    return None


class Watcher:
    """inotify watches on ``tops`` (root-relative folders: the records folder, watched
    with every folder under it, and the policies folder), on every folder from the root
    down to them for a folder on the way appearing or going, and on git's folders."""

    def __init__(self, root: str, tops: list[str]) -> None:
        from inotify_simple import INotify

        self.root = root
        self.records_top = tops[0]
        self.tops = list(tops)
        elsewhere = _elsewhere([os.path.join(root, top) for top in tops], _mountinfo())
        if elsewhere is not None:
            raise NotLocal(elsewhere)
        self._git_folders: tuple[str, str] | None = None  # set by follow_git
        self._inotify: Any = INotify(nonblocking=True)
        self._folders: dict[int, str] = {}  # watch descriptor -> root-relative folder
        self._parents: dict[int, set[str]] = {}  # descriptor -> top names watched for
        self._changed: set[str] = set()
        self._linked: set[str] = set()  # wanted files with another name (st_nlink > 1)
        self._git: dict[int, tuple[str, bool]] = {}  # descriptor -> (folder, a top one)
        self._git_known = False  # whether every folder git keeps HEAD's state in is watched
        self._git_moved = False
        self._lost = False
        self._blind = False  # a folder could not be watched when the watches were set again
        self.rearmed = 0
        """How many times the watches were set again (tests read it)."""
        try:
            self._arm()
        except BaseException:
            self._inotify.close()
            raise

    def close(self) -> None:
        self._inotify.close()

    def follow_git(self, folders: tuple[str, str] | None) -> None:
        """Watch git's folder and its common one (:func:`memidex.index.gitlook.folders`)
        too; until then, and with None (outside git, or on a file system HEAD may be
        moved from elsewhere), every drain is ``None``."""
        if folders is not None and _elsewhere(list(folders), _mountinfo()) is not None:
            folders = None
        self._git_folders = folders
        self._arm_git()

    def _arm(self) -> None:
        """Watch every folder as it is now (after a loss: from scratch)."""
        from inotify_simple import INotify

        if self._folders or self._parents:
            self._inotify.close()
            self._inotify = INotify(nonblocking=True)
            self.rearmed += 1
        self._folders, self._parents, self._linked = {}, {}, set()
        for top in self.tops:
            parts = top.split("/")  # every folder from the root down, for the next name
            for depth in range(len(parts)):
                self._watch_parent("/".join(parts[:depth]), parts[depth])
            self._walk(top, top == self.records_top)
        self._arm_git()

    def _arm_git(self) -> None:
        """Watch the folders git keeps HEAD, the refs and its index in."""
        self._git, self._git_moved = {}, False
        self._git_known = self._git_folders is not None
        if self._git_folders is None:
            return
        git_dir, common = self._git_folders
        for folder in dict.fromkeys((git_dir, common)):
            self._watch_git(folder, top=True)
        for name in _GIT_REFS:
            self._watch_git_tree(os.path.join(common, name), top=name == "refs")

    def _watch_git_tree(self, path: str, *, top: bool = False) -> None:
        """Watch ``path`` and every folder under it (none there: nothing to watch)."""
        stack = [path] if os.path.isdir(path) else []
        while stack:
            folder = stack.pop()
            self._watch_git(folder, top=top and folder == path)
            try:
                with os.scandir(folder) as it:
                    stack.extend(e.path for e in it if e.is_dir(follow_symlinks=False))
            except OSError:
                continue

    def _watch_git(self, path: str, *, top: bool) -> None:
        try:
            wd = self._inotify.add_watch(path, _GIT_MASK | _MASK_ADD)
        except OSError:
            if top or os.path.isdir(path):  # one git folder not watched: HEAD unknown
                self._git_known = False
            return
        if wd in self._folders or wd in self._parents:
            self._git_known = False  # a folder watched for records too: its mask is shared
            return
        self._git[wd] = (path, top)

    def _walk(self, top: str, below: bool) -> None:
        """Watch the folder ``top`` (and, ``below``, every folder under it as ``os.walk``
        finds them: no folder whose name starts with a dot, no symlinked one; with a stack
        of its own, however deep), noting its wanted files that have another name."""
        stack = [top]
        while stack:
            rel = stack.pop()
            if not self._watch(rel):
                continue
            folder = rel.replace(os.sep, "/")
            try:
                with os.scandir(os.path.join(self.root, rel)) as it:
                    entries = list(it)
            except OSError:
                continue  # gone since: its parent's watch has the event
            for entry in entries:
                try:
                    if entry.is_dir():
                        if below and not entry.name.startswith(".") and \
                                not entry.is_symlink():
                            stack.append(os.path.join(rel, entry.name))
                    elif self._wanted(folder, entry.name) and \
                            _other_names(entry.stat(follow_symlinks=False)):
                        self._linked.add(f"{folder}/{entry.name}")
                except OSError:
                    continue

    def _relink(self, path: str) -> None:
        """Whether ``path`` (changed) now has another name: noted, or no longer."""
        try:
            linked = _other_names(os.lstat(os.path.join(self.root, path)))
        except OSError:
            linked = False
        if linked:
            self._linked.add(path)
        else:
            self._linked.discard(path)

    def _watch(self, rel: str) -> bool:
        path = os.path.join(self.root, rel)
        if os.path.islink(path):
            self._lost = True  # a symlinked folder: the refresh's slow path handles it
            return False
        try:
            wd = self._inotify.add_watch(path, _FOLDER_MASK | _MASK_ADD)
        except OSError:
            if os.path.isdir(path):
                raise  # there, and not watched (the inotify limits): the caller decides
            return False  # a folder missing now: its parent's watch sees it appear
        self._folders[wd] = rel.replace(os.sep, "/")
        return True

    def _watch_parent(self, parent: str, name: str) -> None:
        try:
            wd = self._inotify.add_watch(os.path.join(self.root, parent),
                                         _PARENT_MASK | _MASK_ADD)
        except OSError:
            self._lost = True  # nothing to watch from: every drain says so
            return
        self._parents.setdefault(wd, set()).add(name)

    def _wanted(self, folder: str, name: str) -> bool:
        if name.startswith("."):
            return False
        if folder == self.records_top or folder.startswith(self.records_top + "/"):
            return name.endswith(".md")
        return folder in self.tops[1:] and name.endswith((".yaml", ".yml"))

    def drain(self) -> set[str] | None:
        """The paths changed since the last drain and the files with another name, or
        ``None`` when the caller must look the slow way (see the module doc)."""
        while True:
            events = self._inotify.read(timeout=0)
            if not events:
                break
            for wd, mask, _cookie, name in events:
                self._event(wd, mask, name)
        if self._lost and not self._blind:
            self._lost = False
            self._changed = set()
            try:
                self._arm()
            except OSError:
                self._blind = True
            return None
        out, self._changed = self._changed, set()
        for path in out:
            self._relink(path)
        if self._blind or self._git_moved or not self._git_known:
            self._git_moved = False
            return None  # git may name other files, and another commit
        out |= self._linked
        return out

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & _Q_OVERFLOW:
            self._lost = True
            return
        git = self._git.get(wd)
        if git is not None:
            if name.endswith(".lock") and not mask & _ISDIR:
                return  # git's lock files: what they change lands as a rename onto the name
            self._git_moved = True  # HEAD, a ref or git's index may have moved
            if mask & _LOST:
                self._git.pop(wd, None)
                if git[1]:
                    self._lost = True  # a git folder itself went: look again for them all
            elif mask & _ISDIR and mask & (_CREATE | _MOVED_TO):
                self._watch_git_tree(os.path.join(git[0], name))  # a new refs folder
            return
        names = self._parents.get(wd)
        if names is not None and (name in names or mask & _LOST):
            self._lost = True  # a folder on the way to a top appeared, went or moved
            return
        folder = self._folders.get(wd)  # (a folder may be a top's parent and watched too)
        if folder is None:
            return  # a watch removed in _arm, whose last events were still queued
        if mask & _LOST or mask & _ISDIR:
            self._lost = True  # a folder came, went or moved: set the watches again
            return
        if self._wanted(folder, name):
            self._changed.add(f"{folder}/{name}")



def _other_names(st: os.stat_result) -> bool:
    """Whether a file (its ``lstat``) is a regular one with another name (a hard link)."""
    return stat.S_ISREG(st.st_mode) and st.st_nlink > 1


def _mountinfo() -> str | None:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            return f.read()
    except OSError:
        return None


def filesystem_of(path: str, mountinfo: str) -> str | None:
    """The type of the file system ``path`` is on, as ``mountinfo`` (the text of
    ``/proc/self/mountinfo``) says: the last of the longest mount points it is under."""
    real = os.path.realpath(path)
    longest, kind = -1, None
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        try:
            dash = fields.index("-", 6)
        except ValueError:
            continue
        if len(fields) <= dash + 1:
            continue
        point = _unescape(fields[4])
        if (real == point or real.startswith(point.rstrip("/") + "/")) and \
                len(point) >= longest:
            longest, kind = len(point), fields[dash + 1]
    return kind


def _unescape(field: str) -> str:
    """A mountinfo field with its octal escapes (a space is ``\\040``) read."""
    if "\\" not in field:
        return field
    import re

    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _elsewhere(paths: list[str], mountinfo: str | None) -> str | None:
    """Why one of ``paths`` cannot be trusted to a watch (see :data:`LOCAL_FILESYSTEMS`),
    or None."""
    if mountinfo is None:
        return "cannot tell which file systems the folders are on (/proc/self/mountinfo)"
    for path in paths:
        kind = filesystem_of(path, mountinfo)
        if kind not in LOCAL_FILESYSTEMS:
            return (f"{path} is on a {kind or 'unknown'} file system: a change made to it "
                    "from elsewhere reaches no watch")
    return None
