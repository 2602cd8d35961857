"""Versions and windows (issue 8 §3): history entries a replay can use, their windows
validated, typed evidence, the `versions` index, run ordinals for `add`, and an index of
the previous schema brought up to date by the next reading command."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import SPEC_FRONT, make_record, write_record
from memidex.app import Memidex
from memidex.errors import InvalidInputError, Problem, RecordError
from memidex.index.db import IndexDB, IndexOutdated
from memidex.index.query import versions_at
from memidex.index.schema import MIGRATIONS, SCHEMA_VERSION, TABLES
from memidex.records import dump_record, parse_record
from memidex.records.model import (
    MAX_ORDINAL,
    SERVABLE_STATUSES,
    Evidence,
    HistoryEntry,
    Record,
    Trust,
    Valid,
)
from memidex.records.shape import record_dict
from memidex.records.transitions import supersede_in_place
from strategies import evidence_items, records

HEAD = SPEC_FRONT
# line 13: evidence: (or history:), 14: the first item
BODY = "---\nThe button is disabled.\n"


def text(*, valid: str = "{from: 36, until: null}", evidence: list[str] | None = None,
         history: list[str] | None = None) -> str:
    out = HEAD.replace("valid: {from: 36, until: null}", f"valid: {valid}")
    if evidence:
        out += "evidence:\n" + "".join(f"  - {e}\n" for e in evidence)
    if history:
        out += "history:\n" + "".join(f"  - {h}\n" for h in history)
    return out + BODY


def problem(t: str) -> Problem:
    with pytest.raises(RecordError) as info:
        parse_record(t, "records/fact/r.md")
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems[0]


# --- history windows -----------------------------------------------------------------------


def test_regression_overlapping_history_windows_are_a_problem_at_the_history_line() -> None:
    p = problem(text(history=["{valid: {from: 1, until: 20}, title: A, body: a}",
                              "{valid: {from: 10, until: 30}, title: B, body: b}"]))
    assert p.line == 13 and "`history[1]`" in p.reason and "overlap" in p.reason


def test_regression_history_out_of_order_is_a_problem() -> None:
    p = problem(text(history=["{valid: {from: 20, until: 30}, title: B, body: b}",
                              "{valid: {from: 1, until: 10}, title: A, body: a}"]))
    assert "`history[1]`" in p.reason and "oldest first" in p.reason


def test_regression_history_without_until_is_a_problem() -> None:
    p = problem(text(history=["{valid: {from: 1, until: null}, title: A, body: a}"]))
    assert p.line == 13 and "`history.until` must be set" in p.reason
    p = problem(text(history=["{title: A, body: a}"]))
    assert "`history[0]` needs a closed window" in p.reason


def test_regression_history_ending_after_the_current_version_began_is_a_problem() -> None:
    p = problem(text(history=["{valid: {from: 1, until: 40}, title: A, body: a}"]))
    assert p.line == 13 and "`history[0]` ends at 40, after `valid.from` (36)" in p.reason


def test_touching_windows_and_gaps_are_fine() -> None:
    r = parse_record(text(history=["{valid: {from: 1, until: 10}, title: A, body: a}",
                                   "{valid: {from: 12, until: 36}, title: B, body: b}"]),
                     "r.md")
    assert [h.valid for h in r.history] == [Valid(1, 10), Valid(12, 36)]


@pytest.mark.parametrize("where", ["valid: {from: %d, until: null}",
                                   "trust: {source: local, confirmations: %d, "
                                   "contradictions: 0, last_confirmed: 41}"])
def test_regression_huge_ordinals_and_counts_are_problems_not_crashes(where: str) -> None:
    old = where.split(":")[0]
    line = next(ln for ln in HEAD.splitlines() if ln.startswith(old + ":"))
    p = problem(text().replace(line, where % (MAX_ORDINAL + 1)))
    assert str(MAX_ORDINAL) in p.reason or "at most" in p.reason
    assert parse_record(text().replace(line, where % MAX_ORDINAL), "r.md")


def test_regression_a_huge_ordinal_in_a_file_does_not_stop_a_rebuild(repo: Path) -> None:
    good = write_record(repo, make_record(anchor="el:a:1", title="alpha"))
    bad = good.with_name("fact-bad.md")
    huge = "valid: {from: 99999999999999999999,"
    bad.write_text(good.read_text().replace("valid: {from: 0,", huge))
    report = Memidex(repo).rebuild_index()
    assert report.records == 1
    assert [p.path.endswith("fact-bad.md") for p in report.problems] == [True]


def test_old_history_entries_round_trip_byte_for_byte() -> None:
    t = text(history=['{valid: {from: 5, until: 31}, title: Old, body: "was \\"enabled\\""}'])
    r = parse_record(t, "r.md")
    assert r.history[0].trust is None and r.history[0].anchors is None
    assert dump_record(r) == t
    # what a replay reads for it: default trust, the record's anchors, active
    assert r.history[0].resolved(r) == (Trust(), r.anchors, "active")


def test_full_history_entries_round_trip_byte_for_byte() -> None:
    entry = ("{valid: {from: 5, until: 31}, title: Old, body: was enabled, trust: {source: ci, "
             "confirmations: 2, contradictions: 1, last_confirmed: 30}, anchors: [page:/old], "
             "status: candidate}")
    t = text(history=[entry])
    r = parse_record(t, "r.md")
    assert r.history[0] == HistoryEntry(Valid(5, 31), "Old", "was enabled",
                                        Trust("ci", 2, 1, 30), ("page:/old",), "candidate")
    assert dump_record(r) == t
    assert record_dict(r, "r.md")["history"][0]["status"] == "candidate"


@pytest.mark.parametrize(("extra", "reason"), [
    ("trust: {source: web}", "`history[0].trust.source` must be one of"),
    ("trust: {sauce: ci}", "unknown key `history[0].trust.sauce`"),
    ("anchors: [nope]", "`history[0].anchors` must be a list of type:value strings"),
    ("status: gone", "`history[0].status` must be one of"),
    ("colour: red", "`history[0]` must be a mapping of valid, title, body"),
])
def test_bad_history_fields_name_the_entry(extra: str, reason: str) -> None:
    p = problem(text(history=[f"{{valid: {{from: 5, until: 31}}, title: Old, {extra}}}"]))
    assert p.line == 13 and p.reason.startswith(reason), p.reason


def test_supersede_in_place_keeps_what_a_replay_needs() -> None:
    r = parse_record(text(), "r.md")
    new = supersede_in_place(r, title="Enabled at once", ordinal=45)
    old = new.history[-1]
    assert old == HistoryEntry(Valid(36, 45), r.title, r.body, r.trust, r.anchors, r.status)
    assert new.valid == Valid(45, None)
    again = parse_record(dump_record(new), "r.md")
    assert again == new and dump_record(again) == dump_record(new)


# --- evidence ------------------------------------------------------------------------------


def test_evidence_is_typed_and_written_in_the_canonical_form() -> None:
    item = ('{run: r-0041, test: checkout-happy-path, step: 3, observed: "Place order '
            '(disabled): yes", artifact: artifacts/r-0041/3.png, check: assert-disabled}')
    t = text(evidence=[item])
    r = parse_record(t, "r.md")
    assert r.evidence == (Evidence("r-0041", "checkout-happy-path", 3,
                                   "Place order (disabled): yes", check="assert-disabled",
                                   artifact="artifacts/r-0041/3.png"),)
    assert dump_record(r) == t
    assert record_dict(r, "r.md")["evidence"] == [{
        "run": "r-0041", "test": "checkout-happy-path", "step": 3,
        "observed": "Place order (disabled): yes", "artifact": "artifacts/r-0041/3.png",
        "check": "assert-disabled"}]


def test_regression_odd_evidence_keys_are_kept_and_round_trip() -> None:
    item = '{run: r-1, "a b": 1, url: "http://x/y?q=1", zz: null, "é": true}'
    t = text(evidence=[item])
    r = parse_record(t, "r.md")
    assert r.evidence[0].extra == (("a b", 1), ("url", "http://x/y?q=1"), ("zz", None),
                                   ("é", True))
    canonical = dump_record(r)
    assert '  - {run: r-1, a b: 1, url: "http://x/y?q=1", zz: null, "é": true}\n' in canonical
    assert parse_record(canonical, "r.md") == r
    assert dump_record(parse_record(canonical, "r.md")) == canonical


@pytest.mark.parametrize(("item", "reason"), [
    ("{run: 41}", "`evidence[0].run` must be a string, not 41"),
    ("{run: r-1, observed: No}", "`evidence[0].observed` must be a string, not False"),
    ("{run: r-1, step: -1}", "`evidence[0].step` must be a step index"),
    ("{run: r-1, step: '3'}", "`evidence[0].step` must be a step index"),
    ("{check: [a]}", "`evidence.check` must be a string, a whole number"),
    ("{artifact: 3}", "`evidence[0].artifact` must be a string"),
])
def test_regression_mistyped_evidence_is_reported_clearly(item: str, reason: str) -> None:
    p = problem(text(evidence=[item]))
    assert p.line == 13 and p.reason.startswith(reason), p.reason


def test_null_evidence_keys_mean_absent() -> None:
    r = parse_record(text(evidence=["{run: r-1, step: null, observed: x}"]), "r.md")
    assert r.evidence == (Evidence(run="r-1", observed="x"),)
    assert "step" not in dump_record(r)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.lists(evidence_items(), min_size=1, max_size=4))
def test_typed_evidence_and_versions_round_trip_byte_for_byte(
        record: Record, items: list[Evidence]) -> None:
    total = record.evidence_total  # a count of what was seen: never below what is kept
    r = replace(record, evidence=tuple(items),
                evidence_total=None if total is None else max(total, len(items)))
    t = dump_record(r)
    back = parse_record(t, "x.md")
    assert back == r
    assert dump_record(back) == t


# --- the versions index --------------------------------------------------------------------


def _versioned(repo: Path) -> Record:
    r = make_record(title="Third wording", valid=Valid(30), anchors=("page:/checkout",))
    r = replace(r, history=(
        HistoryEntry(Valid(5, 10), "First wording", "one"),
        HistoryEntry(Valid(12, 30), "Second wording", "two", Trust("ci", 4, 0, 29),
                     ("page:/cart",), "candidate"),
    ))
    write_record(repo, r)
    write_record(repo, make_record(anchor="el:other:x", title="Other", valid=Valid(0)))
    write_record(repo, make_record(anchor="el:other:y", product="other-app", title="Elsewhere"))
    return r


@pytest.mark.parametrize(("ordinal", "titles"), [
    (0, ["Other"]),
    (5, ["First wording", "Other"]),
    (9, ["First wording", "Other"]),
    (10, ["Other"]),  # the gap between versions
    (12, ["Second wording", "Other"]),
    (29, ["Second wording", "Other"]),
    (30, ["Third wording", "Other"]),
    (MAX_ORDINAL, ["Third wording", "Other"]),
])
def test_versions_at_gives_the_version_whose_window_holds_the_ordinal(
        repo: Path, ordinal: int, titles: list[str]) -> None:
    r = _versioned(repo)
    m = Memidex(repo)
    m.rebuild_index()
    db = m.reading.open()
    assert db is not None
    rows = versions_at(db, ordinal, "shop-web")
    assert sorted(row.title for row in rows) == sorted(titles)
    mine = [row for row in rows if row.id == r.id]
    if ordinal in (12, 29):
        v = mine[0]
        assert (v.version, v.current, v.status, v.source, v.confirmations) == (
            2, False, "candidate", "ci", 4)
        assert v.anchors == ("el:button:place-order", "page:/cart")
    if ordinal >= 30:
        assert (mine[0].version, mine[0].current) == (3, True)
    if ordinal == 5:  # an entry written before trust/anchors/status were kept
        v = mine[0]
        assert (v.status, v.source, v.anchors) == ("active", "local", r.all_anchors)
    servable = versions_at(db, 12, "shop-web", statuses=SERVABLE_STATUSES, ids=(r.id,))
    assert [v.title for v in servable] == ["Second wording"]
    everywhere = versions_at(db, 5, None, kinds=("fact",))
    assert sorted(v.title for v in everywhere) == ["Elsewhere", "First wording", "Other"]
    m.close()


def test_versions_at_is_one_query(repo: Path) -> None:
    _versioned(repo)
    m = Memidex(repo)
    m.rebuild_index()
    db = m.reading.open()
    assert db is not None
    seen: list[str] = []
    db.conn.set_trace_callback(seen.append)
    versions_at(db, 20, "shop-web")
    db.conn.set_trace_callback(None)
    assert len([s for s in seen if s.lstrip().upper().startswith("SELECT")]) == 1
    m.close()


def test_an_edit_of_the_history_is_seen_by_the_next_refresh(repo: Path) -> None:
    r = _versioned(repo)
    m = Memidex(repo)
    m.rebuild_index()
    write_record(repo, replace(r, history=r.history[1:]))
    db = m.reading.open()
    assert db is not None
    assert [v.title for v in versions_at(db, 5, "shop-web")] == ["Other"]
    assert [v.title for v in versions_at(db, 12, "shop-web", ids=(r.id,))] == ["Second wording"]
    rows = db.conn.execute("SELECT count(*) FROM history_versions").fetchone()[0]
    assert rows == 1
    m.close()


# --- an index of the previous schema -------------------------------------------------------


_DROP_VECTORS = ("DROP TRIGGER records_drop_vectors; DROP TRIGGER records_change_vectors;"
                 " DROP TABLE vectors; DROP TABLE sparse_norms; DROP TABLE records_vocab_i;"
                 " DELETE FROM meta WHERE key = 'vectors_generation';")


def _make_schema_3(path: Path) -> None:
    """Turn a current index into what schema 3 was: no vectors."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(f"{_DROP_VECTORS} DELETE FROM migrations WHERE seq > 3;"
                       " UPDATE meta SET value = '3' WHERE key = 'schema_version';")
    conn.close()


