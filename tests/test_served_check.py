"""What the agent knew: a brief records the ids it served with the run ordinal and its
search level; `runs show` checks a run's served_records against them and `doctor`
reports the level each recent run's briefs had (issue 12, item 6)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO_ROOT, run_cli

RUNS = REPO_ROOT / "examples/runs"


def _json(repo: Path, *args: str) -> dict:  # type: ignore[type-arg]
    return json.loads(run_cli(repo, *args, "--json", check=True).stdout)


def test_runs_show_names_served_records_no_brief_gave(repo: Path) -> None:
    _json(repo, "runs", "ingest", str(RUNS / "r-0051.json"))
    _json(repo, "runs", "ingest", str(RUNS / "r-0052.json"))
    brief = _json(repo, "brief", "checkout-happy-path", "--anchor", "page:/checkout")
    assert brief["ordinal"] == 3 and brief["records"]
    given = sorted(r["id"] for r in brief["records"])
    # The next run says which records its steps were served: one the brief gave, one not.
    run = json.loads((RUNS / "r-0053.json").read_text(encoding="utf-8"))
    test = next(t for t in run["tests"] if t["test_id"] == "checkout-happy-path")
    test["steps"][0]["served_records"] = [given[0], "fact-el-button-nowhere-0000000000000000"]
    for step in test["steps"][1:]:
        step.pop("served_records", None)
    path = repo / "r-0053.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    assert _json(repo, "runs", "ingest", str(path))["ordinal"] == 3
    shown = _json(repo, "runs", "show", run["run_id"])
    checkout = next(t for t in shown["tests"] if t["test_id"] == "checkout-happy-path")
    assert checkout["briefed"] == given
    assert checkout["not_briefed"] == ["fact-el-button-nowhere-0000000000000000"]
    assert shown["levels"] == ["lexical-only"]
    other = next(t for t in shown["tests"] if t["test_id"] != "checkout-happy-path")
    assert other["briefed"] == [] and other["not_briefed"] == []  # no brief: nothing claimed
    recent = _json(repo, "doctor")["recent_runs"]
    assert [(r["run_id"], r["levels"]) for r in recent] == [
        ("r-0051", []), ("r-0052", []), (run["run_id"], ["lexical-only"])]
    assert "r-0053 (ordinal 3): lexical-only" in run_cli(repo, "doctor").stdout
