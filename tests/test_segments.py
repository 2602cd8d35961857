"""The FTS5 index a rebuild copies from its parser processes' segments
(memidex.index.segments) against the one the parent builds by inserting every row.

The two must be the same index: the same terms at the same positions of the same rows
(``fts5vocab``'s instance table: the whole content), the same per-row sizes and totals,
the same ``bm25`` scores, FTS5's own integrity check passing, one segment — and a
refresh after it must go on to give what a full rebuild gives.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import integrity
from memidex.config import load_config
from memidex.errors import MemidexError
from memidex.index import build, segments
from memidex.index.db import IndexDB, create_schema
from memidex.index.refresh import refresh
from memidex.store.files import Store

REPO_ROOT = Path(__file__).resolve().parents[1]
QUERIES = ('"the"', '"checkout"', "button OR page", '"el" AND "form"', "cart*", '"zzz"',
           'title:"page"', 'anchors:"api"')


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """700 generated records, the first 70 files (a whole first batch) not records."""
    bench = str(REPO_ROOT / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    from gen_corpus import generate

    root = tmp_path_factory.mktemp("segments") / "repo"
    generate(700, root, seed=3, jobs=1)
    caution = root / "agent-qa-knowledge" / "memory" / "records" / "caution"
    for i in range(70):
        (caution / f"0bad-{i:02d}.md").write_text("---\nid: [\n---\n", encoding="utf-8")
    return root


def _rebuild(root: Path, db: Path, monkeypatch: pytest.MonkeyPatch, *, copy: bool
             ) -> list[int]:
    """A rebuild through the parser pool, the FTS segments copied or not; the number of
    segments copied, batch by batch."""
    copied: list[int] = []
    real_add = segments.SegmentCopier.add

    def add(self: segments.SegmentCopier, segment: segments.Segment) -> None:
        before = self.copied
        real_add(self, segment)
        copied.append(self.copied - before)

    with monkeypatch.context() as patch:
        patch.setattr(build, "PARALLEL_MIN_FILES", 50)
        patch.setattr(segments.SegmentCopier, "add", add)
        if not copy:
            patch.setattr(build, "accepts_segments", lambda conn: False)
        build.rebuild(Store(load_config(root)), db, jobs=2)
    return copied


def _fts(db: Path) -> dict[str, Any]:
    conn = sqlite3.connect(db)
    try:
        out: dict[str, Any] = {
            "records": conn.execute("SELECT rowid, * FROM records ORDER BY rowid").fetchall(),
            "segments": conn.execute("SELECT count(DISTINCT id >> 37) FROM records_fts_data"
                                     " WHERE id > 10").fetchone(),
            "averages": conn.execute("SELECT block FROM records_fts_data WHERE id = 1"
                                     ).fetchall(),
            "docsize": conn.execute("SELECT * FROM records_fts_docsize ORDER BY 1").fetchall(),
            "config": conn.execute("SELECT * FROM records_fts_config ORDER BY 1").fetchall(),
            "types": conn.execute("SELECT DISTINCT typeof(block) FROM records_fts_data"
                                  ).fetchall(),
            "vocab": conn.execute("SELECT * FROM records_vocab ORDER BY 1").fetchall(),
            "instances": conn.execute("SELECT * FROM records_vocab_i ORDER BY 1, 2, 3, 4"
                                      ).fetchall(),
        }
        for q in QUERIES:
            out[q] = conn.execute(
                "SELECT rowid, bm25(records_fts) FROM records_fts WHERE records_fts MATCH ?"
                " ORDER BY 2, 1", (q,)).fetchall()
        (structure,) = conn.execute("SELECT block FROM records_fts_data WHERE id = 10"
                                    ).fetchone()
        out["structure"] = (segments._varints(structure, 4)[0],
                            len(segments._segments_of(structure)))
        conn.execute("INSERT INTO records_fts(records_fts) VALUES('integrity-check')")
    finally:
        conn.close()
    return out


def _dumped(db: Path) -> dict[str, object]:
    index = IndexDB.open(db)
    try:
        return index.dump()
    finally:
        index.close()


def test_copied_segments_make_the_index_inserting_makes(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inserted, copied = tmp_path / "inserted.sqlite", tmp_path / "copied.sqlite"
    assert _rebuild(corpus, inserted, monkeypatch, copy=False) == []
    per_batch = _rebuild(corpus, copied, monkeypatch, copy=True)
    # one segment a batch, and none for the first batch, which holds no record
    assert per_batch[0] == 0 and per_batch[1:] == [1] * (len(per_batch) - 1)
    assert len(per_batch) >= 3
    a, b = _fts(inserted), _fts(copied)
    assert a["segments"] == b["segments"] == (1,)
    # one segment, at least as high up as the inserting build left it (a small
    # corpus's one flushed segment stays at level 0; see SegmentCopier.finish)
    (levels_a, n_a), (levels_b, n_b) = a.pop("structure"), b.pop("structure")
    assert n_a == n_b == 1 and levels_b >= levels_a
    assert a == b
    assert len(a["records"]) == 700 and len(a["vocab"]) > 1000
    assert b["types"] == [("blob",)]
    assert all(a[q] for q in QUERIES if q != '"zzz"')
    assert _dumped(inserted) == _dumped(copied)


def test_an_intermediate_merge_changes_nothing(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    once, merged = tmp_path / "once.sqlite", tmp_path / "merged.sqlite"
    _rebuild(corpus, once, monkeypatch, copy=True)
    merges: list[int] = []
    real = segments.SegmentCopier._merge

    def counted(self: segments.SegmentCopier) -> None:
        merges.append(len(self.segments))
        real(self)

    monkeypatch.setattr(segments, "_MERGE_AT", 2)
    monkeypatch.setattr(segments.SegmentCopier, "_merge", counted)
    _rebuild(corpus, merged, monkeypatch, copy=True)
    assert len(merges) >= 2 and merges[0] == 2
    a, b = _fts(once), _fts(merged)
    assert a["structure"] == b["structure"]
    assert a == b


def test_a_refresh_after_a_copied_rebuild_equals_a_full_rebuild(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    shutil.copytree(corpus, root)
    store = Store(load_config(root))
    target = store.config.index_path
    assert _rebuild(root, target, monkeypatch, copy=True)
    records = sorted((root / "agent-qa-knowledge" / "memory" / "records" / "fact").glob("*.md"))
    for round_ in range(6):  # enough commits for FTS5's automerge to merge segments
        for path in records[round_ * 7 : round_ * 7 + 7]:
            text = path.read_text(encoding="utf-8")
            path.write_text(text.rstrip("\n") + f" Zebra crossing {round_}.\n", encoding="utf-8")
        records[100 + round_].unlink()
        db = IndexDB.open(target, write=True)
        try:
            refresh(store, db)
            assert integrity(db) == "ok"
            incremental = db.dump()
        finally:
            db.close()
        fresh = tmp_path / f"fresh-{round_}.sqlite"
        _rebuild(root, fresh, monkeypatch, copy=False)
        assert incremental == _dumped(fresh)
    # and FTS5 merges the copied segment with the refreshes' as its own
    conn = sqlite3.connect(target)
    conn.execute("INSERT INTO records_fts(records_fts) VALUES('optimize')")
    conn.commit()
    conn.close()
    optimized, full = _fts(target), _fts(fresh)  # (rowids differ: a refresh renumbers)
    assert optimized["structure"][1] == full["structure"][1] == 1
    assert optimized["vocab"] == full["vocab"]
    for q in QUERIES:
        assert _matched(target, q) == _matched(fresh, q)


def _matched(db: Path, query: str) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return sorted(p for (p,) in conn.execute(
            "SELECT r.path FROM records_fts JOIN records r ON r.rowid = records_fts.rowid"
            " WHERE records_fts MATCH ?", (query,)))
    finally:
        conn.close()


def _empty_index(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "empty.sqlite", isolation_level=None)
    create_schema(conn)
    return conn


def test_an_fts_table_of_another_make_is_not_copied_into(tmp_path: Path) -> None:
    conn = _empty_index(tmp_path)
    try:
        assert segments.accepts_segments(conn)
        conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES('pgsz', 4000)")
        assert not segments.accepts_segments(conn)  # pages of another size
        conn.execute("DELETE FROM records_fts_config WHERE k = 'pgsz'")
        assert segments.accepts_segments(conn)
        conn.execute("UPDATE records_fts_data SET block = x'00000000ff000001000000' WHERE id = 10")
        assert not segments.accepts_segments(conn)  # the V2 structure format
        conn.execute("UPDATE records_fts_data SET block = x'000000000101010001010101'"
                     " WHERE id = 10")
        assert not segments.accepts_segments(conn)  # not empty
    finally:
        conn.close()


def test_a_structure_record_of_another_shape_is_refused() -> None:
    good = bytes.fromhex("000000000101010001010101")
    assert segments._segments_of(good) == [(1, 1, 1)]
    for bad in (good[:-1], good + b"\x01", bytes.fromhex("000000000101010101010101"),
                bytes.fromhex("000000000101010001000101"), b"\x00" * 4):
        with pytest.raises(ValueError):
            segments._segments_of(bad)


@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=20))
def test_varints_read_back_as_written(values: list[int]) -> None:
    data = b"".join(map(segments._varint, values))
    assert segments._varints(data) == values


def test_varints_are_sqlites() -> None:
    """Against the averages record SQLite itself writes (varints over 127 in it)."""
    conn = sqlite3.connect(":memory:")
    conn.execute(segments._fts_table("f", "''"))
    conn.executemany("INSERT INTO f(rowid, title, body, anchors) VALUES (?, 'a b', ?, 'c')",
                     [(i, "word " * (i * 40)) for i in range(1, 300)])
    conn.commit()
    (block,) = conn.execute("SELECT block FROM f_data WHERE id = 1").fetchone()
    totals = [299, 598, sum(i * 40 for i in range(1, 300)), 299]
    assert segments._varints(block) == totals
    assert b"".join(map(segments._varint, totals)) == block
    conn.close()


def test_a_failed_merge_fails_the_rebuild_and_leaves_the_old_index(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    shutil.copytree(corpus, root)
    target = Store(load_config(root)).config.index_path
    _rebuild(root, target, monkeypatch, copy=True)
    before = target.read_bytes()

    def broken(self: segments.SegmentCopier) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(segments.SegmentCopier, "finish", broken)
    with pytest.raises(MemidexError) as failure:
        _rebuild(root, target, monkeypatch, copy=True)
    assert "disk" in str(failure.value) or "space" in str(failure.value)
    assert target.read_bytes() == before
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


def test_a_rebuild_failing_in_the_load_merges_nothing_and_leaves_nothing(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    shutil.copytree(corpus, root)
    target = Store(load_config(root)).config.index_path
    calls: list[int] = []
    merged: list[int] = []
    real_insert, real_finish = build.insert_batch, segments.SegmentCopier.finish

    def failing(conn: sqlite3.Connection, batch: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real_insert(conn, batch, **kwargs)

    def finish(self: segments.SegmentCopier) -> None:
        merged.append(1)
        real_finish(self)

    monkeypatch.setattr(build, "insert_batch", failing)
    monkeypatch.setattr(segments.SegmentCopier, "finish", finish)
    with pytest.raises(KeyboardInterrupt):
        _rebuild(root, target, monkeypatch, copy=True)
    assert len(calls) == 3 and merged == []
    assert not target.parent.exists() or list(target.parent.iterdir()) == []
