"""A rolled-back run no longer counts in the tests file: not as a pass on its build (the
flaky-by-history rule), not towards a deprecation."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO_ROOT, run_cli

RUNS = REPO_ROOT / "examples/runs"


def _json(repo: Path, *args: str) -> dict:  # type: ignore[type-arg]
    return json.loads(run_cli(repo, *args, "--json", check=True).stdout)


def _passed_builds(repo: Path, test: str) -> list[str]:
    data = json.loads((repo / ".agent-qa/runs/tests-shop-web.json").read_text("utf-8"))
    return list(data["tests"][test]["passed_builds"])


def test_a_rolled_back_pass_is_not_history(repo: Path) -> None:
    _json(repo, "runs", "ingest", str(RUNS / "r-0051.json"))
    _json(repo, "runs", "ingest", str(RUNS / "r-0054.json"))  # v1.4.3: suggestions pass
    assert _passed_builds(repo, "search-suggestions") == ["v1.4.2", "v1.4.3"]
    _json(repo, "knowledge", "rollback", "r-0054")
    assert _passed_builds(repo, "search-suggestions") == ["v1.4.2"]
    # r-0056 (v1.4.3) times out with no hint: with the pass on v1.4.3 rolled back there
    # is no history on that build, so it is not called flaky by history.
    out = _json(repo, "runs", "ingest", str(RUNS / "r-0056.json"))
    assert out["analysis"]["search-suggestions"] != "flaky"
    listed = {r["run_id"]: r for r in _json(repo, "runs", "list")["runs"]}
    assert listed["r-0054"]["rolled_back"] is True
