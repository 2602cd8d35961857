"""Reading the records and policies of a commit from git's objects, never the work tree.

``git ls-tree`` lists the blobs of a commit, ``git cat-file --batch`` streams their
bytes, ``git diff --name-status`` says which paths changed between two commits and
``git merge-base --is-ancestor`` whether one commit descends from another. What is read
is what the commit holds, whatever the checkout, the index or the untracked files say.
Paths follow the local scan (``memidex.store.files.Store.scan_dir``): ``*.md`` anywhere
under the records folder, ``*.yaml``/``*.yml`` directly in the policies folder, hidden
names skipped.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from memidex.errors import NotFoundError, StorageError, UsageError

__all__ = ["Blob", "BlobReader", "Change", "GitTree", "blob_at", "branch_head",
           "is_ancestor", "resolve"]


@dataclass(frozen=True, slots=True)
class Blob:
    path: str
    sha: str
    mode: str  # 100644, 100755, 120000 (a symlink), 160000 (a submodule)


@dataclass(frozen=True, slots=True)
class Change:
    status: str  # A, M, D (renames are off: a rename is a D and an A)
    path: str


def _git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    try:
        out = subprocess.run(["git", "--literal-pathspecs", "-C", str(root), *args],
                             capture_output=True, check=False)  # (names are never magic)
    except FileNotFoundError:
        raise StorageError("git is not installed: the team index reads records from git",
                           hint="install git") from None
    if check and out.returncode != 0:
        msg = out.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(f"git {args[0]} failed in {root}: {msg[-1] if msg else out.returncode}",
                         hint="the team index is pushed from a git clone of the records")
    return out


def resolve(root: Path, branch: str | None) -> tuple[str, str]:
    """(commit id, branch name) of ``branch`` (default: the checked-out branch's HEAD)."""
    if branch is None:
        head = _git(root, "symbolic-ref", "-q", "--short", "HEAD", check=False)
        if head.returncode != 0:
            raise UsageError(f"HEAD of {root} is detached: say which branch the index serves",
                             hint="pass --branch NAME (e.g. the branch CI built)")
        branch = head.stdout.decode().strip()
    commit = _git(root, "rev-parse", "--verify", "-q", f"{branch}^{{commit}}", check=False)
    if commit.returncode != 0:
        raise NotFoundError(f"no branch or commit {branch!r} in {root}",
                            hint="`git branch` lists the branches")
    return commit.stdout.decode().strip(), branch


def is_ancestor(root: Path, older: str, newer: str) -> bool | None:
    """Whether ``older`` is an ancestor of ``newer`` (or the same); None when git does not
    have ``older`` (a shallow clone, a commit force-pushed away)."""
    have = _git(root, "cat-file", "-e", f"{older}^{{commit}}", check=False)
    if have.returncode != 0:
        return None
    out = _git(root, "merge-base", "--is-ancestor", older, newer, check=False)
    if out.returncode not in (0, 1):
        return None
    return out.returncode == 0


def branch_head(root: Path, branch: str) -> str | None:
    """The commit this clone's ``branch`` is at (``refs/heads/BRANCH``, else
    ``refs/remotes/origin/BRANCH``); None when it has neither (or is no git clone)."""
    try:
        out = _git(root, "for-each-ref", "--format=%(refname) %(objectname)",
                   f"refs/heads/{branch}", f"refs/remotes/origin/{branch}", check=False)
    except StorageError:
        return None
    if out.returncode != 0:
        return None
    refs = dict(line.split(" ", 1) for line in out.stdout.decode().splitlines() if " " in line)
    return refs.get(f"refs/heads/{branch}") or refs.get(f"refs/remotes/origin/{branch}")


def blob_at(root: Path, commit: str, path: str) -> bytes | None:
    """The bytes of ``path`` in ``commit``; None when this clone does not have them (the
    commit not fetched, or no such file there)."""
    try:
        # ("./": the path from memidex's root, which may be a sub-folder of the repository)
        out = _git(root, "cat-file", "blob", f"{commit}:./{path}", check=False)
    except StorageError:
        return None
    return out.stdout if out.returncode == 0 else None


def _visible(path: str, folder: str, policies: bool) -> bool:
    rest = path[len(folder) + 1:]
    parts = rest.split("/")
    if any(p.startswith(".") for p in parts):
        return False
    if policies:
        return len(parts) == 1 and rest.endswith((".yaml", ".yml"))
    return rest.endswith(".md")


class GitTree:
    """The records and policies of one commit. Paths are from memidex's root, which may
    be a sub-folder of the repository: ``ls-tree`` without ``--full-tree`` and ``diff
    --relative`` name them from there (git's own names start at its top)."""

    def __init__(self, root: Path, commit: str, records_rel: str, policies_rel: str) -> None:
        self.root = root
        self.commit = commit
        self.records_rel = records_rel.strip("/")
        self.policies_rel = policies_rel.strip("/")

    def _ls(self, folder: str, recursive: bool) -> list[Blob]:
        args = ["ls-tree", "-z", *(["-r"] if recursive else []), self.commit,
                "--", f"{folder}/"]
        out: list[Blob] = []
        for entry in _git(self.root, *args).stdout.split(b"\0"):
            if not entry:
                continue
            meta, path_b = entry.split(b"\t", 1)
            mode, kind, sha = meta.decode().split()
            path = path_b.decode("utf-8", "surrogateescape")
            if kind == "blob" and _visible(path, folder, not recursive):
                out.append(Blob(path, sha, mode))
        out.sort(key=lambda b: b.path.encode("utf-8", "surrogateescape"))
        return out

    def records(self) -> list[Blob]:
        """Every record blob, in path order (bytewise, as the local scan sorts)."""
        return self._ls(self.records_rel, True)

    def policies(self) -> list[Blob]:
        return self._ls(self.policies_rel, False)

    def blob(self, path: str) -> Blob | None:
        out = _git(self.root, "ls-tree", "-z", self.commit, "--", path).stdout
        for entry in out.split(b"\0"):
            if entry:
                meta, _ = entry.split(b"\t", 1)
                mode, kind, sha = meta.decode().split()
                if kind == "blob":
                    return Blob(path, sha, mode)
        return None

    def changes_since(self, older: str) -> list[Change]:
        """Record and policy paths that differ between ``older`` and this commit."""
        out = _git(self.root, "diff", "--name-status", "--relative", "-z", "--no-renames",
                   "--no-ext-diff", older, self.commit, "--", f"{self.records_rel}/",
                   f"{self.policies_rel}/")
        fields = out.stdout.split(b"\0")
        changes: list[Change] = []
        for i in range(0, len(fields) - 1, 2):
            status = fields[i].decode()[:1]
            path = fields[i + 1].decode("utf-8", "surrogateescape")
            if status in ("A", "M", "D", "T"):
                changes.append(Change("M" if status == "T" else status, path))
        return changes

    def is_record_path(self, path: str) -> bool:
        return path.startswith(self.records_rel + "/") and _visible(path, self.records_rel,
                                                                     False)

    def is_policy_path(self, path: str) -> bool:
        return path.startswith(self.policies_rel + "/") and _visible(path, self.policies_rel,
                                                                      True)


class BlobReader:
    """One ``git cat-file --batch`` process: blobs' bytes by id, streamed."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self, shas: Sequence[str]) -> Iterator[bytes]:
        """The bytes of each blob, in order. The ids are written by a thread so that git
        never blocks on a full pipe while this one reads."""
        proc = subprocess.Popen(["git", "-C", str(self.root), "cat-file", "--batch"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout

        def feed() -> None:
            try:
                for sha in shas:
                    stdin.write(sha.encode() + b"\n")
            except BrokenPipeError:
                pass
            finally:
                try:
                    stdin.close()
                except BrokenPipeError:
                    pass

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        try:
            for sha in shas:
                header = stdout.readline().split()
                if len(header) != 3:
                    raise StorageError(f"git cat-file cannot read blob {sha} in {self.root}")
                data = stdout.read(int(header[2]))
                stdout.read(1)
                yield data
        finally:
            stdout.close()
            proc.kill()
            proc.wait()
            writer.join()
