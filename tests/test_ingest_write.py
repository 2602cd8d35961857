"""The write side of an ingest, made cheaper (issue #21) without changing what it does:
the refresh's batched deletes and lookups (more files than one statement binds), the
store's string paths and reads, the journal's done marks, the refresh's use of the
records an ingest remembered, and a change set's install checks."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import git, integrity, make_record, write_record
from memidex.app import Memidex
from memidex.config import Config
from memidex.errors import ConflictError, UnsafePathError
from memidex.index import refresh as refresh_mod
from memidex.index.batches import changed_rows
from memidex.index.build import rebuild
from memidex.index.db import IN_CHUNK, IndexDB
from memidex.index.refresh import refresh
from memidex.index.rows import masker_of, rows_of
from memidex.records import codec
from memidex.records.codec import dump_record
from memidex.records.digest import content_hash
from memidex.store.files import StagedFile, Store, read_file
from memidex.store.fsio import dump_json
from memidex.write.journal import Journal, Owner
from memidex.write.writer import Write, writer_session

RECORDS = "agent-qa-knowledge/memory/records"
MANY = IN_CHUNK + 37  # more paths than one statement binds


def _rebuilt(m: Memidex, tmp: Path) -> dict[str, object]:
    fresh = tmp / "fresh.sqlite"
    rebuild(m.store, fresh, jobs=1)
    db = IndexDB.open(fresh)
    try:
        return db.dump()
    finally:
        db.close()
        fresh.unlink()


def _records(root: Path, n: int, word: str) -> list[Path]:
    return [write_record(root, make_record(anchor=f"el:button:b{i}", title=f"Button {i}",
                                           body=f"Button {i} says {word}.",
                                           anchors=(f"page:/p{i % 7}",)))
            for i in range(n)]


@pytest.mark.parametrize("with_git", [False, True], ids=["stat", "git"])
def test_a_refresh_of_more_files_than_one_statement_binds_equals_a_rebuild(
        repo: Path, tmp_path: Path, with_git: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not with_git:
        shutil.rmtree(repo / ".git")
    m = Memidex(repo)
    paths = _records(repo, MANY + 20, "hello")
    if with_git:  # committed before the index looks: git then names each changed file
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "records")
    rebuild(m.store, m.config.index_path, jobs=1)
    looked: list[int] = []  # how many suspects' rows each lookup asked for at once
    real = refresh_mod._stored_of

    def stored_of(conn: Any, suspects: Any) -> Any:
        looked.append(len(suspects))
        return real(conn, suspects)

    monkeypatch.setattr(refresh_mod, "_stored_of", stored_of)
    _records(repo, MANY, "goodbye")  # rewritten: each one's rows deleted, then inserted
    for p in paths[MANY:MANY + 10]:
        p.unlink()
    (repo / RECORDS / "fact" / "broken.md").write_text("no front matter\n", encoding="utf-8")
    db = IndexDB.open(m.config.index_path, write=True)
    try:
        report = refresh(m.store, db)
        assert report.method == ("git" if with_git else "stat")
        assert len(report.changed) == MANY and len(report.deleted) == 10
        assert report.added == [f"{RECORDS}/fact/broken.md"]
        # git named the suspects (no full scan): looked up more than one statement binds
        assert looked == ([MANY + 10 + 1] if with_git else [])
        assert integrity(db) == "ok"
        assert db.dump() == _rebuilt(m, tmp_path)
        assert db.conn.execute("SELECT count(*) FROM records_fts WHERE records_fts MATCH"
                               " 'hello'").fetchone()[0] == 10  # the ten not rewritten
    finally:
        db.close()
        m.close()


def test_a_symlink_among_the_suspects_makes_the_look_a_full_scan(
        repo: Path, tmp_path: Path) -> None:
    m = Memidex(repo)
    _records(repo, 3, "hello")
    rebuild(m.store, m.config.index_path, jobs=1)
    outside = tmp_path / "outside.md"
    outside.write_text(dump_record(make_record(anchor="el:button:far")), encoding="utf-8")
    os.symlink(outside, repo / RECORDS / "fact" / "linked.md")
    db = IndexDB.open(m.config.index_path, write=True)
    try:
        refresh(m.store, db)
        problems = db.conn.execute("SELECT path, reason FROM problems").fetchall()
        assert (f"{RECORDS}/fact/linked.md", "symlink points outside the records folder") \
            in problems
        assert db.dump() == _rebuilt(m, tmp_path)
    finally:
        db.close()
        m.close()


segment = st.sampled_from(["a", "b.md", ".", "..", "", "é", "x y", "records", ".hidden"])


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(segment, min_size=0, max_size=5), as_text=st.booleans(),
       inside=st.booleans())
def test_rel_is_what_pathlib_says(parts: list[str], as_text: bool, inside: bool) -> None:
    store = Store(Config(root=Path("/srv/repo")))
    base = "/srv/repo" if inside else "/srv/other"
    text = "/".join([base, *parts])
    expected = _pathlib_rel(Path(text), store.root)
    assert store.rel(text if as_text else Path(text)) == expected


def _pathlib_rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def test_record_rel_is_the_record_paths_rel_and_refuses_the_same(repo: Path) -> None:
    store = Memidex(repo).store
    rid = make_record().id
    assert store.record_rel("fact", rid) == store.rel(store.record_path("fact", rid))
    assert store.abs_of(store.record_rel("fact", rid)) == str(store.record_path("fact", rid))
    for kind, bad in (("fact", "../../x"), ("fact", "a/b"), ("nope", rid)):
        with pytest.raises(UnsafePathError):
            store.record_rel(kind, bad)
        with pytest.raises(UnsafePathError):
            store.record_path(kind, bad)
    with pytest.raises(UnsafePathError):
        store.stage_bytes(f"{RECORDS}/fact/../fact/{rid}.md", b"x", durable=False)


@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 3 * 65536 + 5])
def test_read_file_reads_every_byte(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f"
    data = os.urandom(size)
    path.write_bytes(data)
    assert read_file(path) == read_file(str(path)) == data
    with pytest.raises(FileNotFoundError):
        read_file(tmp_path / "missing")
    with pytest.raises(IsADirectoryError):
        read_file(tmp_path)


def test_the_done_marks_are_the_json_lines_they_always_were(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "queue")
    owner = Owner(os.getpid(), None, "boot", "host", 12345678901)
    cs = journal.begin("write", [], owner)
    journal.mark_done(cs, [0, 7, 474], 12345678901)
    journal.mark_done(cs, 3, 2)
    lines = (journal.dir / f"{cs.id}.done").read_bytes()
    assert lines == b"".join(dump_json({"i": i, "epoch": e})
                             for i, e in ((0, 12345678901), (7, 12345678901),
                                          (474, 12345678901), (3, 2)))
    assert journal.done_steps(cs) == frozenset({0, 3, 7, 474})
    assert journal.max_epoch() == 12345678901


def test_a_remembered_record_gives_the_rows_its_bytes_give(repo: Path) -> None:
    m = Memidex(repo)
    record = make_record(anchors=("page:/checkout",), body="Remembered words.")
    path = write_record(repo, record)
    data = path.read_bytes()
    fs = m.store.stat_file(m.store.rel(path))
    assert fs is not None
    masker = masker_of(m.store)
    sha = content_hash(data)
    codec._RECENT.pop(sha, None)
    cold = changed_rows(m.store, fs, masker, data)  # the row reader's (nothing recalled)
    codec.remember(sha, record)
    try:
        warm = changed_rows(m.store, fs, masker, data)  # the recalled record's
    finally:
        codec._RECENT.pop(sha, None)
    assert warm == cold == rows_of(fs.relpath, data, fs.mtime_ns, fs.ino, masker)
    m.close()


def test_a_file_edited_between_the_check_and_its_install_is_not_replaced(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check inside the fence reads every file first; each install reads its file
    again just before the rename: an edit landing in between is a conflict, not lost."""
    m = Memidex(repo)
    records = [make_record(anchor=f"el:button:c{i}") for i in range(3)]
    paths = [write_record(repo, r) for r in records]
    store = m.store
    real = Store.install
    edited = paths[2]

    def install(self: Store, staged: StagedFile, **kw: Any) -> None:
        if staged.target == str(edited):  # after the check of every file, before its own
            with edited.open("a", encoding="utf-8") as f:
                f.write("A person's edit.\n")
        real(self, staged, **kw)

    monkeypatch.setattr(Store, "install", install)
    before = [p.read_bytes() for p in paths]
    changes = [Write(replace(r, title=r.title + " again"), content_hash(b))
               for r, b in zip(records, before, strict=True)]
    with writer_session(store, wait=5, ttl=30) as w, pytest.raises(ConflictError):
        w.apply(changes, command="test")
    assert edited.read_text(encoding="utf-8").endswith("A person's edit.\n")
    assert not list(store.staging_dir.iterdir())  # nothing staged is left behind
    m.close()


