"""Hardening, the index under attack: bytes flipped in its schema pages (the
``sqlite_master`` b-tree on page 1: its page header, its cell pointers, its cells) and
every reading command still answers, error-free, at the bundle-scan level (SPEC §4);
`doctor` says the index is damaged; `runs ingest` learns, and `rebuild-index` repairs it.

Real SQLite files, damaged byte by byte; the real `memidex` command.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import run_cli
from learnkit import example, learned_repo

INDEX = "agent-qa-knowledge/memory/index/memidex.sqlite"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository that learned r-0051, with its index built."""
    root = learned_repo(tmp_path_factory.mktemp("indexed") / "repo")
    assert run_cli(root, "knowledge", "rebuild-index").returncode == 0
    return root


def _schema_spots(path: Path) -> dict[str, int]:
    """Offsets in the schema b-tree (``sqlite_master``): page 1 — its header and its child
    pointers when it is an interior page — and a leaf page of it (its header, a cell in the
    middle of its content, its last bytes)."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[16:18], "big") or 65536
    spots = {"header": 100}
    leaf = 0  # page 1's own offset: the schema fits in one page
    if raw[100] == 0x05:  # an interior page: 12-byte header, then its cell pointers
        first_cell = int.from_bytes(raw[112:114], "big")
        child = int.from_bytes(raw[first_cell:first_cell + 4], "big")
        spots["pointers"] = 108  # the right-most child pointer
        leaf = (child - 1) * size
    assert raw[leaf + (100 if leaf == 0 else 0)] == 0x0D, "a leaf page of the schema"
    head = leaf + (100 if leaf == 0 else 0)
    content = int.from_bytes(raw[head + 5:head + 7], "big") or 65536
    spots.update({"leaf": head, "cell": leaf + content + (size - content) // 2,
                  "end": leaf + size - 19})
    return spots


def _damaged(indexed: Path, tmp_path: Path, spot: str) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(indexed, root, symlinks=True)
    path = root / INDEX
    at = _schema_spots(path)[spot]
    raw = bytearray(path.read_bytes())
    for i in range(at, at + 16):
        raw[i] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises((sqlite3.DatabaseError, UnicodeDecodeError)):  # damaged for SQLite
        conn = sqlite3.connect(path)
        try:
            conn.execute("SELECT count(*) FROM records").fetchone()
            conn.execute("PRAGMA integrity_check").fetchall()
            raise sqlite3.DatabaseError("not damaged: " + spot)
        finally:
            conn.close()
    return root


def _clean(out: object, args: tuple[str, ...]) -> None:
    stderr = getattr(out, "stderr", "")
    assert "Traceback" not in stderr and "DatabaseError" not in stderr, (args, stderr)
    assert "error:" not in stderr, (args, stderr)


SPOTS = ["header", "pointers", "leaf", "cell", "end"]


@pytest.mark.parametrize("spot", SPOTS)
def test_reading_commands_answer_from_the_records_when_the_schema_is_damaged(
        indexed: Path, tmp_path: Path, spot: str) -> None:
    root = _damaged(indexed, tmp_path, spot)
    raw = (root / INDEX).read_bytes()
    for args in (("brief", "checkout-happy-path", "--json"),
                 ("knowledge", "search", "place order", "--json"),
                 ("knowledge", "list", "--json"),
                 ("knowledge", "show", "procedure-test-checkout", "--json")):
        out = run_cli(root, *args)
        _clean(out, args)
        assert out.returncode == 0, (args, out.stderr)
        data = json.loads(out.stdout)
        if "level" in data:
            assert data["level"] == "bundle-scan", (args, data["level"])
    found = json.loads(run_cli(root, "knowledge", "search", "place order", "--json").stdout)
    assert found["results"], found  # the records still answer
    listed = json.loads(run_cli(root, "knowledge", "list", "--json").stdout)
    assert len(listed["records"]) == 16
    assert (root / INDEX).read_bytes() == raw  # a reader never rewrites the index


@pytest.mark.parametrize("spot", SPOTS)
def test_doctor_says_the_index_is_damaged(indexed: Path, tmp_path: Path, spot: str) -> None:
    root = _damaged(indexed, tmp_path, spot)
    out = run_cli(root, "doctor", "--json")
    assert "Traceback" not in out.stderr and "DatabaseError" not in out.stderr, out.stderr
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert data["level"] == "bundle-scan"
    assert "damaged" in json.dumps(data["index"]) or "damaged" in json.dumps(data["notes"])
    human = run_cli(root, "doctor")
    assert "damaged" in human.stdout and "Traceback" not in human.stderr


@pytest.mark.parametrize("spot", ["header", "cell"])
def test_runs_ingest_learns_beside_a_damaged_index_and_rebuild_repairs_it(
        indexed: Path, tmp_path: Path, spot: str) -> None:
    root = _damaged(indexed, tmp_path, spot)
    out = run_cli(root, "runs", "ingest", str(example("r-0052")), "--json")
    _clean(out, ("runs", "ingest"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["ordinal"] == 2
    rebuilt = run_cli(root, "knowledge", "rebuild-index")
    assert rebuilt.returncode == 0, rebuilt.stderr
    doctor = json.loads(run_cli(root, "doctor", "--json").stdout)
    assert doctor["level"] == "lexical-only", doctor
