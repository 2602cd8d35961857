"""What the importers say about a run, for records worth reading (issue 20, items 3, 4, 6):
the test's own title and project, test.step titles with their action and target, the
cause of a failure the importer can tell (a stale test.fail(), an interrupted last
attempt), numbers kept — and how the learning core reads it (its analysis, run here on
the evidence the importer writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import REPO_ROOT
from memidex.evidence import parse_run, validate_run
from memidex.importers import import_report
from memidex.importers.build import STALE_FAIL
from memidex.learning.analysis import classify

REPORTS = REPO_ROOT / "tests/data/reports"


def _write(tmp_path: Path, specs: list[dict[str, Any]], describe: str | None = None
           ) -> Path:
    suite: dict[str, Any] = {"title": "shop/checkout.spec.ts", "file": "shop/checkout.spec.ts",
                             "specs": [] if describe else specs}
    if describe:
        suite["suites"] = [{"title": describe, "specs": specs}]
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"suites": [suite]}), encoding="utf-8")
    return path


def _evidence(tmp_path: Path, specs: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    ev = import_report(_write(tmp_path, specs, **kw), product="p", root=tmp_path).evidence
    assert validate_run(ev) == []
    return ev


def _spec(title: str, *results: dict[str, Any], status: str = "expected",
          project: str = "chromium", expected: str = "passed") -> dict[str, Any]:
    return {"title": title, "tests": [{"status": status, "projectName": project,
                                       "expectedStatus": expected, "results": list(results)}]}


def test_the_title_is_the_specs_own_and_the_project_is_kept(tmp_path: Path) -> None:
    long = "places an order with a very long title " * 5
    ev = _evidence(tmp_path, [_spec(long, {"status": "passed"}, project="Mobile Safari"),
                              _spec(long, {"status": "passed"}, project="chromium")],
                   describe="Checkout")
    a, b = ev["tests"]
    assert a["title"].startswith("places an order with a very long title")
    assert len(a["title"]) == 120 and a["title"].endswith("…")
    assert "Checkout" not in a["title"] and "spec.ts" not in a["title"]
    assert (a["project"], b["project"]) == ("Mobile Safari", "chromium")
    assert a["test_id"].endswith("@Mobile-Safari") and b["test_id"].endswith("@chromium")


def test_real_reports_carry_title_and_project(tmp_path: Path) -> None:
    rwx = import_report(REPORTS / "playwright-rwx-research-captain.json", product="p",
                        root=tmp_path).evidence["tests"]
    assert rwx[0]["title"] == "should allow me to add todo items"
    assert rwx[0]["project"] == "chromium"
    assert {t["project"] for t in rwx} == {"chromium", "firefox", "webkit", "Mobile Chrome",
                                            "Mobile Safari", "Microsoft Edge", "Google Chrome"}
    pytest_run = import_report(REPORTS / "junit-pytest-keinar-Pytest-RCA-Report.xml",
                               product="p", root=tmp_path).evidence["tests"]
    titles = {t["title"] for t in pytest_run}
    assert "test_setup_and_verify_audio_file" in titles  # the testcase's name, no classname
    assert "test_upload_multiple_files[audio_file.wav]" in titles
    assert all("project" not in t for t in pytest_run)  # JUnit has none: the key is left out


def test_test_steps_keep_their_order_action_and_target(tmp_path: Path) -> None:
    steps = [
        {"title": "open the cart", "duration": 5, "steps": [
            {"title": "page.goto(/cart)", "duration": 3},
            {"title": "page.goto('/cart')", "duration": 1}]},
        {"title": "locator.click(getByRole('button', { name: 'Checkout' }))", "duration": 2},
        {"title": "expect.toBeVisible", "duration": 1},
        {"title": "pay", "duration": 9, "error": {"message": (
            "locator.fill: Timeout 5000ms exceeded.\nCall log:\n  - waiting for "
            "getByLabel('Card number')\n")}},
    ]
    ev = _evidence(tmp_path, [_spec("pays", {"status": "failed", "steps": steps, "errors": [
        {"message": "locator.fill: Timeout 5000ms exceeded.\nCall log:\n  - waiting for "
                    "getByLabel('Card number')\n"}]}, status="unexpected")])
    (t,) = ev["tests"]
    got = [(s["title"], s["action"], s["target"]) for s in t["steps"]]
    assert got == [
        ("open the cart", "step", None),
        ("page.goto(/cart)", "goto", None),
        ("page.goto('/cart')", "goto", "page:/cart"),
        ("locator.click(getByRole('button', { name: 'Checkout' }))", "click",
         "el:button:checkout"),
        ("expect.toBeVisible", "assert", None),
        ("pay", "fill", "el:field:card-number"),  # the step's error names both
    ]
    assert t["failure"]["step"] == 5
    assert "5000ms" in t["steps"][5]["error"]  # numbers are kept, never masked


def test_a_test_fail_that_passed_is_a_stale_test_bug(tmp_path: Path) -> None:
    ev = _evidence(tmp_path, [_spec("known bug", {"status": "passed", "duration": 7},
                                    status="unexpected", expected="failed")])
    (t,) = ev["tests"]
    assert t["verdict"] == "fail"
    assert t["failure"] == {"message": STALE_FAIL, "hint": "test-bug", "step": None}
    assert t["steps"] == [] and t["attempts"] == []
    (test,) = parse_run(json.dumps(ev).encode(), source="r").tests
    assert classify(test, passed_on_build=(), build_tag=None).cause == "test-bug"
    # and without its hint, the words alone never read as an app bug or an assertion
    from dataclasses import replace

    bare = replace(test, failure=replace(test.failure, hint=None))  # type: ignore[arg-type]
    assert classify(bare, passed_on_build=(), build_tag=None).cause == "unknown"


def test_a_marked_test_that_timed_out_carries_no_check(tmp_path: Path) -> None:
    rwx = import_report(REPORTS / "playwright-rwx-research-captain.json", product="p",
                        root=tmp_path).evidence["tests"]
    marked = [t for t in rwx if t["test_id"].startswith("example.spec.ts:failing-w/-fail")]
    assert len(marked) == 7
    for t in marked:
        assert t["verdict"] == "fail" and "toHaveTitle" in t["failure"]["message"]
        assert all(s["check"] is None for s in t["steps"])  # its author expects it to fail
    stale = [t for t in rwx if t["test_id"].startswith("example.spec.ts:passing-w/-fail")]
    assert len(stale) == 7 and all(t["failure"]["message"] == STALE_FAIL for t in stale)


def test_an_interrupted_last_attempt_takes_the_failure_from_the_failed_one(
        tmp_path: Path) -> None:
    bk = {t["test_id"]: t for t in import_report(
        REPORTS / "playwright-buerokratt-TDD-Playwright.json", product="p",
        root=tmp_path).evidence["tests"]}
    t = next(v for k, v in bk.items()
             if k.endswith("Working-Time:Card-Header:Verify-switches-in-header@chromium"))
    assert [a["status"] for a in t["attempts"]] == ["fail", "interrupted"]
    assert t["failure"]["message"].startswith(
        "Error: Timed out 5000ms waiting for expect(locator).toBeVisible()")
    step = t["steps"][t["failure"]["step"]]
    assert step["check"] == {"kind": "assert-visible", "passed": False, "expected": "visible",
                             "not_found": True}
    assert step["target"] == "el:text:consider-public-holidays"
    assert "Test ended" not in t["failure"]["message"]


def test_the_learning_core_reads_the_real_reports(tmp_path: Path) -> None:
    """The analysis classifies every failing test of the five real reports, and no
    stale test.fail() reads as an app bug: 10 flaky (the runner said so), 11 test bugs (7
    stale test.fail(), 4 strict-mode violations), 2 app bugs (a failed check that saw
    another text, and a pytest `AssertionError`), 23 unknown (test and action timeouts, a
    test.fail() test that timed out, plain exceptions, and two checks whose element was
    not found at all: a slow page and a missing element look alike)."""
    causes: dict[str, int] = {}
    for path in sorted(REPORTS.glob("*-*-*.*")):
        if path.name.startswith(("billion", "playwright-1.40", "junit-playwright")):
            continue
        ev = import_report(path, product="p", root=tmp_path).evidence
        for test in parse_run(json.dumps(ev).encode(), source=path.name).tests:
            cause = classify(test, passed_on_build=(), build_tag=None)
            if cause is None:
                continue
            causes[cause.cause] = causes.get(cause.cause, 0) + 1
            if test.failure is not None and test.failure.message == STALE_FAIL:
                assert cause.cause == "test-bug"
    assert causes == {"flaky": 10, "test-bug": 11, "app-bug": 2, "unknown": 23}
