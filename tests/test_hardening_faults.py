"""Issue 9 items 7, 8 and 12: a full disk, a directory where a file belongs, killed
rebuilds, read-only folders — each a clean one-line error or a correct answer, never a
traceback, and nothing lost."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import git, make_record, run_cli, write_record

KNOWLEDGE = "agent-qa-knowledge/memory"


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A small tmpfs at ``where`` (root only); always unmounted afterwards."""
    where.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {out.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _new_repo(root: Path) -> tuple[str, str]:
    from memidex.store.layout import init_repository

    root.mkdir()
    git(root, "init", "-q")
    init_repository(root)
    (root / "memidex.toml").write_text('product = "shop-web"\n', encoding="utf-8")
    a = write_record(root, make_record())
    b = write_record(root, make_record(anchor="el:button:cancel", title="Cancel works"))
    assert run_cli(root, "knowledge", "rebuild-index").returncode == 0
    assert run_cli(root, "knowledge", "confirm", a.stem).returncode == 0
    return a.stem, b.stem


def _fill(folder: Path) -> Path:
    filler = folder / f"filler-{uuid.uuid4().hex}"
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
    return filler


def _records(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted((root / KNOWLEDGE / "records").rglob("*.md"))}


@pytest.mark.skipif(not _can_mount(), reason="needs root to mount a small tmpfs")
def test_a_full_disk_gives_a_clean_error_and_everything_recovers(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt", "3m") as mnt:
        root = mnt / "repo"
        a, b = _new_repo(root)
        before = _records(root)
        filler = _fill(mnt)
        for args in (["knowledge", "confirm", a], ["knowledge", "supersede", a, "--title",
                                                    "Place order is disabled for now"],
                     ["knowledge", "add", "--kind", "fact", "--anchor", "el:x:y", "--title",
                      "New"], ["knowledge", "purge", b], ["knowledge", "rebuild-index"],
                     ["daemon", "--once"]):
            out = run_cli(root, *args)
            assert "Traceback" not in out.stderr, (args, out.stderr)
            assert out.returncode == 1, (args, out.returncode, out.stderr)
            assert out.stderr.startswith("error: "), (args, out.stderr)
            assert "no space left" in out.stderr.lower(), (args, out.stderr)
            assert "\nhint: " in out.stderr, (args, out.stderr)
        doctor = run_cli(root, "doctor", "--json")
        assert "Traceback" not in doctor.stderr
        assert "damaged" not in doctor.stdout, doctor.stdout
        search = run_cli(root, "knowledge", "search", "place order")
        assert search.returncode == 0, search.stderr
        assert a in search.stdout
        assert _records(root) == before  # records intact
        filler.unlink()
        out = run_cli(root, "knowledge", "confirm", a)
        assert out.returncode == 0, out.stderr
        assert run_cli(root, "knowledge", "purge", b).returncode == 0
        assert run_cli(root, "knowledge", "rebuild-index").returncode == 0
        doctor = run_cli(root, "doctor")
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert run_cli(root, "knowledge", "check").returncode == 0


@contextlib.contextmanager
def readonly_view(source: Path, where: Path) -> Iterator[Path]:
    """``source`` bind-mounted read-only at ``where`` (root only); unmounted afterwards."""
    where.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["mount", "--bind", str(source), str(where)], capture_output=True,
                         text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {out.stderr.strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(where)],
                            capture_output=True, text=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only: {ro.stderr.strip()}")
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.skipif(not _can_mount(), reason="needs root to bind-mount read-only")
def test_a_fresh_index_on_a_read_only_mount_is_served(repo: Path, tmp_path: Path) -> None:
    import json
    import time

    rec = write_record(repo, make_record())
    assert run_cli(repo, "knowledge", "rebuild-index").returncode == 0
    time.sleep(2.1)  # past the racy window, so the index is trusted as it stands
    with readonly_view(repo, tmp_path / "ro") as ro:
        out = run_cli(ro, "knowledge", "search", "place order", "--json")
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["level"] == "lexical-only", data
        assert [r["id"] for r in data["results"]] == [rec.stem]
        # changed behind the read-only view: the index cannot catch up, so the records
        # are read directly (never a stale answer)
        write_record(repo, make_record(anchor="el:button:cancel", title="Place order cancel"))
        out = run_cli(ro, "knowledge", "search", "place order", "--json")
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["level"] == "bundle-scan", data
        assert len(data["results"]) == 2


def test_a_folder_at_lease_says_what_is_wrong(repo: Path) -> None:
    lease = repo / KNOWLEDGE / ".lease"
    lease.unlink(missing_ok=True)
    lease.mkdir()
    out = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "el:a:b",
                  "--title", "t")
    assert "Traceback" not in out.stderr
    assert out.returncode == 1, out.stderr
    assert out.stderr.startswith(f"error: {lease} is a folder"), out.stderr
    assert "move it aside" in out.stderr and "free space" not in out.stderr
    lease.rmdir()
    assert run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "el:a:b",
                   "--title", "t").returncode == 0


def test_an_os_error_hint_fits_the_error() -> None:
    """The one mapping of OSError to an exit code words the message and the hint by
    errno (a folder in the way is not a full disk)."""
    import errno

    from memidex.errors import from_os_error as _os_error

    full = _os_error(OSError(errno.ENOSPC, "No space left on device", "/x/y"))
    assert full.message.startswith("no space left") and full.exit_code == 1
    folder = _os_error(IsADirectoryError(errno.EISDIR, "Is a directory", "/x/.lease"))
    assert "is a folder" in folder.message and "free" not in folder.hint
    ro = _os_error(OSError(errno.EROFS, "Read-only file system", "/x"))
    assert "read-only" in ro.hint
