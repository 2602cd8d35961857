"""Issue 9 items 8 and 10, issue 10 item 5: doctor tells the truth about the index, the
lease and the inbox; rebuild-index copes with what is in the index's place."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from conftest import make_record, run_cli, write_record

INDEX = "agent-qa-knowledge/memory/index/memidex.sqlite"


def _two_records(repo: Path) -> list[str]:
    ids = [write_record(repo, make_record()).stem,
           write_record(repo, make_record(anchor="el:button:cancel",
                                          title="Cancel order works")).stem]
    assert run_cli(repo, "knowledge", "rebuild-index").returncode == 0
    return ids


def _doctor(repo: Path) -> tuple[int, dict[str, object]]:
    out = run_cli(repo, "doctor", "--json")
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, json.loads(out.stdout)


def _search(repo: Path, query: str) -> dict[str, object]:
    out = run_cli(repo, "knowledge", "search", query, "--json")
    assert out.returncode == 0, out.stderr
    data: dict[str, object] = json.loads(out.stdout)
    return data


def _sql(repo: Path, statement: str) -> None:
    conn = sqlite3.connect(repo / INDEX)
    conn.executescript(statement)
    conn.close()


def test_a_dropped_fts_table_is_reported_and_search_says_bundle_scan(repo: Path) -> None:
    ids = _two_records(repo)
    _sql(repo, "DROP TABLE records_fts;")
    code, report = _doctor(repo)
    found = _search(repo, "order")
    assert found["level"] == "bundle-scan"
    assert sorted(r["id"] for r in found["results"]) == sorted(ids)  # type: ignore[attr-defined]
    assert code == 1 and report["healthy"] is False
    assert report["level"] == "bundle-scan"  # the level a search really uses


def test_emptied_records_table_is_damage_not_an_empty_store(repo: Path) -> None:
    ids = _two_records(repo)
    _sql(repo, "DELETE FROM records;")
    found = _search(repo, "order")
    assert found["level"] == "bundle-scan"
    assert sorted(r["id"] for r in found["results"]) == sorted(ids)  # type: ignore[attr-defined]
    assert found.get("note")
    code, report = _doctor(repo)
    assert code == 1 and report["healthy"] is False
    assert report["level"] == "bundle-scan"
    assert report["records"]["count"] == 2  # type: ignore[index]
    assert run_cli(repo, "knowledge", "rebuild-index").returncode == 0
    code, report = _doctor(repo)
    assert code == 0 and report["level"] == "lexical-only"


def test_doctor_compares_the_index_with_the_files(repo: Path) -> None:
    _two_records(repo)
    code, report = _doctor(repo)
    assert code == 0
    assert report["index"]["matches_files"] is True  # type: ignore[index]
    # one row lost from records (not all): the search path cannot notice cheaply;
    # doctor does (count and fingerprint)
    _sql(repo, "DELETE FROM records WHERE rowid = (SELECT min(rowid) FROM records);")
    code, report = _doctor(repo)
    assert code == 1 and report["healthy"] is False
    assert report["index"]["matches_files"] is False  # type: ignore[index]
    assert report["level"] == "bundle-scan"


def test_a_folder_at_the_index_path_is_moved_aside_by_rebuild(repo: Path) -> None:
    ids = _two_records(repo)
    index = repo / INDEX
    index.unlink()
    index.mkdir()
    (index / "something").write_text("x")
    code, report = _doctor(repo)
    assert code == 1
    assert "folder" in str(report["index"]["reason"])  # type: ignore[index]
    out = run_cli(repo, "knowledge", "rebuild-index")
    assert out.returncode == 0, out.stderr
    assert index.is_file()
    aside = [p for p in index.parent.iterdir() if p.name.startswith("memidex.sqlite.aside-")]
    assert len(aside) == 1 and (aside[0] / "something").read_text() == "x"
    assert sorted(r["id"] for r in _search(repo, "order")["results"]) == sorted(ids)  # type: ignore[attr-defined]


def test_build_files_of_a_killed_rebuild_are_cleaned(repo: Path) -> None:
    _two_records(repo)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = (repo / INDEX).parent
    left = folder / f".memidex.sqlite.build-{dead.pid}-abcd1234"
    left.write_bytes(b"half a build")
    live = folder / f".memidex.sqlite.build-{1}-abcd1234"  # pid 1 is alive: not ours to touch
    live.write_bytes(b"someone else's")
    code, report = _doctor(repo)
    assert not left.exists()
    assert live.exists()
    left.write_bytes(b"half a build")
    assert run_cli(repo, "knowledge", "rebuild-index").returncode == 0
    assert not left.exists()
    live.unlink()


def test_doctor_says_the_heartbeat_is_past_its_ttl(repo: Path) -> None:
    from memidex.write.authority import AUTHORITY_FILE

    _two_records(repo)
    db = repo / "agent-qa-knowledge/memory" / AUTHORITY_FILE
    conn = sqlite3.connect(db)
    import os

    # a holder (this very process: alive) whose heartbeat stopped 100 s ago, TTL 30 s
    conn.execute("UPDATE lease SET token='t', pid=?, pid_start=NULL, boot_id=NULL, host=NULL,"
                 " heartbeat=?, ttl=30 WHERE id=1", (os.getpid(), time.time() - 100))
    conn.commit()
    conn.close()
    code, report = _doctor(repo)
    lease = report["lease"]
    assert lease["stale"] is True  # type: ignore[index]
    assert lease["past_ttl"] is True  # type: ignore[index]
    assert any("TTL" in n for n in report["notes"])  # type: ignore[attr-defined]


def test_doctor_lists_corrections_waiting_in_the_inbox(repo: Path) -> None:
    from memidex.config import load_config
    from memidex.store.files import Store
    from memidex.write.inbox import Queue, encode_change
    from memidex.write.writer import Write

    _two_records(repo)
    store = Store(load_config(repo))
    item = Queue(store.queue_dir).submit(
        "knowledge confirm",
        {"changes": [encode_change(store, Write(make_record(title="Queued")))]})
    code, report = _doctor(repo)
    inbox = report["lease"]["inbox"]  # type: ignore[index]
    assert [i["id"] for i in inbox] == [item]
    assert inbox[0]["command"] == "knowledge confirm"
    assert any("memidex daemon --once" in n for n in report["notes"])  # type: ignore[attr-defined]
