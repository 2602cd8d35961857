"""CTRF reports (docs/import.md, "CTRF"): the real reports in tests/data/ctrf (byte for
byte from the repositories its README names), detection, the runner's summary, retries
and flaky tests, checks from Playwright's messages, masking, streaming, bad input."""

from __future__ import annotations

import hashlib
import json
import re
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT
from memidex.evidence import TEST_ID_PATTERN, parse_run, validate_run
from memidex.importers import EmptyReportError, ImportResult, ReportError, import_report
from memidex.masking import Masker
from memidex.records.ids import ANCHOR_RE

DATA = REPO_ROOT / "tests/data/ctrf"

# file: (git blob, the runner's counts as the README gives them)
REAL: dict[str, tuple[str, dict[str, int]]] = {
    "playwright-ptrcja-flaky-test-project-playwright.json": (
        "3f7dd29429813e8a76471414c123a641701fa313",
        dict(tests=10, passed=1, failed=9, flaky=0, skipped=0)),
    "playwright-opencrvs-opencrvs-farajaland.json": (
        "ccf33126b6da856a30f68ddc7ba9fe8c5388edc0",
        dict(tests=158, passed=157, failed=0, flaky=0, skipped=1)),
    "cypress-ministryofjustice-hmpps-challenge-support-intervention-plan-ui.json": (
        "0977a1c51d361585a7475a9e0c9837868b81383a",
        dict(tests=338, passed=334, failed=3, flaky=1, skipped=0)),
    "cypress-ska-telescope-ska-oso-pht-ui.json": (
        "7bca24cfb4a9b86c1495ec445af0103c1c162593",
        dict(tests=3, passed=1, failed=2, flaky=0, skipped=0)),
    "mocha-docknetwork-dock-app-testautomation.json": (
        "a54c897a564f5985e5bf8a146b41ce61dbd6af9f",
        dict(tests=8, passed=7, failed=1, flaky=0, skipped=0)),
    "spec-example-ctrf-io-ctrf-with-retries.json": (
        "b2379700ef2fe2cf10c8afef39103628c2acbaf1",
        dict(tests=2, passed=1, failed=0, flaky=1, skipped=0)),
}
MACHINE = re.compile(r"/Users/|/home/jamil314|pati/|zuzanna|mayconmellos|paul\.massey|\x1b")


def _import(name: str | Path, tmp_path: Path, **kw: Any) -> ImportResult:
    path = name if isinstance(name, Path) else DATA / name
    return import_report(path, product="shop-web", root=tmp_path, **kw)


def _tests(result: ImportResult) -> dict[str, dict[str, Any]]:
    return {t["test_id"]: t for t in result.evidence["tests"]}


@pytest.mark.parametrize("name", sorted(REAL))
def test_the_copies_are_the_git_blobs_the_readme_names(name: str) -> None:
    data = (DATA / name).read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's id
    assert blob == REAL[name][0]
    assert REAL[name][0] in (DATA / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(REAL))
def test_each_report_imports_with_the_runners_counts(name: str, tmp_path: Path) -> None:
    result = _import(name, tmp_path)
    assert result.format == "ctrf"
    assert result.counts == REAL[name][1]
    assert result.warnings == []  # the summary agrees with the tests
    ev = result.evidence
    assert validate_run(ev) == []
    assert parse_run(json.dumps(ev).encode(), source=name).as_dict() == ev
    text = json.dumps(ev, ensure_ascii=False)
    assert not MACHINE.findall(text), MACHINE.findall(text)[:3]
    for t in ev["tests"]:
        assert re.fullmatch(TEST_ID_PATTERN[1:-1], t["test_id"])
        assert t["title"] and len(t["title"]) <= 120
        for a in [*t["anchors"], *(s["target"] for s in t["steps"] if s["target"])]:
            assert ANCHOR_RE.fullmatch(a), a