def test_an_index_without_vectors_is_migrated_in_place(repo: Path) -> None:
    # 0004_vectors only adds derived tables: the same file, its rows kept, no rebuild.
    _versioned(repo)
    m = Memidex(repo)
    m.rebuild_index()
    m.close()
    _make_schema_3(m.config.index_path)
    with pytest.raises(IndexOutdated) as info:
        IndexDB.open(m.config.index_path)
    assert info.value.pending == ["0004_vectors"]
    ino = m.config.index_path.stat().st_ino
    m = Memidex(repo)
    result = m.search("wording")
    assert result.level == "lexical-only", result.note
    assert m.config.index_path.stat().st_ino == ino
    db = IndexDB.open(m.config.index_path)
    assert db.meta()["schema_version"] == str(SCHEMA_VERSION)
    assert db.introspect()["missing"] == []
    assert db.meta()["vectors_generation"] == "0"
    db.close()
    m.close()


def _make_schema_1(path: Path) -> None:
    """Turn a current index into what schema 1 was: the new tables gone, one migration."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        "DROP VIEW versions; DROP TABLE history_versions; DROP TABLE runs;"
        " DROP TABLE run_tests; DELETE FROM migrations WHERE seq > 1;"
        f" {_DROP_VECTORS}"
        " UPDATE meta SET value = '1' WHERE key = 'schema_version';")
    conn.close()


def test_an_index_of_the_previous_schema_is_rebuilt_by_the_next_search(repo: Path) -> None:
    _versioned(repo)
    m = Memidex(repo)
    m.rebuild_index()
    m.close()
    _make_schema_1(m.config.index_path)
    with pytest.raises(IndexOutdated) as info:  # a plain open refuses it, naming what it lacks
        IndexDB.open(m.config.index_path)
    assert info.value.pending == ["0002_versions_runs", "0003_ordinal_floor",
                                  "0004_vectors"]
    m = Memidex(repo)
    result = m.search("wording")
    assert result.level == "lexical-only", result.note
    db = IndexDB.open(m.config.index_path)
    assert db.meta()["schema_version"] == str(SCHEMA_VERSION)
    assert db.introspect()["migrations"] == [name for name, _ in MIGRATIONS]
    assert db.conn.execute("SELECT count(*) FROM history_versions").fetchone()[0] == 2
    db.close()
    m.close()


def test_an_index_of_a_newer_schema_is_left_alone(repo: Path) -> None:
    write_record(repo, make_record())
    m = Memidex(repo)
    m.rebuild_index()
    m.close()
    conn = sqlite3.connect(m.config.index_path, isolation_level=None)
    conn.execute("INSERT INTO migrations(seq, name) VALUES (99, '0099_future')")
    conn.close()
    before = m.config.index_path.read_bytes()
    result = Memidex(repo).search("place order")
    assert result.level == "bundle-scan" and "schema" in result.note
    assert m.config.index_path.read_bytes() == before


def test_doctor_lists_migrations_and_tables(repo: Path) -> None:
    _versioned(repo)
    m = Memidex(repo)
    m.rebuild_index()
    index = m.doctor().index
    assert index["migrations"] == [name for name, _ in MIGRATIONS]
    assert set(index["tables"]) == set(TABLES)
    assert index["tables"]["records"] == 3 and index["tables"]["history_versions"] == 2
    assert index["tables"]["records_fts"] == 3 and index["tables"]["runs"] == 0
    assert index["tables"]["versions"] is None  # a view: records + history_versions
    m.close()


# --- run ordinals for `add` ------------------------------------------------------------------


def _ordinals(repo: Path, data: object) -> None:
    path = repo / ".agent-qa" / "build-ordinals.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


def _added(repo: Path, **kw: object) -> Record:
    m = Memidex(repo)
    res = m.add(kind="fact", product="shop-web", anchors=["el:button:new"],
                title=str(kw.get("title", "New")))
    return parse_record((repo / res.path).read_text(), res.path)


def test_add_without_an_ordinals_file_starts_at_zero(repo: Path) -> None:
    assert _added(repo).valid == Valid(0, None)


def test_add_starts_a_new_record_at_the_current_ordinal_and_an_update_keeps_it(
        repo: Path) -> None:
    _ordinals(repo, {"products": {"shop-web": {"next": 42, "builds": {"v1.4.2": 36}},
                                  "other": {"next": 7}}})
    assert _added(repo).valid == Valid(41, None)
    _ordinals(repo, {"products": {"shop-web": {"next": 50}}})
    assert _added(repo, title="Newer wording").valid == Valid(41, None)


@pytest.mark.parametrize("data", ["{not json", '{"products": []}',
                                  '{"products": {"shop-web": {"next": "42"}}}',
                                  '{"products": {"shop-web": {"next": 0}}}',
                                  '{"products": {"shop-web": {"builds": {"v1": -1}}}}',
                                  '{"products": {"shop-web": {"next": 99999999999999999999}}}'])
def test_regression_a_bad_ordinals_file_refuses_add(repo: Path, data: str) -> None:
    _ordinals(repo, data)
    with pytest.raises(InvalidInputError, match="build-ordinals.json"):
        _added(repo)


def test_a_product_without_runs_is_at_zero(repo: Path) -> None:
    _ordinals(repo, {"products": {"other": {"next": 9}}})
    assert _added(repo).valid == Valid(0, None)


def test_a_migration_that_needs_no_rebuild_is_applied_in_place(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No such migration exists yet: pretend 0002 were one, to exercise the path.
    from memidex.index import schema
    from memidex.index.build import upgrade

    write_record(repo, make_record())
    m = Memidex(repo)
    m.rebuild_index()
    m.close()
    _make_schema_1(m.config.index_path)
    ino = m.config.index_path.stat().st_ino
    monkeypatch.setattr(schema, "REBUILT_BY", frozenset())
    assert upgrade(m.store, m.config.index_path, ["0002_versions_runs"]) == "migrated"
    assert m.config.index_path.stat().st_ino == ino  # the same file, not a new one
    db = IndexDB.open(m.config.index_path)
    assert db.introspect()["migrations"] == [name for name, _ in MIGRATIONS]
    assert db.introspect()["missing"] == []
    assert db.counts()["records"] == 1
    db.close()
