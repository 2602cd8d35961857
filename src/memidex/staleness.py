"""Which files may have changed since the index last looked — cheaply, without SQL.

Two methods, reported by ``doctor``:

``git``
    The records live in a git work tree. A snapshot remembers the HEAD commit and the
    mtime of every folder it scanned. Next time, only these are looked at closely:
    folders whose mtime moved (a file was added, deleted or replaced — git checkout,
    git pull and memidex's own writer all replace files), or moved within the last two
    seconds of the snapshot (their mtime cannot be trusted yet); the paths ``git status``
    reports as modified, staged or untracked; and, when HEAD moved, the paths that differ
    between the two commits. ``git status`` compares every tracked file's stat with its
    own index in C, which is what makes this fast at 100,000 records.
``stat``
    No git: every file is stat-ed (size, mtime, inode) on every command.

Either way the caller then stats each suspect, and hashes it only when its stat differs
from what the index recorded (or is too recent to trust).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field

__all__ = ["RACY_NS", "Snapshot", "Suspects", "dir_mtimes", "suspects", "take_snapshot"]

RACY_NS = 2_000_000_000
MAX_GIT_SUSPECTS = 5000


@dataclass
class Snapshot:
    method: str = "stat"
    head: str | None = None
    dirs: dict[str, int] = field(default_factory=dict)  # root-relative folder -> mtime_ns
    scan_ns: int = 0

    def to_json(self) -> str:
        return json.dumps({"method": self.method, "head": self.head, "dirs": self.dirs,
                           "scan_ns": self.scan_ns}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> Snapshot | None:
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(method=str(data["method"]), head=data["head"],
                       dirs={str(k): int(v) for k, v in data["dirs"].items()},
                       scan_ns=int(data["scan_ns"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


@dataclass
class Suspects:
    """What to look at: ``full`` (everything), or these folders and these paths."""

    method: str
    full: bool = False
    dirs: list[str] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)
    head: str | None = None
    reason: str = ""


def _git(root: str, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "--no-optional-locks", *args], cwd=root,
                             capture_output=True, check=False, timeout=30,
                             env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.decode("utf-8", "surrogateescape")


def _git_status(root: str, paths: list[str]) -> tuple[str | None, set[str]] | None:
    """(HEAD commit or None, paths git reports as changed in any way), or None (no git)."""
    out = _git(root, "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all",
               "--ignored=no", "--", *paths)
    if out is None:
        return None
    head: str | None = None
    found: set[str] = set()
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if not entry:
            continue
        if entry.startswith("# branch.oid "):
            oid = entry[len("# branch.oid "):]
            head = None if oid == "(initial)" else oid
        elif entry.startswith("1 "):
            found.add(entry.split(" ", 8)[8])
        elif entry.startswith("2 "):
            found.add(entry.split(" ", 9)[9])
            if i < len(entries):
                found.add(entries[i])  # the original path of a rename
                i += 1
        elif entry.startswith("u "):
            found.add(entry.split(" ", 10)[10])
        elif entry.startswith("? "):
            found.add(entry[2:])
    return head, found


def dir_mtimes(root: str, tops: list[str]) -> dict[str, int]:
    """Every folder under ``tops`` (root-relative), with its mtime; hidden ones skipped."""
    out: dict[str, int] = {}
    stack = [t for t in tops if os.path.isdir(os.path.join(root, t))]
    while stack:
        rel = stack.pop()
        full = os.path.join(root, rel)
        try:
            out[rel] = os.stat(full).st_mtime_ns
            with os.scandir(full) as it:
                for entry in it:
                    if entry.name.startswith(".") or entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(f"{rel}/{entry.name}")
        except OSError:
            continue
    return out


def take_snapshot(root: str, tops: list[str], dirs: dict[str, int] | None = None,
                  head: str | None = None, method: str | None = None) -> Snapshot:
    """The state to compare against next time (call after scanning)."""
    if method is None:
        status = _git_status(root, tops)
        method = "stat" if status is None else "git"
        if status is not None:
            head = status[0]
    return Snapshot(method=method, head=head,
                    dirs=dirs if dirs is not None else dir_mtimes(root, tops),
                    scan_ns=time.time_ns())


def suspects(root: str, tops: list[str], snap: Snapshot | None) -> Suspects:
    if snap is None or snap.method != "git":
        return Suspects(method="stat", full=True, reason="no git snapshot")
    status = _git_status(root, tops)
    if status is None:
        return Suspects(method="stat", full=True, reason="git is not available here")
    head, paths = status
    result = Suspects(method="git", head=head)
    if head != snap.head:
        if snap.head is None or head is None:
            return Suspects(method="git", full=True, head=head, reason="HEAD appeared")
        diff = _git(root, "diff", "--name-only", "-z", "--no-renames", snap.head, head,
                    "--", *tops)
        if diff is None:
            return Suspects(method="git", full=True, head=head, reason="HEAD moved")
        paths.update(p for p in diff.split("\0") if p)
    if len(paths) > MAX_GIT_SUSPECTS:
        return Suspects(method="git", full=True, head=head,
                        reason=f"{len(paths)} files differ from git")
    # Only the folders seen last time are stat-ed: a new sub-folder moves its parent's mtime.
    racy_after = snap.scan_ns - RACY_NS
    for rel, old in snap.dirs.items():
        try:
            mtime = os.stat(os.path.join(root, rel)).st_mtime_ns
        except OSError:
            result.dirs.append(rel)
            continue
        if mtime != old or mtime >= racy_after:
            result.dirs.append(rel)
    for top in tops:
        if top not in snap.dirs and os.path.isdir(os.path.join(root, top)):
            result.dirs.append(top)
    result.dirs.sort()
    result.paths = paths
    return result