def test_playwrights_reporter_gives_project_file_describes_and_checks(
        tmp_path: Path) -> None:
    tests = _tests(_import("playwright-ptrcja-flaky-test-project-playwright.json", tmp_path))
    prefix = "flaky-test.spec.ts:FriedHats-Coffee-Purchase-Flow---Realistic-Flaky-Tests:"
    race = tests[prefix + "flaky-test---race-condition-with-navigation"]
    assert race["project"] == "chromium" and race["title"] == (
        "flaky test - race condition with navigation")
    assert race["failure"]["message"] == "Test timeout of 30000ms exceeded."
    # the test.step that was running when the test timed out is the failing step
    step = race["steps"][race["failure"]["step"]]
    assert step["title"] == "Navigate with race condition" and step["check"] is None
    drawer = tests[prefix + "flaky-test---cart-drawer-timing-issues"]
    step = drawer["steps"][drawer["failure"]["step"]]
    assert step["action"] == "assert"
    assert step["check"] == {"kind": "assert-url", "passed": False,
                             "expected": "/\\/products\\//"}
    assert step["observed"] == "https://friedhats.com/collections/coffees"
    assert step["target"] == "page:/collections/coffees"
    parallel = tests[prefix + "flaky-test---parallel-test-interference"]
    step = parallel["steps"][parallel["failure"]["step"]]
    assert step["check"] == {"kind": "assert-visible", "passed": False,
                             "expected": "visible", "not_found": True}
    assert step["target"] == "el:link:view-all-coffees" and step["observed"] is None
    assert "Timeout: 5000ms" not in parallel["failure"]["message"]  # said in the first line
    assert "5000ms" in parallel["failure"]["message"]


def test_cypress_retries_and_flaky_tests(tmp_path: Path) -> None:
    tests = _tests(_import(
        "cypress-ministryofjustice-hmpps-challenge-support-intervention-plan-ui.json",
        tmp_path))
    (flaky,) = [t for t in tests.values() if t["flaky"]]
    assert flaky["verdict"] == "pass" and flaky["failure"]["hint"] == "flaky"
    assert [a["status"] for a in flaky["attempts"]] == ["fail", "pass"]
    assert flaky["retries"] == 1
    count = next(t for t in tests.values() if t["failure"] and
                 "Too many elements found" in t["failure"]["message"])
    assert count["verdict"] == "fail" and count["retries"] == 2
    assert [a["status"] for a in count["attempts"]] == ["fail", "fail", "fail"]
    assert count["failure"]["message"] == ("AssertionError: Timed out retrying after 4000ms: "
                                           "Too many elements found. Found '18', expected "
                                           "'17'.")
    # screenshots outside artifacts/ are not kept
    assert all(t["artifacts"] == [] for t in tests.values())


def test_the_specs_retry_attempts_are_the_attempts(tmp_path: Path) -> None:
    tests = _tests(_import("spec-example-ctrf-io-ctrf-with-retries.json", tmp_path))
    flaky = tests["flaky-test"]
    assert flaky["flaky"] and flaky["retries"] == 2
    assert flaky["attempts"] == [
        {"status": "fail", "error": "Connection timeout", "duration_ms": 120},
        {"status": "fail", "error": "Connection timeout", "duration_ms": 130},
        {"status": "pass", "error": None, "duration_ms": 140}]
    assert tests["stable-test"]["verdict"] == "pass"


def test_absolute_file_paths_are_named_from_the_folder_they_share(tmp_path: Path) -> None:
    ids = list(_tests(_import("mocha-docknetwork-dock-app-testautomation.json", tmp_path)))
    assert ids[0] == ("import-oid4vc-credential.test.js:Feature:-Network-Switching-should-"
                      "setup-new-wallet")
    assert all(not i.startswith(("Users", "-", "~")) for i in ids)


def test_a_skipped_playwright_test_and_relative_cypress_files(tmp_path: Path) -> None:
    crvs = _import("playwright-opencrvs-opencrvs-farajaland.json", tmp_path).evidence
    (skipped,) = [t for t in crvs["tests"] if t["verdict"] == "skip"]
    assert skipped["title"] == "13.4.2 Change place of death"
    assert skipped["test_id"].startswith("correction-death/correct-death-record-13.spec.ts:")
    ska = _tests(_import("cypress-ska-telescope-ska-oso-pht-ui.json", tmp_path))
    assert "cypress/integration/observations.feature:Creating-observations-Create-a-" \
           "standard-observation" in ska


# -- detection, summary, masking, bad input -----------------------------------------------


