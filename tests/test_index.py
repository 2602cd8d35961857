"""The derived index: rebuild determinism, incremental refresh == rebuild, safe swapping."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import git, index_dump, integrity, make_record, write_record
from memidex.app import Memidex
from memidex.index.build import rebuild
from memidex.index.db import IndexDB
from memidex.index.refresh import refresh
from memidex.index.schema import SCHEMA_VERSION
from memidex.records.codec import dump_record
from memidex.records.model import HistoryEntry, Relations, Trust, Valid
from memidex.store.layout import init_repository

POLICY = "id: {pid}\nrule: {rule}\napplies_to: {{products: [shop-web]}}\nseverity: must\n"


def test_rebuild_twice_gives_identical_contents(repo: Path) -> None:
    for i in range(30):
        write_record(repo, make_record(anchor=f"el:button:b{i}", title=f"Button {i} works",
                                       anchors=("page:/checkout",)))
    m = Memidex(repo)
    m.rebuild_index()
    first = index_dump(repo)
    m.rebuild_index(jobs=1)
    assert index_dump(repo) == first
    assert first["meta"]["schema_version"] == str(SCHEMA_VERSION)  # type: ignore[index]
    assert len(first["records"]) == 30  # type: ignore[arg-type]


def test_parallel_rebuild_equals_serial(repo: Path, monkeypatch: object) -> None:
    import memidex.index.build as build

    for i in range(60):
        write_record(repo, make_record(anchor=f"el:link:l{i}", title=f"Link {i}"))
    (repo / "agent-qa-knowledge/memory/records/fact/broken.md").write_text("---\nid: [\n---\n")
    m = Memidex(repo)
    m.rebuild_index(jobs=1)
    serial = index_dump(repo)
    old = build.PARALLEL_MIN_FILES
    build.PARALLEL_MIN_FILES = 1
    try:
        m.rebuild_index(jobs=2)
    finally:
        build.PARALLEL_MIN_FILES = old
    assert index_dump(repo) == serial


def test_a_parser_that_cannot_write_its_batch_is_a_full_disk_error_leaving_nothing(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser processes hand their batches over in files beside the build: one that
    finds the disk full fails the rebuild with the rebuild's own no-space error (the old
    index intact, the hint to rebuild again), and no build or batch file is left."""
    import errno

    import memidex.index.build as build
    from memidex.errors import NoSpaceError

    for i in range(60):
        write_record(repo, make_record(anchor=f"el:link:l{i}", title=f"Link {i}"))
    m = Memidex(repo)
    m.rebuild_index(jobs=1)
    index = repo / "agent-qa-knowledge/memory/index/memidex.sqlite"
    before = index_dump(repo)
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[-1].find(".part-") > 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(build, "PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(os, "write", full)  # inherited by the forked parser processes
    with pytest.raises(NoSpaceError) as caught:
        m.rebuild_index(jobs=2)
    monkeypatch.undo()
    assert "while building the index" in caught.value.message
    assert "rebuild-index" in (caught.value.hint or "")
    assert index_dump(repo) == before
    assert not list(index.parent.glob(".memidex.sqlite.build-*"))


def test_bad_file_is_reported_not_fatal_and_never_modified(repo: Path) -> None:
    write_record(repo, make_record())
    bad = repo / "agent-qa-knowledge/memory/records/fact/bad.md"
    content = b"---\nid: x\nkind: fact\ntitle: [unclosed\n---\nbody\n"
    bad.write_bytes(content)
    report = Memidex(repo).rebuild_index()
    assert report.records == 1
    assert [p.path for p in report.problems] == ["agent-qa-knowledge/memory/records/fact/bad.md"]
    assert report.problems[0].line == 5
    assert bad.read_bytes() == content


def test_edit_on_disk_is_seen_by_next_search(repo: Path) -> None:
    rec = make_record(title="Place order is disabled", body="until the terms are accepted")
    path = write_record(repo, rec)
    m = Memidex(repo)
    m.rebuild_index()
    assert m.search("zebra").results == []
    text = path.read_text().replace("until the terms are accepted", "zebra stripes appear")
    path.write_text(text)
    m2 = Memidex(repo)
    hits = m2.search("zebra").results
    assert [h.id for h in hits] == [rec.id]
    assert m2.reading.last_refresh.changed == [str(path.relative_to(repo))]


def test_delete_and_add_are_seen(repo: Path) -> None:
    a = make_record(anchor="el:a:one", title="alpha one")
    pa = write_record(repo, a)
    Memidex(repo).rebuild_index()
    pa.unlink()
    b = make_record(anchor="el:b:two", title="alpha two")
    write_record(repo, b)
    m = Memidex(repo)
    assert [h.id for h in m.search("alpha").results] == [b.id]
    assert len(m.reading.last_refresh.deleted) == 1 and len(m.reading.last_refresh.added) == 1


def test_stat_fast_path_skips_unchanged_old_files(repo: Path) -> None:
    path = write_record(repo, make_record())
    old = 1_600_000_000
    os.utime(path, (old, old))
    m = Memidex(repo)
    m.rebuild_index()
    m2 = Memidex(repo)
    m2.search("place")
    assert m2.reading.last_refresh.touched == 0
    # same mtime but a different size is still noticed
    path.write_text(path.read_text() + "More words.\n")
    os.utime(path, (old, old))
    m3 = Memidex(repo)
    m3.search("place")
    assert m3.reading.last_refresh.changed


def test_missing_index_means_bundle_scan(repo: Path) -> None:
    rec = make_record()
    write_record(repo, rec)
    m = Memidex(repo)
    result = m.search("place order")
    assert result.level == "bundle-scan"
    assert [h.id for h in result.results] == [rec.id]
    assert m.doctor().level == "bundle-scan"


def test_garbage_index_means_bundle_scan_and_rebuild_recovers(repo: Path) -> None:
    rec = make_record()
    write_record(repo, rec)
    m = Memidex(repo)
    m.rebuild_index()
    index = m.config.index_path
    index.write_bytes(b"this is not a database" * 100)
    m = Memidex(repo)
    result = m.search("place")
    assert result.level == "bundle-scan" and result.results[0].id == rec.id
    m.rebuild_index()
    assert Memidex(repo).search("place").level == "lexical-only"


def test_truncated_index_and_stale_journal(repo: Path) -> None:
    write_record(repo, make_record())
    m = Memidex(repo)
    m.rebuild_index()
    index = m.config.index_path
    data = index.read_bytes()
    index.write_bytes(data[: len(data) // 3])
    Path(f"{index}-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\0" * 500)
    m = Memidex(repo)
    assert m.search("place").results  # answers either way, never "malformed"
    m.rebuild_index()
    assert not Path(f"{index}-journal").exists()
    db = IndexDB.open(index, write=True)  # FTS5's integrity-check needs a writable handle
    assert integrity(db) == "ok"
    db.close()


def test_reader_keeps_old_file_during_swap(repo: Path) -> None:
    write_record(repo, make_record(title="first version"))
    m = Memidex(repo)
    m.rebuild_index()
    reader = IndexDB.open(m.config.index_path)
    write_record(repo, make_record(anchor="el:x:y", title="second record"))
    Memidex(repo).rebuild_index()
    assert reader.swapped()
    # the old handle still reads a complete, consistent index
    assert reader.counts()["records"] == 1
    reader.close()
    assert IndexDB.open(m.config.index_path).counts()["records"] == 2


def test_refresh_on_swapped_file_refuses_to_write(repo: Path) -> None:
    write_record(repo, make_record())
    m = Memidex(repo)
    m.rebuild_index()
    db = IndexDB.open(m.config.index_path, write=True)
    Memidex(repo).rebuild_index()
    write_record(repo, make_record(anchor="el:new:one"))
    from memidex.index.db import IndexSwapped

    try:
        refresh(m.store, db)
    except IndexSwapped:
        pass
    else:
        raise AssertionError("a refresh wrote into a file that was swapped out")
    finally:
        db.close()
    assert not Path(f"{m.config.index_path}-journal").exists()


# --- the property: incremental refresh leaves the same index as a full rebuild ----------

ANCHORS = ["el:button:place-order", "page:/checkout", "el:input:card", "test:login", "api:x"]
WORDS = ["place", "order", "disabled", "terms", "flaky", "timeout", "card", "login", "zebra"]

op = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 5), st.sampled_from(ANCHORS),
              st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
              st.sampled_from(["active", "candidate", "quarantined"]),
              st.booleans(), st.integers(0, 2)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("corrupt"), st.integers(0, 5)),
    st.tuples(st.just("policy"), st.integers(0, 2), st.sampled_from(WORDS)),
    st.tuples(st.just("unpolicy"), st.integers(0, 2)),
    st.tuples(st.just("badpolicy"), st.integers(0, 2)),
    st.tuples(st.just("commit")),
    st.tuples(st.just("restore")),
    st.tuples(st.just("stage")),
    st.tuples(st.just("reset")),
    st.tuples(st.just("hide"), st.integers(0, 5), st.booleans()),
    st.tuples(st.just("append"), st.integers(0, 5)),
    st.tuples(st.just("nest"), st.integers(0, 2), st.sampled_from(WORDS)),
    st.tuples(st.just("stray"), st.integers(0, 2)),
)


