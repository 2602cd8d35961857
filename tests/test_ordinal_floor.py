"""A clone without the local run counters (a fresh checkout, a CI machine) continues after
the ordinals its records name: the next run, a new record and a brief all count from the
records, never from 1 again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import REPO_ROOT, run_cli

RUNS = sorted((REPO_ROOT / "examples/runs").glob("r-00*.json"))


def _json(repo: Path, *args: str) -> dict:  # type: ignore[type-arg]
    return json.loads(run_cli(repo, *args, "--json", check=True).stdout)


def test_a_clone_without_counters_numbers_and_serves_after_its_records(repo: Path) -> None:
    for run in RUNS[:9]:
        _json(repo, "runs", "ingest", str(run))
    fact = "fact-el-button-place-order-b9ec294f56697d9c"
    assert _json(repo, "brief", "checkout-happy-path", "--no-record")["ordinal"] == 10
    # The local state is lost (a fresh clone of the committed records).
    shutil.rmtree(repo / ".agent-qa")
    shutil.rmtree(repo / "agent-qa-knowledge/memory/queue", ignore_errors=True)
    assert _json(repo, "brief", "checkout-happy-path", "--no-record")["ordinal"] == 10, \
        "without an index the records are scanned for their highest ordinal"
    run_cli(repo, "knowledge", "rebuild-index", check=True)  # serving needs the index
    brief = _json(repo, "brief", "checkout-happy-path", "--no-record")
    assert brief["ordinal"] == 10  # not 1: the current version (from 8) is what is served
    served = {r["id"]: r for r in brief["records"]}
    assert fact in served and "enabled" in served[fact]["title"]
    # The same run again: its evidence is in the records, so nothing is counted twice.
    again = _json(repo, "runs", "ingest", str(RUNS[8]))
    assert dict((c["id"], c["op"]) for c in again["changes"])[fact] == "noop"
    # The next run gets the next ordinal, after every ordinal the records name.
    import json

    data = json.loads(RUNS[8].read_text(encoding="utf-8"))
    data["run_id"] = "r-next"
    nxt = repo / "r-next.json"
    nxt.write_text(json.dumps(data), encoding="utf-8")
    out = _json(repo, "runs", "ingest", str(nxt))
    assert out["ordinal"] == again["ordinal"] + 1 == 11
    assert dict((c["id"], c["op"]) for c in out["changes"])[fact] == "confirm"
    # A record a person adds starts at the current ordinal, not at 0.
    added = _json(repo, "knowledge", "add", "--kind", "fact", "--anchor", "el:link:help",
                  "--title", "Help opens a drawer")
    shown = _json(repo, "knowledge", "show", added["id"])
    assert shown["valid"]["from"] == 11