def _write(tmp_path: Path, data: Any, name: str = "ctrf.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _report(tests: list[Any], **summary: int) -> dict[str, Any]:
    real = [t for t in tests if isinstance(t, dict)]
    counts = {"tests": len(real), "passed": sum(t["status"] == "passed" for t in real),
              "failed": sum(t["status"] == "failed" for t in real), "skipped": 0,
              "pending": 0, "other": 0, "start": 1, "stop": 2, **summary}
    return {"results": {"tool": {"name": "jest"}, "summary": counts, "tests": tests}}


def test_the_format_is_detected_and_can_be_confirmed(tmp_path: Path) -> None:
    name = "cypress-ska-telescope-ska-oso-pht-ui.json"
    assert _import(name, tmp_path, fmt="ctrf").format == "ctrf"
    with pytest.raises(ReportError, match="--format playwright was asked for, but the file "
                                          "is a ctrf report"):
        _import(name, tmp_path, fmt="playwright")


def test_a_summary_that_disagrees_is_a_warning(tmp_path: Path) -> None:
    tests = [{"name": "a", "status": "passed", "duration": 1},
             {"name": "b", "status": "failed", "duration": 1, "message": "boom"}]
    result = _import(_write(tmp_path, _report(tests, passed=5)), tmp_path)
    assert result.counts == dict(tests=2, passed=1, failed=1, flaky=0, skipped=0)
    (warning,) = result.warnings
    assert "summary (tests 2, passed 5" in warning and "the tests are trusted" in warning


def test_statuses_pending_other_and_unknown(tmp_path: Path) -> None:
    tests = [{"name": "p", "status": "pending", "duration": 0},
             {"name": "o", "status": "other", "duration": 0, "rawStatus": "todo"},
             {"name": "x", "status": "exploded", "duration": 0},
             "not a test"]
    result = _import(_write(tmp_path, _report(tests, pending=1, other=2)), tmp_path)
    assert result.counts == dict(tests=3, passed=0, failed=0, flaky=0, skipped=3)
    warnings = " ".join(result.warnings)
    assert "'exploded'" in warnings and "status `other`" in warnings
    assert "not an object" in warnings


def test_secrets_in_ctrf_are_masked_before_ids(tmp_path: Path) -> None:
    secret = "tok-7Hx92kLq"
    tests = [{"name": f"login as {secret}", "status": "failed", "duration": 3,
              "suite": ["chromium", "a.spec.ts", "auth"], "filePath": "/w/a.spec.ts",
              "message": f"Error: locator.fill: Timeout 5000ms exceeded. value {secret}"},
             {"name": "ok", "status": "passed", "duration": 1,
              "suite": [f"staging-{secret}", "a.spec.ts"], "filePath": "/w/a.spec.ts"}]
    masker = Masker(secrets=(("token", secret),))
    ev = _import(_write(tmp_path, {"results": {"tool": {"name": "playwright"},
                                               "summary": {}, "tests": tests}}),
                 tmp_path, masker=masker).evidence
    text = json.dumps(ev)
    assert secret not in text and validate_run(ev) == []
    assert [t["test_id"] for t in ev["tests"]] == [
        "a.spec.ts:auth:login-as-secret-token@chromium", "a.spec.ts:ok@staging-secret-token"]


@pytest.mark.parametrize(("content", "words"), [
    ('{"results": {"tool": {"name": "x"}, "summary": {}, "tests": []}}', "holds no tests"),
    ('{"results": {"tests": "no"}}', "holds no tests"),
    ('{"results": {"tests": [{"name": "a", "status": "passed"', "unexpected end of the file"),
    ('{"results": {"tests": [{"name": "\\ud800", "status": "passed"}]}}', "surrogate"),
    ('{"results": [1]}', "holds no tests"),
])
def test_bad_ctrf_is_one_error(tmp_path: Path, content: str, words: str) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(ReportError) as info:
        _import(path, tmp_path)
    assert words in info.value.message and str(path) in info.value.message
    if words == "holds no tests":
        assert isinstance(info.value, EmptyReportError)


def test_a_big_ctrf_report_is_read_as_a_stream(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    tests = []
    for i in range(4000):
        failing = i % 10 == 0
        tests.append({"name": f"test {i} – ünïcode", "status": "failed" if failing
                      else "passed", "duration": 10, "filePath": f"e2e/f{i // 40}.cy.ts",
                      "message": f"AssertionError: Timed out retrying after 4000ms: {i}"
                      if failing else None,
                      "stdout": ["x" * 2000] * 2, "screenshot": "A" * 1500})
    path.write_text(json.dumps({"results": {"tool": {"name": "cypress"},
                                            "summary": {"tests": 4000},
                                            "tests": tests}}, ensure_ascii=False),
                    encoding="utf-8")
    size = path.stat().st_size
    assert size > 20_000_000
    _import("cypress-ska-telescope-ska-oso-pht-ui.json", tmp_path)  # imports warmed
    tracemalloc.start()
    try:
        result = _import(path, tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.counts == dict(tests=4000, passed=3600, failed=400, flaky=0, skipped=0)
    assert peak < 0.8 * size, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB report"