def _apply(root: Path, step: tuple[object, ...], paths: dict[int, Path]) -> None:
    kind = step[0]
    records = root / "agent-qa-knowledge/memory/records/fact"
    policies = root / "policies"
    if kind == "write":
        _, slot, anchor, words, status, cites, versions = step
        assert isinstance(slot, int) and isinstance(anchor, str) and isinstance(words, list)
        assert isinstance(versions, int)
        rec = make_record(anchor=f"{anchor}-{slot}", title=" ".join(words[:3]),
                          body=" ".join(words), status=str(status), anchors=(str(anchor),),
                          valid=Valid(10 * versions))
        if versions:  # earlier versions: one kept in full, one as older memidex wrote them
            from dataclasses import replace

            history = tuple(HistoryEntry(
                valid=Valid(10 * i, 10 * i + 10), title=f"{words[0]} version {i}",
                body=" ".join(words[i:]),
                trust=Trust(source="ci", confirmations=i) if i % 2 else None,
                anchors=("page:/old",) if i % 2 else None,
                status="candidate" if i % 2 else None) for i in range(versions))
            rec = replace(rec, history=history)
        if cites:
            from dataclasses import replace

            rec = replace(rec, relations=Relations(cites=("fact-missing-0000000000000000",)))
        old = paths.get(slot)
        if old is not None and old.exists() and old.name != f"{rec.id}.md":
            old.unlink()
        paths[slot] = write_record(root, rec)
    elif kind == "delete":
        p = paths.get(step[1])  # type: ignore[arg-type]
        if p is not None and p.exists():
            p.unlink()
    elif kind == "corrupt":
        target = records / f"corrupt-{step[1]}.md"
        target.write_text("---\nid: nope\n---\n" if target.exists() else "no front matter\n")
    elif kind == "policy":
        (policies / f"p{step[1]}.yaml").write_text(POLICY.format(pid=f"p{step[1]}",
                                                                 rule=f"rule {step[2]}"))
    elif kind == "unpolicy":
        (policies / f"p{step[1]}.yaml").unlink(missing_ok=True)
    elif kind == "badpolicy":
        (policies / f"p{step[1]}.yaml").write_text("id: [\n")
    elif kind == "commit" and (root / ".git").exists():
        git(root, "add", "-A")
        git(root, "commit", "-q", "--allow-empty", "-m", "step")
    elif kind == "restore" and (root / ".git").exists():
        # put every tracked file back as committed (files are rewritten by git)
        if subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=root,
                          capture_output=True, check=False).returncode == 0:
            git(root, "checkout", "-q", "--", ".")
    elif kind == "stage" and (root / ".git").exists():  # git add, no commit
        git(root, "add", "-A")
    elif kind == "reset" and (root / ".git").exists():
        # what was staged and edited, thrown away: every tracked file HEAD's again
        if subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=root,
                          capture_output=True, check=False).returncode == 0:
            git(root, "reset", "-q", "--hard")
    elif kind == "hide" and (root / ".git").exists():  # git told not to look at it
        p = paths.get(step[1])  # type: ignore[arg-type]
        if p is not None:
            subprocess.run(["git", "update-index", "--skip-worktree" if step[2] else
                            "--assume-unchanged", str(p)], cwd=root, capture_output=True,
                           check=False)  # (not tracked: git refuses, nothing changes)
    elif kind == "nest":  # a record in a sub-folder (a new one, the first time)
        rec = make_record(anchor=f"el:nested:{step[1]}", title=f"nested {step[2]}",
                          body=f"nested {step[2]}")
        folder = records / f"nest-{step[1]}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{rec.id}.md").write_text(dump_record(rec), encoding="utf-8")
    elif kind == "stray":  # what the scan leaves alone: hidden files, other names
        records.mkdir(parents=True, exist_ok=True)
        (records / f".draft-{step[1]}.md").write_text("no front matter\n")
        (records / f"notes-{step[1]}.txt").write_text("notes\n")
    elif kind == "append":
        p = paths.get(step[1])  # type: ignore[arg-type]
        if p is not None and p.exists():
            with p.open("a") as f:  # an in-place edit: the folder's mtime does not move
                f.write("Appended words about zebra.\n")


