"""Reports through the CLI: `runs import` prints run evidence, `runs ingest REPORT` learns
from it (issue 14): cautions about the elements that failed intermittently, no machine
path in any record, the same report twice is the same run."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO_ROOT, run_cli

REPORTS = REPO_ROOT / "tests/data/reports"
PW148 = REPORTS / "playwright-buerokratt-TDD-Playwright.json"
SUREFIRE = REPORTS / "junit-surefire-zeebe-io-flaky-test-extractor-maven-plugin.xml"


def _records(repo: Path) -> dict[str, str]:
    root = repo / "agent-qa-knowledge/memory/records"
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.md"))}


def test_runs_import_prints_evidence_with_the_runners_counts(repo: Path) -> None:
    out = run_cli(repo, "runs", "import", str(PW148), "--product", "shop-web", "--json",
                  check=True)
    doc = json.loads(out.stdout)
    assert doc["counts"] == {"tests": 394, "passed": 90, "failed": 3, "flaky": 2,
                             "skipped": 299}
    assert doc["format"] == "playwright" and doc["run_id"].startswith("import-")
    evidence = doc["evidence"]
    assert len(evidence["tests"]) == 394
    flaky = [t for t in evidence["tests"] if t.get("flaky")]
    assert len(flaky) == 2
    # --output writes the same evidence to a file; stdout then says where.
    target = repo / "run.json"
    plain = run_cli(repo, "runs", "import", str(PW148), "--product", "shop-web",
                    "--output", str(target), check=True)
    assert str(target) in plain.stdout
    assert json.loads(target.read_text(encoding="utf-8")) == evidence


def test_ingesting_a_report_teaches_cautions_about_flaky_elements(repo: Path) -> None:
    out = run_cli(repo, "runs", "ingest", str(PW148), "--product", "shop-web", "--json",
                  check=True)
    doc = json.loads(out.stdout)
    flaky = [t for t, cause in doc["analysis"].items() if cause == "flaky"]
    assert len(flaky) == 2  # the runner's own flaky classification, no history needed
    cautions = [c["id"] for c in doc["changes"] if c["id"].startswith("caution-")]
    assert cautions and any(c.startswith("caution-el-") for c in cautions), cautions
    records = _records(repo)
    for name, text in records.items():
        assert "/home/" not in text and "/Users/" not in text and "C:\\" not in text, name
    # The same report again is the same run: nothing changes.
    again = json.loads(run_cli(repo, "runs", "ingest", str(PW148), "--product", "shop-web",
                               "--json", check=True).stdout)
    assert again["already_ingested"] is True and again["run_id"] == doc["run_id"]
    assert _records(repo) == records


def test_a_junit_flaky_rerun_is_a_flaky_caution(repo: Path) -> None:
    doc = json.loads(run_cli(repo, "runs", "ingest", str(SUREFIRE), "--product", "shop-web",
                             "--json", check=True).stdout)
    assert list(doc["analysis"].values()) == ["flaky"]
    assert [c["op"] for c in doc["changes"]] == ["add"]
    assert doc["changes"][0]["id"].startswith("caution-")


def test_a_file_that_is_neither_evidence_nor_a_report_is_one_error(repo: Path) -> None:
    bad = repo / "notes.txt"
    bad.write_text("hello\n", encoding="utf-8")
    out = run_cli(repo, "runs", "ingest", str(bad), "--product", "shop-web")
    assert out.returncode == 4
    assert out.stderr.count("error:") == 1 and "Traceback" not in out.stderr
    assert str(bad) in out.stderr
    assert not (repo / ".agent-qa/runs").exists()


CTRF = REPO_ROOT / "tests/data/ctrf/cypress-ministryofjustice-hmpps-challenge-support-" \
                   "intervention-plan-ui.json"


def test_a_ctrf_report_imports_and_ingests(repo: Path) -> None:
    doc = json.loads(run_cli(repo, "runs", "import", str(CTRF), "--product", "shop-web",
                             "--json", check=True).stdout)
    assert doc["format"] == "ctrf" and doc["warnings"] == []
    assert doc["counts"] == {"tests": 338, "passed": 334, "failed": 3, "flaky": 1,
                             "skipped": 0}
    # `runs ingest` detects reports by its own probe (the lead's part); --format says it
    out = json.loads(run_cli(repo, "runs", "ingest", str(CTRF), "--format", "ctrf",
                             "--product", "shop-web", "--json", check=True).stdout)
    assert sorted(set(out["analysis"].values())) == ["app-bug", "flaky", "unknown"]
    for name, text in _records(repo).items():
        assert "/Users/" not in text and "paul.massey" not in text, name
