"""The watcher of the record and policy folders: Linux inotify through ``inotify_simple``
(imported here only, by a warm server), read synchronously.

There is no reader thread. :meth:`Watcher.drain` reads, without blocking, every event the
kernel has queued for the watches. The kernel queues an event inside the system call
that made the change (a ``write``, a ``rename``, an ``unlink``) before that call returns,
so every change that finished before :meth:`drain` was called is among the paths it
returns: a command that runs after an edit always sees it.

What it cannot name exactly it reports as lost (``None``), and the caller then looks the
slow way (``git`` or a full scan): a queue overflow, a folder created, deleted or moved
(the watches are set again over the folders as they now are), a watched folder gone.
Only record files (``*.md`` under the records folder) and policy files (``*.yaml`` and
``*.yml`` directly in the policies folder) are named; names starting with a dot (editors'
temporary files) are not.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["Watcher", "available"]

# inotify(7) masks (the kernel's ABI; inotify_simple.flags has the same values)
_MODIFY, _ATTRIB, _CLOSE_WRITE = 0x2, 0x4, 0x8
_MOVED_FROM, _MOVED_TO, _CREATE, _DELETE = 0x40, 0x80, 0x100, 0x200
_DELETE_SELF, _MOVE_SELF = 0x400, 0x800
_UNMOUNT, _Q_OVERFLOW, _IGNORED = 0x2000, 0x4000, 0x8000
_ONLYDIR, _DONT_FOLLOW, _EXCL_UNLINK, _ISDIR = 0x01000000, 0x02000000, 0x04000000, 0x40000000

_FOLDER_MASK = (_MODIFY | _ATTRIB | _CLOSE_WRITE | _MOVED_FROM | _MOVED_TO | _CREATE |
                _DELETE | _DELETE_SELF | _MOVE_SELF | _ONLYDIR | _DONT_FOLLOW | _EXCL_UNLINK)
_PARENT_MASK = (_MOVED_FROM | _MOVED_TO | _CREATE | _DELETE | _DELETE_SELF | _MOVE_SELF |
                _ONLYDIR | _DONT_FOLLOW)
_LOST = _Q_OVERFLOW | _UNMOUNT | _IGNORED | _DELETE_SELF | _MOVE_SELF


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
    with every folder under it, and the policies folder), and on their parent folders
    for the tops themselves appearing or going."""

    def __init__(self, root: str, tops: list[str]) -> None:
        from inotify_simple import INotify

        self.root = root
        self.records_top = tops[0]
        self.tops = list(tops)
        self._inotify: Any = INotify(nonblocking=True)
        self._folders: dict[int, str] = {}  # watch descriptor -> root-relative folder
        self._parents: dict[int, set[str]] = {}  # descriptor -> top names watched for
        self._changed: set[str] = set()
        self._lost = False
        self.rearmed = 0
        """How many times the watches were set again (tests read it)."""
        self._arm()

    def close(self) -> None:
        self._inotify.close()

    def _arm(self) -> None:
        """Watch every folder as it is now (after a loss: from scratch)."""
        from inotify_simple import INotify

        if self._folders or self._parents:
            self._inotify.close()
            self._inotify = INotify(nonblocking=True)
            self.rearmed += 1
        self._folders, self._parents = {}, {}
        for top in self.tops:
            parent, name = os.path.split(top)
            self._watch_parent(parent, name)
            if top == self.records_top:
                for folder, dirs, _files in os.walk(os.path.join(self.root, top)):
                    dirs[:] = [d for d in dirs if not d.startswith(".")]
                    self._watch(os.path.relpath(folder, self.root))
            else:
                self._watch(top)

    def _watch(self, rel: str) -> None:
        path = os.path.join(self.root, rel)
        if os.path.islink(path):
            self._lost = True  # a symlinked folder: the refresh's slow path handles it
            return
        try:
            wd = self._inotify.add_watch(path, _FOLDER_MASK)
        except OSError:
            return  # a folder missing now: its parent's watch sees it appear
        self._folders[wd] = rel.replace(os.sep, "/")

    def _watch_parent(self, parent: str, name: str) -> None:
        try:
            wd = self._inotify.add_watch(os.path.join(self.root, parent), _PARENT_MASK)
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
        """The paths changed since the last drain, or ``None`` (see the module doc)."""
        while True:
            events = self._inotify.read(timeout=0)
            if not events:
                break
            for wd, mask, _cookie, name in events:
                self._event(wd, mask, name)
        if self._lost:
            self._lost = False
            self._changed = set()
            self._arm()
            return None
        out, self._changed = self._changed, set()
        return out

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & _Q_OVERFLOW:
            self._lost = True
            return
        names = self._parents.get(wd)
        if names is not None:
            if name in names or mask & _LOST:
                self._lost = True  # a top folder appeared, went or moved
            return
        folder = self._folders.get(wd)
        if folder is None:
            return  # a watch removed in _arm, whose last events were still queued
        if mask & _LOST or mask & _ISDIR:
            self._lost = True  # a folder came, went or moved: set the watches again
            return
        if self._wanted(folder, name):
            self._changed.add(f"{folder}/{name}")
