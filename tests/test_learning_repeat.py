"""The same app-bug failure in two runs: the second confirms the unknown it raised (it
once lost the unknown's content hash and refused to write, exit 3), and the fact the
first one closed stays closed: a failure never confirms what it observed."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO_ROOT, run_cli

RUNS = REPO_ROOT / "examples/runs"
UNKNOWN = "unknown-el-button-place-order-ad642770aef0ab5d"
FACT = "fact-el-button-place-order-b9ec294f56697d9c"


def _json(repo: Path, *args: str) -> dict:  # type: ignore[type-arg]
    return json.loads(run_cli(repo, *args, "--json", check=True).stdout)


def test_a_repeated_app_bug_confirms_its_unknown_and_counts_again(repo: Path) -> None:
    for name in ("r-0051", "r-0052", "r-0057"):
        _json(repo, "runs", "ingest", str(RUNS / f"{name}.json"))
    fact = _json(repo, "knowledge", "show", FACT)
    assert fact["status"] == "candidate" and fact["trust"]["confirmations"] == 0
    assert fact["valid"]["from"] == 3 and fact["history"][-1]["valid"]["until"] == 3
    again = json.loads((RUNS / "r-0057.json").read_text(encoding="utf-8"))
    again["run_id"] = "r-0057b"
    path = repo / "r-0057b.json"
    path.write_text(json.dumps(again), encoding="utf-8")
    out = _json(repo, "runs", "ingest", str(path))
    ops = {c["id"]: c for c in out["changes"]}
    assert ops[UNKNOWN]["op"] == "unknown" and ops[UNKNOWN]["contradicts"] == [FACT]
    unknown = _json(repo, "knowledge", "show", UNKNOWN)
    assert unknown["trust"]["confirmations"] == 2
    again_fact = _json(repo, "knowledge", "show", FACT)
    assert again_fact["trust"] == fact["trust"] and again_fact["valid"] == fact["valid"]


def test_a_symlinked_run_store_is_refused_and_nothing_lands_outside(repo: Path,
                                                                    tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (repo / ".agent-qa").mkdir(exist_ok=True)
    (repo / ".agent-qa/runs").symlink_to(outside)
    out = run_cli(repo, "runs", "ingest", str(RUNS / "r-0051.json"))
    assert out.returncode == 4 and "symlink" in out.stderr and "Traceback" not in out.stderr
    assert list(outside.iterdir()) == []
    assert not list((repo / "agent-qa-knowledge/memory/records").rglob("*.md"))


def test_a_fresh_clone_ingesting_a_run_its_records_learned_counts_nothing_twice(
        repo: Path) -> None:
    """A clone has the records but not the run store (``.agent-qa/`` is not committed), so
    the run's digest does not say "already ingested": the records' evidence does. The
    same run ingested again on such a clone confirms nothing a second time."""
    import shutil
    import subprocess

    _json(repo, "runs", "ingest", str(RUNS / "r-0051.json"))
    records = repo / "agent-qa-knowledge/memory/records"
    learned = {p: p.read_bytes() for p in records.rglob("*.md")}
    confirmed = [p for p, data in learned.items() if b"r-0051" in data]
    assert confirmed
    shutil.rmtree(repo / ".agent-qa")  # what a fresh clone has: the records alone
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    out = _json(repo, "runs", "ingest", str(RUNS / "r-0051.json"))
    assert {c["op"] for c in out["changes"]} <= {"noop"}, out["changes"]
    assert {p: p.read_bytes() for p in records.rglob("*.md")} == learned
