"""The index refresh after an ingest is fed from the change set (memidex.index.refresh
.landed): it looks at the files the ingest wrote and asks git nothing — and leaves the
index and its snapshot such that every later look finds whatever else changed, and
whatever happens to those files afterwards, exactly as a full rebuild would see it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import git, index_dump
from learnkit import RECORDS, checkout, ingest, init_repo, write_run
from memidex.app import Memidex
from memidex.index import staleness
from memidex.index.refresh import _LANDED


def _rebuilt(root: Path) -> dict[str, Any]:
    Memidex(root).rebuild_index()
    return index_dump(root)


def _refreshed(root: Path) -> dict[str, Any]:
    """The index after an ordinal refresh (what any read does first)."""
    with Memidex(root) as m:
        m.reading.open()
    return index_dump(root)


class _GitLooks:
    """Counts the looks that ask git (the real ones run)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = staleness.suspects

        def counted(*args: Any, **kwargs: Any) -> staleness.Suspects:
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr("memidex.index.refresh.suspects", counted)


def _committed_repo(tmp_path: Path) -> Path:
    root = init_repo(tmp_path / "repo")
    ingest(root, checkout("r-1"))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "learned")
    return root


def test_the_refresh_after_an_ingest_asks_git_nothing_and_equals_a_rebuild(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _committed_repo(tmp_path)
    looks = _GitLooks(monkeypatch)
    out = ingest(root, checkout("r-2"))  # confirms every fact r-1 taught
    assert {c["op"] for c in out["changes"]} == {"confirm"}
    assert looks.calls == 1  # the look before the lease (the ordinal floor); none after
    assert not _LANDED
    fed = index_dump(root)
    assert fed == _refreshed(root) == _rebuilt(root)


def test_a_file_the_ingest_wrote_and_a_person_put_back_is_seen_by_the_next_look(
        tmp_path: Path) -> None:
    root = _committed_repo(tmp_path)
    ingest(root, checkout("r-2"))
    changed = git(root, "diff", "--name-only").split()
    assert changed and all(p.startswith(RECORDS) for p in changed)
    # put back exactly as committed, with the mtime the ingest's write had: git's own
    # index now matches it, so only the snapshot's `named` tells the next look
    for rel in changed:
        st = os.stat(root / rel)
        git(root, "checkout", "--", rel)
        os.utime(root / rel, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert git(root, "diff", "--name-only") == ""
    assert _refreshed(root) == _rebuilt(root)


def test_an_edit_made_around_the_ingest_is_seen_by_the_next_read(tmp_path: Path) -> None:
    root = _committed_repo(tmp_path)
    facts = sorted((root / RECORDS / "fact").glob("*.md"))
    run = write_run(tmp_path / "runs", checkout("r-2", search="flaky"))
    # a person's edit lands while the ingest runs (after its look before the lease):
    # an edit of a file the ingest does not write, and a new file
    with Memidex(root) as m:
        real = m.reading.ordinal_floor

        def floor_then_edit(product: str) -> int:
            n = real(product)
            with facts[-1].open("a", encoding="utf-8") as f:
                f.write("Numbat.\n")
            (root / RECORDS / "fact" / "fact-x-handmade.md").write_text(
                facts[0].read_text(encoding="utf-8"), encoding="utf-8")
            return n

        m.reading.ordinal_floor = floor_then_edit
        m.ingest(run)
    assert _refreshed(root) == _rebuilt(root)
    with Memidex(root) as m:
        assert [r.id for r in m.search("numbat").results] == [facts[-1].stem]


def test_a_warm_server_keeps_its_own_watch(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """With a watcher registered (a daemon's warm server) the refresh looks as always:
    the watch already names what changed, and expects the snapshot it left."""
    root = _committed_repo(tmp_path)

    class Lost:
        def drain(self) -> set[str] | None:
            return None  # events lost: the refresh must look the slow way

        def follow_git(self, folders: tuple[str, str] | None) -> None:
            pass

    staleness.watch(str(root), ["agent-qa-knowledge/memory/records", "policies"], Lost())
    try:
        looks = _GitLooks(monkeypatch)
        ingest(root, checkout("r-2"))
        assert looks.calls == 2  # before the lease, and after: the watcher's way
    finally:
        staleness.unwatch(str(root))
    assert not _LANDED
    assert index_dump(root) == _rebuilt(root)


def test_no_git_means_the_usual_full_look(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    from memidex.store.layout import init_repository

    init_repository(root)
    (root / "memidex.toml").write_text('product = "shop-web"\n', encoding="utf-8")
    ingest(root, checkout("r-1"))
    ingest(root, checkout("r-2"))
    assert not _LANDED
    assert subprocess.run(["git", "-C", str(root), "rev-parse"], capture_output=True,
                          check=False).returncode != 0
    assert index_dump(root) == _rebuilt(root)


def test_a_change_set_applied_for_another_process_notes_nothing(tmp_path: Path) -> None:
    # a daemon applying an inbox item another process queued runs the ingest job with no
    # refresh of its own to feed: what it wrote must not pile up in the daemon's memory
    from memidex.index.refresh import fed_by_landed, landed

    root = init_repo(tmp_path / "repo")
    store = Memidex(root).store
    landed(store, [f"{RECORDS}/fact/a.md"])
    assert not _LANDED
    with fed_by_landed(store):
        landed(store, [f"{RECORDS}/fact/a.md"])
        assert _LANDED == {str(store.root): {f"{RECORDS}/fact/a.md"}}
    assert not _LANDED