@pytest.mark.parametrize("with_git", [False, True], ids=["stat", "git"])
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(op, min_size=1, max_size=12))
@example(steps=[("write", 0, "api:x", ["card"], "active", False, 0), ("commit",),
                ("write", 0, "api:x", ["zebra"], "active", False, 0), ("stage",), ("reset",)])
@example(steps=[("write", 0, "api:x", ["card"], "active", False, 0), ("commit",),
                ("hide", 0, False), ("append", 0)])
def test_incremental_refresh_equals_full_rebuild(with_git: bool,
                                                 steps: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if with_git:
            git(root, "init", "-q")
        init_repository(root)
        (root / "memidex.toml").write_text('product = "shop-web"\n')
        m = Memidex(root)
        rebuild(m.store, m.config.index_path, jobs=1)
        paths: dict[int, Path] = {}
        for step in steps:
            _apply(root, step, paths)
            db = IndexDB.open(m.config.index_path, write=True)
            report = refresh(m.store, db)
            assert report.method == ("git" if with_git else "stat")
            incremental = db.dump()
            assert integrity(db) == "ok"
            db.close()
            fresh = root / "fresh.sqlite"
            rebuild(m.store, fresh, jobs=1)
            db2 = IndexDB.open(fresh)
            full = db2.dump()
            db2.close()
            fresh.unlink()
            assert incremental == full


def test_concurrent_readers_refresh_without_damage(repo: Path) -> None:
    import multiprocessing

    for i in range(20):
        write_record(repo, make_record(anchor=f"el:a:{i}", title=f"alpha {i}"))
    Memidex(repo).rebuild_index()
    for i in range(20, 40):
        write_record(repo, make_record(anchor=f"el:a:{i}", title=f"alpha {i}"))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        counts = pool.map(_count_alpha, [str(repo)] * 8)
    assert counts == [10] * 8
    db = IndexDB.open(Memidex(repo).config.index_path, write=True)
    assert db.counts()["records"] == 40
    assert integrity(db) == "ok"
    db.close()


def _count_alpha(root: str) -> int:
    return len(Memidex(Path(root)).search("alpha", limit=10).results)


def test_index_file_is_not_a_wal_database(repo: Path) -> None:
    write_record(repo, make_record())
    m = Memidex(repo)
    m.rebuild_index()
    conn = sqlite3.connect(m.config.index_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


# --- the git fast path, made deterministic with old mtimes -------------------------------

OLD = 1_600_000_000


def _age(root: Path) -> None:
    """Give every record, policy and folder an old mtime, so nothing is 'too recent'."""
    for base in (root / "agent-qa-knowledge/memory/records", root / "policies"):
        for p in [base, *base.rglob("*")]:
            os.utime(p, (OLD, OLD))
    if (root / ".git/index").exists():
        os.utime(root / ".git/index", (OLD, OLD))


def _git_repo_with_records(repo: Path, n: int = 3) -> list[Path]:
    paths = [write_record(repo, make_record(anchor=f"el:item:{i}", title=f"item {i}"))
             for i in range(n)]
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "records")
    _age(repo)
    Memidex(repo).rebuild_index()
    return paths


def _refresh(repo: Path) -> object:
    m = Memidex(repo)
    m.reading.open()
    report = m.reading.last_refresh
    m.close()
    return report


def test_git_path_sees_an_in_place_edit_of_a_tracked_file(repo: Path) -> None:
    paths = _git_repo_with_records(repo)
    with paths[1].open("a") as f:
        f.write("Quokka.\n")
    os.utime(paths[1].parent, (OLD, OLD))  # the folder does not show it
    report = _refresh(repo)
    assert report.method == "git"  # type: ignore[attr-defined]
    assert report.changed == [str(paths[1].relative_to(repo))]  # type: ignore[attr-defined]
    assert [h.title for h in Memidex(repo).search("quokka").results] == ["item 1"]


def test_git_path_sees_an_edit_that_was_committed_meanwhile(repo: Path) -> None:
    paths = _git_repo_with_records(repo)
    with paths[0].open("a") as f:
        f.write("Wombat.\n")
    git(repo, "commit", "-qam", "edit")
    os.utime(paths[0], (OLD, OLD))
    os.utime(paths[0].parent, (OLD, OLD))
    report = _refresh(repo)
    assert report.changed == [str(paths[0].relative_to(repo))]  # type: ignore[attr-defined]


def test_git_path_sees_an_in_place_edit_of_an_untracked_file(repo: Path) -> None:
    _git_repo_with_records(repo)
    extra = write_record(repo, make_record(anchor="el:new:thing", title="new thing"))
    Memidex(repo).reading.open()
    _age(repo)
    Memidex(repo).rebuild_index()
    with extra.open("a") as f:
        f.write("Platypus.\n")
    os.utime(extra.parent, (OLD, OLD))
    report = _refresh(repo)
    assert report.changed == [str(extra.relative_to(repo))]  # type: ignore[attr-defined]


def test_git_path_with_nothing_changed_writes_nothing(repo: Path) -> None:
    _git_repo_with_records(repo)
    index = Memidex(repo).config.index_path
    before = index.stat().st_mtime_ns, index.read_bytes()
    report = _refresh(repo)
    assert report.touched == 0  # type: ignore[attr-defined]
    assert (index.stat().st_mtime_ns, index.read_bytes()) == before


def test_git_path_sees_a_file_added_and_a_tracked_file_deleted(repo: Path) -> None:
    paths = _git_repo_with_records(repo)
    paths[0].unlink()
    new = write_record(repo, make_record(anchor="el:brand:new", title="brand new"))
    report = _refresh(repo)
    assert report.method == "git"  # type: ignore[attr-defined]
    assert report.added == [str(new.relative_to(repo))]  # type: ignore[attr-defined]
    assert report.deleted == [str(paths[0].relative_to(repo))]  # type: ignore[attr-defined]
    # and once the folder's mtime is old again, the untracked file is still watched
    _age(repo)
    with new.open("a") as f:
        f.write("Narwhal.\n")
    os.utime(new.parent, (OLD, OLD))
    assert _refresh(repo).changed == [str(new.relative_to(repo))]  # type: ignore[attr-defined]


def test_git_path_sees_a_file_in_a_new_sub_folder_and_skips_stray_names(repo: Path) -> None:
    """A moved folder is listed against the index's paths: a new sub-folder means a look
    at everything; hidden and non-record names are no suspects."""
    paths = _git_repo_with_records(repo)
    folder = paths[0].parent
    (folder / ".draft.md").write_text("no front matter\n")
    (folder / "notes.txt").write_text("notes\n")
    report = _refresh(repo)
    assert report.method == "git" and report.touched == 0  # type: ignore[attr-defined]
    _age(repo)
    nested = folder / "team"
    nested.mkdir()
    rec = make_record(anchor="el:nested:one", title="nested one")
    (nested / f"{rec.id}.md").write_text(dump_record(rec), encoding="utf-8")
    report = _refresh(repo)
    assert report.added == [str((nested / f"{rec.id}.md").relative_to(repo))]  # type: ignore[attr-defined]
    assert [h.title for h in Memidex(repo).search("nested").results] == ["nested one"]


def test_many_uncommitted_records_are_looked_at_one_by_one_not_by_a_full_scan(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_GIT_SUSPECTS, but under half the files, the suspects are still stat-ed one
    by one: a fixed limit made every command scan every file once that many records were
    left uncommitted. An edit of one of them is still seen."""
    from memidex.index import staleness
    from memidex.store.files import Store

    _git_repo_with_records(repo, n=10)
    monkeypatch.setattr(staleness, "MAX_GIT_SUSPECTS", 2)
    extra = [write_record(repo, make_record(anchor=f"el:loose:{i}", title=f"loose {i}"))
             for i in range(4)]
    assert len(_refresh(repo).added) == 4  # type: ignore[attr-defined]
    _age(repo)
    git(repo, "update-index", "-q", "--refresh")  # git's stat of the aged files, as
    os.utime(repo / ".git/index", (OLD, OLD))  # `git status` takes it; none is modified
    Memidex(repo).rebuild_index()  # (the full scan: the snapshot counts 14 files)

    def no_full_scan(self: Store, **kw: object) -> object:
        raise AssertionError("a full scan for 4 untracked files among 14")

    monkeypatch.setattr(Store, "scan_all", no_full_scan)
    with extra[2].open("a") as f:
        f.write("Axolotl.\n")
    os.utime(extra[2].parent, (OLD, OLD))
    report = _refresh(repo)
    assert report.changed == [str(extra[2].relative_to(repo))]  # type: ignore[attr-defined]
    assert _refresh(repo).touched == 0  # type: ignore[attr-defined]


def test_records_once_committed_leave_the_snapshots_untracked_list(repo: Path) -> None:
    """Every untracked file is stat-ed on every look, so once git tracks them (committed,
    or only added) they leave the list — and an edit of one is still seen, by git."""
    _git_repo_with_records(repo)
    extra = [write_record(repo, make_record(anchor=f"el:later:{i}", title=f"later {i}"))
             for i in range(3)]
    _refresh(repo)
    index = Memidex(repo).config.index_path

    def untracked() -> list[str]:
        db = IndexDB.open(index)
        try:
            return json.loads(db.meta()["snapshot"])["untracked"]  # type: ignore[no-any-return]
        finally:
            db.close()

    assert len(untracked()) == 3
    git(repo, "add", str(extra[0]))  # git's index changed: one is tracked now
    _refresh(repo)
    assert untracked() == sorted(str(p.relative_to(repo)) for p in extra[1:])
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "learned")
    _refresh(repo)
    assert untracked() == []
    with extra[2].open("a") as f:
        f.write("Pangolin.\n")
    os.utime(extra[2].parent, (OLD, OLD))
    assert _refresh(repo).changed == [str(extra[2].relative_to(repo))]  # type: ignore[attr-defined]
    assert [h.title for h in Memidex(repo).search("pangolin").results] == ["later 2"]


def test_a_query_on_a_damaged_fts_index_falls_back_to_the_records(repo: Path) -> None:
    rec = make_record()
    write_record(repo, rec)
    m = Memidex(repo)
    m.rebuild_index()
    conn = sqlite3.connect(m.config.index_path)
    conn.execute("DELETE FROM records_fts_data WHERE id > 1")  # the FTS b-tree is gone
    conn.commit()
    conn.close()
    result = Memidex(repo).search("place order")
    assert result.level == "bundle-scan" and "damaged" in result.note
    assert [h.id for h in result.results] == [rec.id]


def test_git_path_sees_an_edit_whose_mtime_was_put_back(repo: Path) -> None:
    paths = _git_repo_with_records(repo)
    before = paths[2].stat()
    text = paths[2].read_text()
    paths[2].write_text(text.replace("item 2", "ITEM 2"))  # same size, other bytes
    os.utime(paths[2], ns=(before.st_atime_ns, before.st_mtime_ns))
    os.utime(paths[2].parent, (OLD, OLD))
    assert _refresh(repo).changed == [str(paths[2].relative_to(repo))]  # type: ignore[attr-defined]


def test_whole_index_answers_are_kept_only_while_no_connection_commits(repo: Path) -> None:
    """A long-lived reader (a warm server's doctor) keeps counts, the comparison, the
    table shape and the duplicate ids between calls — until any connection commits: a
    refresh in another process, or this connection itself."""
    from memidex.index.query import duplicate_ids

    for i in range(3):
        write_record(repo, make_record(anchor=f"el:button:b{i}", title=f"Button {i} works"))
    Memidex(repo).rebuild_index()
    path = repo / "agent-qa-knowledge/memory/index/memidex.sqlite"
    db = IndexDB.open(path)
    try:
        first = (db.counts(), db.introspect(), db.compare(), duplicate_ids(db))
        assert first[0]["records"] == 3
        first[0]["records"] = 99  # a caller changing its copy changes nothing kept

        def again(self: IndexDB) -> dict[str, int]:
            raise AssertionError("counted again with nothing committed")

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(IndexDB, "_counts", again)
            assert db.counts()["records"] == 3  # kept: the index did not change
        # another process writes: a new record file, refreshed by a one-shot command
        write_record(repo, make_record(anchor="el:button:b9", title="Button 9 works"))
        out = subprocess.run([sys.executable, "-m", "memidex", "--root",
                              str(repo), "knowledge", "list", "--json"],
                             capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stderr
        assert db.counts()["records"] == 4
        assert db.introspect()["tables"]["records"] == 4
    finally:
        db.conn.close()


@pytest.mark.parametrize("field", ["files", "scan_ns", "git_index_mtime"])
@pytest.mark.parametrize("value", ["1e400", "-1e400", "\"x\"", "[1]", "null", "{}"])
def test_a_damaged_snapshot_is_no_snapshot(field: str, value: str) -> None:
    """The index's meta may be damaged: a snapshot that does not read back whole is none
    (the look then scans every file), never a traceback."""
    from memidex.index.staleness import Snapshot

    good = Snapshot(method="git", head="abc", dirs={"r": 1}, files=3).to_json()
    assert Snapshot.from_json(good) is not None
    damaged = json.loads(good)
    damaged[field] = json.loads(value)
    assert Snapshot.from_json(json.dumps(damaged)) is None


def test_a_snapshot_that_does_not_say_what_was_staged_is_no_snapshot() -> None:
    """An index written before the snapshot kept what was staged: its look could not name
    a staged edit thrown away, so it looks at every file once."""
    from memidex.index.staleness import Snapshot

    good = json.loads(Snapshot(method="git", head="abc", staged=["r/a.md"]).to_json())
    assert Snapshot.from_json(json.dumps(good)).staged == ["r/a.md"]  # type: ignore[union-attr]
    del good["staged"]
    assert Snapshot.from_json(json.dumps(good)) is None


def test_a_damaged_snapshot_in_the_index_costs_a_full_scan(repo: Path) -> None:
    _git_repo_with_records(repo)
    index = Memidex(repo).config.index_path
    conn = sqlite3.connect(index)
    text = conn.execute("SELECT value FROM meta WHERE key = 'snapshot'").fetchone()[0]
    conn.execute("UPDATE meta SET value = ? WHERE key = 'snapshot'",
                 (text.replace('"scan_ns":', '"scan_ns":1e400,"x":'),))
    conn.commit()
    conn.close()
    report = _refresh(repo)
    assert report.touched == 0  # type: ignore[attr-defined]
    assert [h.title for h in Memidex(repo).search("item").results]


@pytest.mark.parametrize("undo", [("reset", "-q", "--hard"),
                                  ("checkout", "-q", "HEAD", "--", "."),
                                  ("stash", "-q")],
                         ids=["reset-hard", "checkout-head", "stash"])
def test_git_path_sees_a_staged_edit_thrown_away(repo: Path, undo: tuple[str, ...]) -> None:
    """An edit staged with ``git add`` (so ``git diff-files`` no longer names it), seen by
    a search, then thrown away: the work tree and git's index are HEAD's again, and
    neither ``diff-files`` nor ``diff-index --cached HEAD`` names the file. The look
    before remembered what was staged, so the edit's undoing is seen too."""
    paths = _git_repo_with_records(repo)
    with paths[1].open("a") as f:
        f.write("Quokka.\n")
    git(repo, "add", "-A")
    assert [h.title for h in Memidex(repo).search("quokka").results] == ["item 1"]
    git(repo, *undo)
    assert "Quokka" not in paths[1].read_text()
    assert [h.title for h in Memidex(repo).search("quokka").results] == []


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
@pytest.mark.parametrize("in_place", [True, False], ids=["in-place", "renamed-over"])
def test_git_path_sees_edits_of_files_git_is_told_not_to_look_at(
        repo: Path, flag: str, in_place: bool) -> None:
    """``git update-index --assume-unchanged`` (or ``--skip-worktree``, as sparse checkout
    sets it): ``git diff-files`` no longer names the file's edits. The look stats such
    files itself, as it does the files git does not track."""
    paths = _git_repo_with_records(repo)
    git(repo, "update-index", flag, str(paths[1].relative_to(repo)))
    assert [h.title for h in Memidex(repo).search("quokka").results] == []
    _age(repo)
    text = paths[1].read_text().replace("item 1", "item 1 quokka")
    if in_place:
        with paths[1].open("r+") as f:
            f.write(text)
        os.utime(paths[1].parent, (OLD, OLD))
    else:
        tmp = paths[1].with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, paths[1])
    assert [h.title for h in Memidex(repo).search("quokka").results] == ["item 1 quokka"]


@pytest.mark.parametrize("where", [".gitignore", ".git/info/exclude",
                                   "agent-qa-knowledge/memory/records/fact/.gitignore"])
def test_git_path_sees_a_new_record_git_ignores(repo: Path, where: str) -> None:
    """An ignore rule written after the last full scan: a new record it matches is not
    among git's untracked files (``--exclude-standard``), but it is a record all the same.
    The folder it was written in moved, so the look lists that folder's new names
    without git's ignore rules."""
    _git_repo_with_records(repo)
    assert Memidex(repo).search("item").results
    (repo / where).parent.mkdir(parents=True, exist_ok=True)
    (repo / where).write_text("*.md\n")
    new = write_record(repo, make_record(anchor="el:brand:new", title="ignored platypus"))
    assert subprocess.run(["git", "check-ignore", "-q", str(new)], cwd=repo,
                          check=False).returncode == 0
    assert [h.title for h in Memidex(repo).search("platypus").results] == [
        "ignored platypus"]
    _age(repo)
    with new.open("a") as f:  # and it is stat-ed from then on, as untracked files are
        f.write("Narwhal.\n")
    os.utime(new.parent, (OLD, OLD))
    assert [h.title for h in Memidex(repo).search("narwhal").results] == ["ignored platypus"]


def _full_scan_during_which(repo: Path, monkeypatch: pytest.MonkeyPatch, scan: str,
                            change: Callable[[], None]) -> None:
    """A scan of every file — a ``rebuild``, or a ``refresh`` (a look whose index holds no
    snapshot) — that runs ``change`` once after reading every file and before taking its
    snapshot, as an editor or ``git add`` may while a long scan runs."""
    import memidex.index.build as build

    real = build.full_snapshot
    done: list[bool] = []

    def changed_first(*args: object, **kwargs: object) -> object:
        if not done:
            done.append(True)
            change()
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(build, "full_snapshot", changed_first)
    m = Memidex(repo)
    if scan == "rebuild":
        m.rebuild_index()
    else:
        conn = sqlite3.connect(m.config.index_path)
        conn.execute("DELETE FROM meta WHERE key = 'snapshot'")
        conn.commit()
        conn.close()
        m.search("item")
    assert done
    monkeypatch.undo()


@pytest.mark.parametrize("scan", ["rebuild", "refresh"])
def test_a_record_added_while_a_full_scan_runs_is_seen_next(
        repo: Path, monkeypatch: pytest.MonkeyPatch, scan: str) -> None:
    """The folder's mtime is the one the scan saw before listing it, not the one after
    the scan: a file written meanwhile moves it (here to an old mtime, which no clock
    makes recent)."""
    _git_repo_with_records(repo)
    folder = repo / "agent-qa-knowledge/memory/records/fact"

    def add() -> None:
        write_record(repo, make_record(anchor="el:late:one", title="late wombat"))
        os.utime(folder, (OLD + 5, OLD + 5))

    _full_scan_during_which(repo, monkeypatch, scan, add)
    assert [h.title for h in Memidex(repo).search("wombat").results] == ["late wombat"]


@pytest.mark.parametrize("scan", ["rebuild", "refresh"])
def test_an_edit_staged_while_a_full_scan_runs_is_seen_next(
        repo: Path, monkeypatch: pytest.MonkeyPatch, scan: str) -> None:
    """git's index and HEAD are the ones from before the scan read any file: an edit
    staged (or committed) after its file was read changes them."""
    paths = _git_repo_with_records(repo)

    def edit() -> None:
        with paths[1].open("a") as f:
            f.write("Late echidna.\n")
        git(repo, "add", "-A")
        os.utime(repo / ".git/index", (OLD + 5, OLD + 5))

    _full_scan_during_which(repo, monkeypatch, scan, edit)
    assert [h.title for h in Memidex(repo).search("echidna").results] == ["item 1"]


def test_git_path_in_a_sub_folder_of_the_repository(sub_repo: Path) -> None:
    """Every git answer the look takes is about the same paths as memidex's own: an edit
    in place, a staged edit thrown away, an edit committed meanwhile, a new file."""
    repo = sub_repo
    paths = _git_repo_with_records(repo)
    assert _refresh(repo).method == "git"  # type: ignore[attr-defined]
    with paths[0].open("a") as f:  # in place: only git diff-files names it
        f.write("Quokka.\n")
    os.utime(paths[0].parent, (OLD, OLD))
    assert [h.title for h in Memidex(repo).search("quokka").results] == ["item 0"]
    git(repo, "add", "-A")
    git(repo, "reset", "-q", "--hard")  # git diff-index names it: staged at the last look
    os.utime(paths[0].parent, (OLD, OLD))
    assert [h.title for h in Memidex(repo).search("quokka").results] == []
    _age(repo)
    with paths[1].open("a") as f:  # committed meanwhile: the diff between HEADs names it
        f.write("Wombat.\n")
    git(repo, "commit", "-qam", "edit")
    os.utime(paths[1], (OLD, OLD))
    os.utime(paths[1].parent, (OLD, OLD))
    assert [h.title for h in Memidex(repo).search("wombat").results] == ["item 1"]
    new = write_record(repo, make_record(anchor="el:brand:new", title="brand new narwhal"))
    assert [h.title for h in Memidex(repo).search("narwhal").results] == ["brand new narwhal"]
    report = _refresh(repo)
    assert report.method == "git" and report.touched == 0  # type: ignore[attr-defined]
    assert new.exists()


@pytest.mark.parametrize("with_git", [True, False], ids=["git", "stat"])
def test_a_policies_folder_moved_in_memidex_toml_is_read_from_the_new_one(
        tmp_path: Path, with_git: bool) -> None:
    """``policies_dir`` changed in memidex.toml: the index is in the same place, but what
    the last look saw was another folder. The next look reads the new one (and forgets
    the old one's policies), whatever git says about either."""
    repo = tmp_path / "repo"
    repo.mkdir()
    if with_git:
        git(repo, "init", "-q")
    init_repository(repo)
    (repo / "memidex.toml").write_text('product = "shop-web"\n', encoding="utf-8")
    (repo / "policies" / "old.yaml").write_text(POLICY.format(pid="old", rule="old rule"))
    (repo / "rules").mkdir()
    (repo / "rules" / "new.yaml").write_text(POLICY.format(pid="new", rule="new rule"))
    if with_git:
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "policies")
    _age(repo)
    for p in (repo / "rules", repo / "rules" / "new.yaml"):
        os.utime(p, (OLD, OLD))
    Memidex(repo).rebuild_index()
    assert [p.id for p in Memidex(repo).brief("t", record=False).policies] == ["old"]
    (repo / "memidex.toml").write_text('product = "shop-web"\npolicies_dir = "rules"\n',
                                       encoding="utf-8")
    assert [p.id for p in Memidex(repo).brief("t", record=False).policies] == ["new"]


@pytest.mark.parametrize("first", ["empty", "not-a-record", "ignored", "hidden",
                                   "staged", "committed"])
def test_a_record_in_a_new_sub_folder_is_seen_whatever_the_folder_held_first(
        repo: Path, first: str) -> None:
    """A new sub-folder first seen empty (or holding only a file that is no record, one
    git ignores, a hidden one, or records git tracks already): a record written into it
    later moves only its own mtime, not its parent's. The look that saw the new folder
    takes it among the folders it watches (by scanning every file), so the record is
    seen."""
    _git_repo_with_records(repo)
    sub = repo / "agent-qa-knowledge/memory/records/fact/sub"
    sub.mkdir()
    if first == "not-a-record":
        (sub / "notes.txt").write_text("notes\n")
    elif first == "ignored":
        (repo / ".gitignore").write_text("*.log\n")
        (sub / "run.log").write_text("log\n")
    elif first == "hidden":
        (sub / ".draft.md").write_text("no front matter\n")
    elif first in ("staged", "committed"):  # git tracks the folder's first record
        early = make_record(anchor="el:nested:early", title="nested early")
        (sub / f"{early.id}.md").write_text(dump_record(early), encoding="utf-8")
        git(repo, "add", "-A")
        if first == "committed":  # (as a pull brings it)
            git(repo, "commit", "-qm", "a new folder")
    for p in (sub, *sub.iterdir()):
        os.utime(p, (OLD, OLD))
    os.utime(sub.parent, (OLD + 7, OLD + 7))  # moved (by the mkdir), and not too recent
    assert [h.title for h in Memidex(repo).search("item").results]  # the look that sees it
    rec = make_record(anchor="el:nested:late", title="nested dugong")
    (sub / f"{rec.id}.md").write_text(dump_record(rec), encoding="utf-8")
    assert os.stat(sub.parent).st_mtime_ns == (OLD + 7) * 10**9  # its parent did not move
    assert [h.title for h in Memidex(repo).search("dugong").results] == ["nested dugong"]


def test_a_policies_folder_made_after_the_last_scan_is_read(repo: Path) -> None:
    """The policies folder did not exist at the last scan (``policies_dir`` names one to
    come): once made, its policies are served."""
    _git_repo_with_records(repo)
    (repo / "memidex.toml").write_text('product = "shop-web"\npolicies_dir = "rules"\n',
                                       encoding="utf-8")
    assert Memidex(repo).brief("t", record=False).policies == ()
    assert Memidex(repo).brief("t", record=False).policies == ()
    (repo / "rules").mkdir()
    (repo / "rules" / "new.yaml").write_text(POLICY.format(pid="new", rule="new rule"))
    assert [p.id for p in Memidex(repo).brief("t", record=False).policies] == ["new"]


def test_records_in_a_folder_git_tracks_nothing_in_are_looked_at_one_by_one(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A records folder of only uncommitted records (say ``unknown/`` before its first
    commit): git lists such a folder as one name, yet a record added there is one
    suspect, not a reason to scan every file — and a new sub-folder in it is seen."""
    _git_repo_with_records(repo)
    folder = repo / "agent-qa-knowledge/memory/records/unknown"
    for p in folder.iterdir():
        git(repo, "rm", "-q", "--cached", str(p.relative_to(repo)))  # (the .gitkeep)
        p.unlink()
    git(repo, "commit", "-qm", "no unknowns")
    first = make_record(kind="unknown", anchor="el:u:first", title="first unknown")
    write_record(repo, first)
    Memidex(repo).rebuild_index()
    _age(repo)
    os.utime(folder, (OLD + 7, OLD + 7))
    second = make_record(kind="unknown", anchor="el:u:second", title="second okapi")
    path = write_record(repo, second)
    os.utime(folder, (OLD + 9, OLD + 9))
    from memidex.store.files import Store

    def no_full_scan(self: Store, **kw: object) -> object:
        raise AssertionError("a full scan for one new record")

    with monkeypatch.context() as patched:
        patched.setattr(Store, "scan_all", no_full_scan)
        report = _refresh(repo)
    assert report.method == "git"  # type: ignore[attr-defined]
    assert report.added == [str(path.relative_to(repo))]  # type: ignore[attr-defined]
    sub = folder / "deeper"
    sub.mkdir()
    os.utime(folder, (OLD + 11, OLD + 11))
    assert _refresh(repo).added == []  # type: ignore[attr-defined]
    rec = make_record(kind="unknown", anchor="el:u:deep", title="deep quoll")
    (sub / f"{rec.id}.md").write_text(dump_record(rec), encoding="utf-8")
    assert os.stat(folder).st_mtime_ns == (OLD + 11) * 10**9
    assert [h.title for h in Memidex(repo).search("quoll").results] == ["deep quoll"]


@pytest.mark.parametrize("folder", [":(glob)kb", ":(exclude)kb", "k*b"])
def test_folder_names_are_never_pathspec_magic_to_git(tmp_path: Path, folder: str) -> None:
    """A knowledge folder whose name git would read as pathspec magic (``:(glob)``,
    ``:(exclude)``) or a wildcard: every path memidex gives git is literal, so the look
    keeps the git method and sees an edit in place."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "memidex.toml").write_text(f'product = "shop-web"\nknowledge_dir = "{folder}"\n',
                                       encoding="utf-8")
    init_repository(repo)
    records = repo / folder / "records" / "fact"
    rec = make_record(anchor="el:item:magic", title="item magic")
    path = records / f"{rec.id}.md"
    path.write_text(dump_record(rec), encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "records")
    _age_folder = [records.parent, *records.parent.rglob("*")]
    for p in _age_folder:
        os.utime(p, (OLD, OLD))
    os.utime(repo / ".git/index", (OLD, OLD))
    Memidex(repo).rebuild_index()
    assert _refresh(repo).method == "git"  # type: ignore[attr-defined]
    with path.open("a") as f:
        f.write("Pangolin.\n")
    os.utime(records, (OLD, OLD))
    assert [h.title for h in Memidex(repo).search("pangolin").results] == ["item magic"]
