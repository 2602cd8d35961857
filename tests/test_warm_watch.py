"""The warm server's watcher where inotify cannot hear everything — at the kernel's
inotify limits, on a file system changed from elsewhere: it never answers as if it had
seen every change.

The limit is real: each such case runs a Python process in a new user namespace
(``unshare -U -r``), where ``/proc/sys/user/max_inotify_watches`` is that namespace's own
and can be set low without touching the machine's. The other file system is a real FUSE
mount (bindfs) of the repository.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import git

SCRIPT = textwrap.dedent("""
    import json, os, sys
    from memidex.index.gitlook import folders
    from memidex.warm.watch import Watcher as Watching

    root, case = sys.argv[1], sys.argv[2]
    tops = ["records", "policies"]

    def Watcher(root, tops):
        w = Watching(root, tops)
        w.follow_git(folders(root))  # as staleness.watch does
        return w

    def limit(n):
        with open("/proc/sys/user/max_inotify_watches", "w") as f:
            f.write(str(n))

    def used(w):
        return len(w._folders) + len(w._parents) + len(getattr(w, "_git", {}))

    out = {}
    if case == "start":
        limit(3)
        try:
            Watcher(root, tops)
            out["start"] = "watching"
        except OSError as exc:
            out["start"] = exc.errno
    elif case == "rearm":
        w = Watcher(root, tops)
        drained = w.drain()
        out["first"] = None if drained is None else sorted(drained)
        limit(used(w))  # room for what it watches now, not one folder more
        os.mkdir(os.path.join(root, "records", "new"))
        out["lost"] = w.drain()
        with open(os.path.join(root, "records", "new", "r.md"), "w") as f:
            f.write("x")
        with open(os.path.join(root, "records", "a", "r0.md"), "a") as f:
            f.write("y")
        drained = w.drain()
        out["after"] = None if drained is None else sorted(drained)
    elif case == "git":
        probe = Watcher(root, tops)
        records = len(probe._folders) + len(probe._parents)
        probe.close()
        limit(records)  # the record folders fit; git's do not
        w = Watcher(root, tops)
        drained = w.drain()
        out["git"] = None if drained is None else sorted(drained)
    print(json.dumps(out))