def test_a_record_whose_text_did_not_change_keeps_its_full_text_entry(
        repo: Path, tmp_path: Path) -> None:
    """A confirm rewrites a record's trust and evidence, not its title, body or anchors:
    the refresh keeps its rowid, full-text entry and anchor rows, and replaces the rest
    (its vector goes, as for any changed record); a record whose text changed is indexed
    again. Either way the index equals a rebuild and FTS5's own check passes."""
    m = Memidex(repo)
    records = [make_record(anchor=f"el:button:k{i}", title=f"Knob {i}", body="Wombat words.",
                           anchors=("page:/knobs",)) for i in range(6)]
    for r in records:
        write_record(repo, r)
    rebuild(m.store, m.config.index_path, jobs=1)
    db = IndexDB.open(m.config.index_path, write=True)
    try:
        before = dict(db.conn.execute("SELECT path, rowid FROM records"))
        with db.begin_write() as c:  # a vector for every record (model "t", dim 1)
            c.executemany("INSERT INTO vectors(record_rowid, model_id, dim, content_key,"
                          " vector) VALUES (?, 't', 1, x'00', x'0000')",
                          [(rowid,) for rowid in before.values()])
        for r in records[:4]:  # confirmed: the same text, other trust
            write_record(repo, replace(r, trust=replace(r.trust, confirmations=3,
                                                        last_confirmed=2)))
        write_record(repo, replace(records[4], body="Numbat words."))  # text changed
        report = refresh(m.store, db)
        assert sorted(report.changed) == sorted(m.store.rel(m.store.record_path("fact", r.id))
                                                for r in records[:5])
        after = dict(db.conn.execute("SELECT path, rowid FROM records"))
        same = [m.store.rel(m.store.record_path("fact", r.id)) for r in records[:4]]
        assert all(after[p] == before[p] for p in same)  # kept
        changed = m.store.rel(m.store.record_path("fact", records[4].id))
        assert after[changed] > max(before.values())  # indexed again, under a new rowid
        assert integrity(db) == "ok"
        assert db.dump() == _rebuilt(m, tmp_path)
        left = {r for (r,) in db.conn.execute("SELECT record_rowid FROM vectors")}
        assert left == {before[p] for p in before if p not in [*same, changed]}
        hits = {r for (r,) in db.conn.execute(
            "SELECT rowid FROM records_fts WHERE records_fts MATCH 'wombat'")}
        assert hits == {after[p] for p in after if p != changed}
        assert [r for (r,) in db.conn.execute(
            "SELECT rowid FROM records_fts WHERE records_fts MATCH 'numbat'")] == [after[changed]]
        assert db.conn.execute("SELECT count(*) FROM anchors WHERE anchor = 'page:/knobs'"
                               ).fetchone()[0] == 6
    finally:
        db.close()
        m.close()