""")


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for folder in ("a", "b", "c"):
        (root / "records" / folder).mkdir(parents=True)
        (root / "records" / folder / "r0.md").write_text("r\n")
    (root / "policies").mkdir()
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tree")
    return root


def _run(root: Path, case: str) -> dict[str, object]:
    unshare = shutil.which("unshare")
    assert unshare is not None, "these tests need util-linux's unshare"
    out = subprocess.run([unshare, "-U", "-r", sys.executable, "-c", SCRIPT, str(root), case],
                         capture_output=True, text=True, check=False, timeout=60)
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_a_folder_it_cannot_watch_at_start_fails_the_start(tmp_path: Path) -> None:
    """The daemon then serves without a watcher (each command asks git) and says so."""
    assert _run(_tree(tmp_path), "start") == {"start": 28}  # ENOSPC


def test_a_folder_it_cannot_watch_later_leaves_it_blind_not_wrong(tmp_path: Path) -> None:
    result = _run(_tree(tmp_path), "rearm")
    assert result["first"] == [], result
    assert result["lost"] is None  # a folder came: the watches are set again
    # the new folder could not be watched: no drain may claim to name every change
    assert result["after"] is None, result


def test_a_git_folder_it_cannot_watch_makes_every_look_ask_git(tmp_path: Path) -> None:
    assert _run(_tree(tmp_path), "git") == {"git": None}


def test_the_records_on_a_fuse_mount_are_not_trusted_to_a_watch(repo: Path,
                                                                 tmp_path: Path) -> None:
    """The repository served through a FUSE mount (bindfs: as sshfs, a VM's or a
    container's shared folder, WSL's ``/mnt/c`` over 9p): an edit made to the folder it
    mirrors reaches no watch on the mount, so the daemon watches nothing there and every
    command asks git — the edit is seen by the next command, warm or not."""
    from test_warm import FACTS, Daemon, _records, cli

    bindfs = shutil.which("bindfs")
    assert bindfs is not None, "this test needs bindfs (make deps installs it as root)"
    ids = _records(repo)
    cli(repo, "knowledge", "rebuild-index", warm="0")
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run([bindfs, "-o", "attr_timeout=0,entry_timeout=0", str(repo), str(mount)],
                   check=True, capture_output=True, timeout=30)
    try:
        d = Daemon(mount)
        try:
            with (repo / FACTS / f"{ids[0]}.md").open("ab") as f:  # not through the mount
                f.write(b" mirroredtoken\n")
            out = cli(mount, "knowledge", "search", "mirroredtoken", "--json",
                      warm="require")
            assert out.returncode == 0, out.stderr
            assert json.loads(out.stdout)["results"], "a stale answer was served"
            doctor = json.loads(cli(mount, "doctor", "--json", warm="require").stdout)
            assert doctor["index"]["staleness"]["method"] != "watch"
            assert "is on a fuse file system" in doctor["serving"]["watch"], doctor["serving"]
        finally:
            d.stop()
    finally:
        subprocess.run(["fusermount", "-u", str(mount)], check=False, capture_output=True,
                       timeout=30)


def test_the_file_system_of_a_path_is_the_last_of_its_longest_mount_points() -> None:
    from memidex.warm.watch import LOCAL_FILESYSTEMS, filesystem_of

    mountinfo = "\n".join([
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
        "98 22 0:55 / /mnt/c rw,noatime - 9p drvfs rw,aname=drvfs;path=C:\\;uid=1000",
        "99 22 0:56 / /home/a\\040b rw - fuse.sshfs host:/srv rw,user_id=1000",
        "100 22 0:57 / /srv rw master:3 - nfs4 host:/srv rw",
        "101 100 0:58 / /srv rw - tmpfs tmpfs rw",  # mounted over the NFS one
        "garbage line",
    ])
    assert filesystem_of("/mnt/c/Users/me/repo", mountinfo) == "9p"
    assert filesystem_of("/mnt/cd/repo", mountinfo) == "ext4"  # not under /mnt/c
    assert filesystem_of("/home/a b/repo", mountinfo) == "fuse.sshfs"
    assert filesystem_of("/srv/repo", mountinfo) == "tmpfs"
    assert "9p" not in LOCAL_FILESYSTEMS and "ext4" in LOCAL_FILESYSTEMS


def test_folders_nested_past_the_recursion_limit_are_all_watched(tmp_path: Path) -> None:
    """A records folder nested deeper than Python's recursion limit: every folder is
    watched (the walk keeps its own stack), and a file at the bottom is named."""
    from memidex.warm.watch import Watcher

    root = tmp_path / "repo"
    deepest = root / "records"
    deepest.mkdir(parents=True)
    depth = sys.getrecursionlimit() + 100
    for _ in range(depth):  # one at a time: pathlib's mkdir(parents=True) recurses too
        deepest = deepest / "d"
        deepest.mkdir()
    (root / "policies").mkdir()
    w = Watcher(str(root), ["records", "policies"])
    try:
        assert len(w._folders) == depth + 2  # records, each d, policies
        (deepest / "r.md").write_text("r\n")
        w.follow_git(None)
        assert w.drain() is None  # outside git: HEAD is not followed
        (deepest / "r.md").write_text("r again\n")
        w._git_known = True  # as inside git with nothing moved, to read what it names
        drained = w.drain()
        assert drained is not None and len(drained) == 1
        assert next(iter(drained)).endswith("/d/r.md")
    finally:
        w.close()
        (deepest / "r.md").unlink(missing_ok=True)
        while deepest != root / "records":  # bottom up: shutil.rmtree recurses, and so
            deepest.rmdir()                  # would pytest's clean-up of old tmp folders
            deepest = deepest.parent
