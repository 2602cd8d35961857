"""Importing test-runner reports (docs/import.md): the real reports in tests/data/reports
(copied byte for byte from tests/data/reports/README-listed projects), hand-made ones of
other versions, and bad input."""

from __future__ import annotations

import hashlib
import json
import random
import re
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT
from memidex.errors import EXIT_INVALID, InvalidInputError, UsageError
from memidex.evidence import RUN_ID_PATTERN, TEST_ID_PATTERN, parse_run, validate_run
from memidex.importers import (
    EmptyReportError,
    ImportResult,
    ReportError,
    import_report,
)
from memidex.masking import Masker
from memidex.records.ids import ANCHOR_RE

DATA = REPO_ROOT / "tests/data/reports"
SHARED = Path("/work/shared/data/reports")

# the runner's own counts, from the reports' README
REAL: dict[str, tuple[str, dict[str, int]]] = {
    "playwright-rwx-research-captain.json": ("playwright", dict(
        tests=224, passed=179, failed=24, flaky=7, skipped=14)),
    "playwright-buerokratt-TDD-Playwright.json": ("playwright", dict(
        tests=394, passed=90, failed=3, flaky=2, skipped=299)),
    "playwright-jay-UT-utis-playwright-framework.json": ("playwright", dict(
        tests=16, passed=15, failed=1, flaky=0, skipped=0)),
    "junit-pytest-keinar-Pytest-RCA-Report.xml": ("junit", dict(
        tests=32, passed=18, failed=8, flaky=0, skipped=6)),
    "junit-surefire-zeebe-io-flaky-test-extractor-maven-plugin.xml": ("junit", dict(
        tests=1, passed=0, failed=0, flaky=1, skipped=0)),
}
HANDMADE = {
    "playwright-1.40-handmade.json": ("playwright", dict(
        tests=8, passed=4, failed=2, flaky=1, skipped=1)),
    "junit-playwright-handmade.xml": ("junit", dict(
        tests=3, passed=1, failed=1, flaky=0, skipped=1)),
}
# the machines that wrote the reports: none of this may reach the evidence
MACHINE = re.compile(r"/home/(?:danyilk|ci|runner)\b|/Users/|(?<![A-Za-z])[A-Za-z]:[\\/]|"
                     r"danyilk|kylekthompson|keinar|peter|\\Users\\|utis-playwright-framework"
                     r"|\x1b")
VERDICT_OF = {"passed": "pass", "failed": "fail", "skipped": "skip"}


def _import(name: str, tmp_path: Path, **kw: Any) -> ImportResult:
    return import_report(DATA / name, product="shop-web", root=tmp_path, **kw)


def _tests(result: ImportResult) -> dict[str, dict[str, Any]]:
    return {t["test_id"]: t for t in result.evidence["tests"]}


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


# -- the real reports -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REAL))
def test_the_copies_are_the_real_reports(name: str) -> None:
    if not SHARED.is_dir():
        pytest.skip("the shared reports are not on this machine")
    assert (DATA / name).read_bytes() == (SHARED / name).read_bytes()


@pytest.mark.parametrize("name", sorted({**REAL, **HANDMADE}))
def test_each_report_imports_with_the_runners_counts(name: str, tmp_path: Path) -> None:
    fmt, counts = {**REAL, **HANDMADE}[name]
    result = _import(name, tmp_path)
    assert result.format == fmt
    assert result.counts == counts
    ev = result.evidence
    assert validate_run(ev) == []
    assert len(ev["tests"]) == counts["tests"]
    verdicts = [t["verdict"] for t in ev["tests"]]
    flaky = [t for t in ev["tests"] if t["flaky"]]
    assert len(flaky) == counts["flaky"]
    assert verdicts.count("fail") == counts["failed"]
    assert verdicts.count("skip") == counts["skipped"]
    assert verdicts.count("pass") == counts["passed"] + counts["flaky"]
    # the evidence is what parse_run reads back, unchanged
    raw = json.dumps(ev).encode()
    assert parse_run(raw, source=name).as_dict() == ev
    for t in ev["tests"]:
        assert re.fullmatch(TEST_ID_PATTERN[1:-1], t["test_id"])
        for a in [*t["anchors"], *(s["target"] for s in t["steps"] if s["target"]),
                  *(a for s in t["steps"] for a in s["anchors"])]:
            assert ANCHOR_RE.fullmatch(a), a


@pytest.mark.parametrize("name", sorted({**REAL, **HANDMADE}))
def test_no_path_of_the_reports_machine_reaches_the_evidence(name: str,
                                                             tmp_path: Path) -> None:
    text = json.dumps(_import(name, tmp_path).evidence, ensure_ascii=False)
    found = MACHINE.findall(text)
    assert not found, found[:5]


def test_flaky_tests_are_flaky_with_each_attempt_kept(tmp_path: Path) -> None:
    for name in ("playwright-rwx-research-captain.json",
                 "playwright-buerokratt-TDD-Playwright.json",
                 "junit-surefire-zeebe-io-flaky-test-extractor-maven-plugin.xml"):
        for t in _import(name, tmp_path).evidence["tests"]:
            if not t["flaky"]:
                continue
            assert t["verdict"] == "pass"
            assert t["failure"]["hint"] == "flaky"
            statuses = [a["status"] for a in t["attempts"]]
            assert statuses[-1] == "pass" and statuses[0] in ("fail", "timeout", "error")
            assert all(a["error"] for a in t["attempts"][:-1])
            assert t["retries"] == len(t["attempts"]) - 1
    surefire = _import("junit-surefire-zeebe-io-flaky-test-extractor-maven-plugin.xml",
                       tmp_path)
    (t,) = surefire.evidence["tests"]
    assert t["test_id"] == "com.github.pihme.jenkinstestbed.module1.FlakyTest.flakyTest"
    assert t["attempts"][0] == {"status": "fail", "duration_ms": None,
                                "error": "java.lang.AssertionError: failed"}


def test_surefire_counts_that_disagree_are_a_warning(tmp_path: Path) -> None:
    result = _import("junit-surefire-zeebe-io-flaky-test-extractor-maven-plugin.xml",
                     tmp_path)
    (warning,) = result.warnings
    assert "claim 2 tests" in warning and "hold 1 test cases" in warning
    assert "trusted" in warning


def test_locators_quoted_in_errors_become_anchors(tmp_path: Path) -> None:
    rwx = _import("playwright-rwx-research-captain.json", tmp_path)
    failing = [t for t in rwx.evidence["tests"] if t["verdict"] == "fail"]
    assert any(t["anchors"][:1] == ["el:field:mark-all-as-complete"] for t in failing)
    assert "el:testid:todo-item" in {a for t in rwx.evidence["tests"] for a in t["anchors"]}

    bk = _tests(_import("playwright-buerokratt-TDD-Playwright.json", tmp_path))
    strict = next(t for i, t in bk.items() if "Welcome-Message-textarea-visibility" in i)
    assert strict["failure"]["hint"] == "test-bug"
    # the second suggestion, locator('label').filter(…), is a bare tag: no anchor
    assert strict["anchors"][:2] == ["el:text:welcome-message", "el:heading:welcome-message"]
    assert "el:css:label" not in strict["anchors"]
    step = strict["steps"][strict["failure"]["step"]]
    assert step["target"] == "el:text:welcome-message" and step["action"] == "assert"
    seconds = next(t for i, t in bk.items() if "bubble-message-seconds" in i)
    assert seconds["anchors"][0] == ('el:css:label:has-text("Widget bubble message seconds")'
                                     ' + input[type="number"]')
    setup = bk["admin/.auth/auth.setup.js:authenticate@setup"]
    assert setup["flaky"] and setup["anchors"] == ["page:/chat/active"]
    assert setup["steps"][setup["failure"]["step"]]["action"] == "wait"
    saturday = [t for t in bk.values() if 'el:css:label:has-text("Saturday")' in t["anchors"]]
    assert saturday  # locator('label…').locator('..') names the label

    jay = _tests(_import("playwright-jay-UT-utis-playwright-framework.json", tmp_path))
    (bad,) = [t for t in jay.values() if t["verdict"] == "fail"]
    assert bad["anchors"] == ["el:xpath://div[@data-test-id='login.unknownKey1']"]
    assert bad["failure"]["message"].startswith(
        "Error: expect(locator).toContainText(expected) failed | Locator: ")
    assert "Timeout: 5000ms" in bad["failure"]["message"]

    pytest_run = _tests(_import("junit-pytest-keinar-Pytest-RCA-Report.xml", tmp_path))
    anchors = {a for t in pytest_run.values() for a in t["anchors"]}
    assert "el:testid:create" in anchors
    # the strict-mode suggestions there name generated ids: no anchor; the ambiguous
    # locator is the failing step's target
    assert not any("6874bcb4437beded879c3ab8" in a for a in anchors)
    strict_runs = [t for t in pytest_run.values() if t["failure"] and
                   "strict mode violation" in t["failure"]["message"]]
    assert len(strict_runs) == 3
    for t in strict_runs:
        step = t["steps"][t["failure"]["step"]]
        assert step["target"] == 'el:css:[data-testid^="checkbox-cell-"]:nth-of-type(1)'
        assert step["check"] is None and step["action"] == "wait"
    hints = [t["failure"]["hint"] for t in pytest_run.values() if t["failure"]]
    assert hints.count("test-bug") == 3  # the three strict-mode violations


def test_failure_messages_are_clean_first_lines(tmp_path: Path) -> None:
    for name in REAL:
        for t in _import(name, tmp_path).evidence["tests"]:
            failure = t["failure"]
            if failure is None:
                continue
            assert "\x1b" not in failure["message"] and "\n" not in failure["message"]
            assert 0 < len(failure["message"]) <= 2000


def test_test_steps_become_steps_and_the_failing_one_is_named(tmp_path: Path) -> None:
    jay = _import("playwright-jay-UT-utis-playwright-framework.json", tmp_path)
    first = jay.evidence["tests"][0]
    assert first["verdict"] == "pass" and first["failure"] is None
    assert [s["title"] for s in first["steps"]][:2] == [
        "Step 1: Navigate to Henry Schein UK Medical URL",
        "Step 2: Verify the Henry Schein icon should be visible on the page"]
    assert {s["action"] for s in first["steps"]} == {"step"}
    assert [s["index"] for s in first["steps"]] == list(range(len(first["steps"])))
    (bad,) = [t for t in jay.evidence["tests"] if t["verdict"] == "fail"]
    failing = bad["steps"][bad["failure"]["step"]]
    assert failing["title"] == "Step 5: Verify the user cannot sign in successfully"
    assert failing["target"] == "el:xpath://div[@data-test-id='login.unknownKey1']"
    assert failing["error"].startswith("Error: expect(locator).toContainText")


def test_test_ids_carry_the_project_only_when_there_are_several(tmp_path: Path) -> None:
    rwx = _import("playwright-rwx-research-captain.json", tmp_path).evidence["tests"]
    ids = [t["test_id"] for t in rwx]
    assert len(set(ids)) == len(ids)
    assert ids[0] == "demo-todo-app.spec.ts:New-Todo:should-allow-me-to-add-todo-items@chromium"
    assert {i.rsplit("@", 1)[1] for i in ids} == {
        "chromium", "firefox", "webkit", "Mobile-Chrome", "Mobile-Safari", "Microsoft-Edge",
        "Google-Chrome"}
    jay = _import("playwright-jay-UT-utis-playwright-framework.json", tmp_path)
    assert not any("@" in t["test_id"] for t in jay.evidence["tests"])


def test_the_run_id_is_a_hash_of_the_report(tmp_path: Path) -> None:
    name = "playwright-jay-UT-utis-playwright-framework.json"
    a, b = _import(name, tmp_path), _import(name, tmp_path)
    digest = hashlib.sha256((DATA / name).read_bytes()).hexdigest()
    assert a.evidence == b.evidence
    assert a.run_id == f"import-{digest[:16]}"
    assert re.fullmatch(RUN_ID_PATTERN[1:-1], a.run_id)
    c = _import(name, tmp_path, run_id="r-0099", build_tag="v1.2.3", ci=True)
    assert (c.run_id, c.evidence["build_tag"], c.evidence["ci"]) == ("r-0099", "v1.2.3", True)
    assert c.evidence["product"] == "shop-web"


def test_steps_anchors_annotations_and_artifacts_of_a_1_40_report(tmp_path: Path) -> None:
    result = _import("playwright-1.40-handmade.json", tmp_path)
    tests = _tests(result)
    order = tests["checkout.spec.ts:places-an-order"]
    assert [s["title"] for s in order["steps"][:4]] == [
        "open the cart", "page.goto('/cart')",
        "click getByRole('button', { name: 'Checkout' })", "fill the card"]
    assert order["steps"][1]["target"] == "page:/cart"
    assert order["steps"][2]["target"] == "el:button:checkout"
    verify = order["steps"][4]
    assert (verify["action"], verify["target"], verify["observed"], verify["check"]) == (
        "verify", "el:button:place-order", "Place order (disabled)",
        {"kind": "assert-disabled", "passed": True, "expected": None})
    assert order["anchors"][0] == "flow:checkout"
    # only the attachment inside artifacts/ is kept; the inline body never is
    assert order["artifacts"] == ["artifacts/r-7/places-an-order.png"]
    assert any("Not An Anchor" in w for w in result.warnings)
    assert any("'quarantined'" in w for w in result.warnings)
    flaky = tests["checkout.spec.ts:shows-the-place-order-button"]
    assert flaky["flaky"] and flaky["anchors"] == ["el:button:place-order"]
    assert [a["status"] for a in flaky["attempts"]] == ["fail", "pass"]
    assert flaky["artifacts"] == []  # test-results/ is not artifacts/
    sandbox = tests["checkout.spec.ts:pays-in-the-sandbox"]
    assert sandbox["failure"]["hint"] is None  # an environment failure: the analysis says
    assert sandbox["steps"][0]["action"] == "goto"
    assert sandbox["steps"][0]["target"] == "page:/session"
    total = tests["checkout.spec.ts:shows-the-cart-total"]
    assert total["failure"]["step"] == 1 and total["steps"][1]["target"] == "el:testid:cart-total"
    assert "~/src/shop/tests/checkout.spec.ts" in total["steps"][1]["error"]
    assert tests["checkout.spec.ts:a-test-marked-fail"]["verdict"] == "pass"
    assert "checkout.spec.ts:guest-checkout:places-an-order-as-a-guest" in tests


def test_a_report_written_in_this_repository_keeps_relative_paths(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "artifacts/run").mkdir(parents=True)
    report = json.loads((DATA / "playwright-1.40-handmade.json").read_text())
    text = json.dumps(report).replace("/home/ci/work/shop", str(root))
    report = json.loads(text)
    del report["config"]
    path = _write(tmp_path, "r.json", report)
    result = import_report(path, product="shop-web", root=root)
    order = _tests(result)["checkout.spec.ts:places-an-order"]
    assert order["artifacts"] == ["artifacts/r-7/places-an-order.png"]
    assert str(root) not in json.dumps(result.evidence)


def test_junit_from_playwright(tmp_path: Path) -> None:
    tests = _tests(_import("junit-playwright-handmade.xml", tmp_path))
    order = tests["checkout.spec.ts:Checkout:places-an-order"]
    assert order["anchors"] == ["flow:checkout"]
    assert order["artifacts"] == ["artifacts/junit/places-an-order.png"]
    failed = tests["checkout.spec.ts:Checkout:shows-suggestions"]
    assert failed["failure"]["message"].startswith("Error: Timed out 5000ms")
    assert failed["anchors"] == ["el:testid:suggestions"]


def test_secrets_are_masked(tmp_path: Path) -> None:
    (tmp_path / ".agent-qa").mkdir()
    (tmp_path / ".agent-qa/secrets.yaml").write_text("sandbox: pay.sandbox.test\n")
    result = _import("playwright-1.40-handmade.json", tmp_path)
    text = json.dumps(result.evidence)
    assert "pay.sandbox.test" not in text and "[secret:sandbox]" in text
    masked = _import("playwright-1.40-handmade.json", tmp_path,
                     masker=Masker(secrets=(("cart", "cart-total"),)))
    assert "el:testid:[secret:cart]" in json.dumps(masked.evidence)


# -- bad input --------------------------------------------------------------------------


def _refused(path: Path, tmp_path: Path, match: str, **kw: Any) -> ReportError:
    with pytest.raises(ReportError) as info:
        import_report(path, product="shop-web", root=tmp_path, **kw)
    err = info.value
    assert isinstance(err, InvalidInputError) and err.exit_code == EXIT_INVALID
    assert str(path) in err.message and "\n" not in err.message
    assert re.search(match, err.message), err.message
    return err


@pytest.mark.parametrize(("content", "match"), [
    ("hello, world", "neither JSON nor XML"),
    ("", "empty"),
    ("[1, 2]", "JSON list"),
    ('{"config": {}, "stats": {}}', "not a Playwright JSON report"),
    ('{"config": {}, "suites": [{"title": "a", "specs": [', r":1: unexpected end"),
    ('{\n"suites": [\n{"title": "a", "specs": [{"tests": [}]}]}', r":3: not JSON"),
    ('{"suites": []} trailing', "more text after"),
    ('{"suites": [], "x": NaN}', "not JSON"),
    ("<testsuites><testcase>", r":1: unexpected end of the file"),
    ("<testsuites><testcase></testsuite>", r":1: not well-formed XML"),
    ("<html><body/></html>", r"not a JUnit report \(its root is <html>"),
])
def test_unreadable_reports_are_one_line_errors(tmp_path: Path, content: str,
                                                match: str) -> None:
    _refused(_write(tmp_path, "report.txt", content), tmp_path, match)


def test_a_billion_laughs_is_refused(tmp_path: Path) -> None:
    _refused(DATA / "billion-laughs.xml", tmp_path, "refused: the XML has a DOCTYPE")


def test_missing_folder_and_format_mismatch(tmp_path: Path) -> None:
    _refused(tmp_path / "nope.json", tmp_path, "no such report")
    _refused(tmp_path, tmp_path, "is a folder")
    _refused(DATA / "junit-playwright-handmade.xml", tmp_path, "--format playwright",
             fmt="playwright")
    _refused(DATA / "playwright-1.40-handmade.json", tmp_path, "a playwright report",
             fmt="junit")
    _refused(DATA / "playwright-1.40-handmade.json", tmp_path, "the limit", max_bytes=100)
    with pytest.raises(UsageError):
        import_report(DATA / "playwright-1.40-handmade.json", product="bad product",
                      root=tmp_path)
    with pytest.raises(UsageError):
        import_report(DATA / "playwright-1.40-handmade.json", product="p", root=tmp_path,
                      run_id="bad id")


@pytest.mark.parametrize(("content", "name"), [
    ('{"config": {}, "suites": [], "errors": []}', "r.json"),
    ('{"suites": [{"title": "a.spec.ts", "specs": [], "suites": []}]}', "r.json"),
    ('<?xml version="1.0"?><testsuites tests="0"/>', "r.xml"),
    ('<testsuite name="x" tests="0"></testsuite>', "r.xml"),
])
def test_a_report_with_zero_tests(tmp_path: Path, content: str, name: str) -> None:
    err = _refused(_write(tmp_path, name, content), tmp_path, "holds no tests")
    assert isinstance(err, EmptyReportError)


def test_unknown_statuses_and_missing_fields_are_warnings(tmp_path: Path) -> None:
    report = {"suites": [{"title": "a.spec.ts", "specs": [
        {"title": "old", "tests": [{"results": [{"status": "passed"}]}]},
        {"title": "odd", "tests": [{"status": "expected", "results": [
            {"status": "exploded", "duration": "slow", "errors": [{"stack": "Boom"}]}]}]},
        {"title": "bare", "tests": [{"status": "unexpected", "results": [
            {"status": "failed"}]}]},
        "not a spec",
        {"title": "no tests"},
    ]}]}
    result = import_report(_write(tmp_path, "r.json", report), product="p", root=tmp_path)
    assert result.counts == dict(tests=3, passed=2, failed=1, flaky=0, skipped=0)
    assert validate_run(result.evidence) == []
    warnings = " ".join(result.warnings)
    assert "test status None" in warnings and "'exploded'" in warnings
    assert "without a `tests` list" in warnings
    bare = _tests(result)["a.spec.ts:bare"]
    assert bare["failure"]["message"] == "The test ended fail"


def test_playwright_stats_that_disagree_are_a_warning(tmp_path: Path) -> None:
    report = json.loads((DATA / "playwright-1.40-handmade.json").read_text())
    report["stats"]["expected"] = 40
    result = import_report(_write(tmp_path, "r.json", report), product="p", root=tmp_path)
    assert result.counts["passed"] == 4
    assert any("stats (passed 40" in w and "trusted" in w for w in result.warnings)


def test_suites_after_specs_and_keys_in_any_order(tmp_path: Path) -> None:
    spec = {"tests": [{"status": "expected", "projectName": "p", "results": []}],
            "title": "t"}
    report = {"suites": [{"specs": [spec], "suites": [
        {"specs": [spec], "title": "inner"}], "title": "a.spec.ts"}], "config": {}}
    result = import_report(_write(tmp_path, "r.json", report), product="p", root=tmp_path)
    assert [t["test_id"] for t in result.evidence["tests"]] == [
        "a.spec.ts:t", "a.spec.ts:inner:t"]  # in file order


# -- memory -----------------------------------------------------------------------------


def _big_report(path: Path, n_tests: int = 3000) -> None:
    """~20 MB: screenshots inline, stdout, call logs, non-ASCII titles (a str of them
    takes 2 bytes a character, so a whole-file read would cost 2x the file)."""
    rnd = random.Random(7)
    body = "".join(rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                   for _ in range(5400))
    suites = []
    for f in range(n_tests // 30):
        specs = []
        for i in range(30):
            failing = i % 10 == 0
            err = {"message": f"\x1b[31mError: Timed out 5000ms\x1b[39m\n\nLocator: "
                              f"getByTestId('item-{i}')\nCall log:\n"
                              + f"  - waiting for getByTestId('item-{i}') …\n" * 40}
            result = {"status": "failed" if failing else "passed", "duration": 1234,
                      "errors": [err] if failing else [], "retry": 0,
                      "stdout": [{"text": "x" * 200 + "\n"}] * 5, "stderr": [],
                      "attachments": [{"name": "screenshot", "contentType": "image/png",
                                       "body": body}]}
            specs.append({"title": f"test {i} – ünïcode", "file": f"f{f}.spec.ts",
                          "tests": [{"expectedStatus": "passed", "projectName": "c",
                                     "results": [result],
                                     "status": "unexpected" if failing else "expected"}]})
        suites.append({"title": f"f{f}.spec.ts", "file": f"f{f}.spec.ts", "specs": specs})
    with path.open("w", encoding="utf-8") as fh:
        json.dump({"config": {"version": "1.48.0"}, "suites": suites, "errors": []}, fh,
                  ensure_ascii=False)


def test_a_big_report_is_read_as_a_stream(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    _big_report(path)
    size = path.stat().st_size
    assert size > 18_000_000
    import_report(DATA / "playwright-1.40-handmade.json", product="p", root=tmp_path)
    tracemalloc.start()
    try:
        result = import_report(path, product="p", root=tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.counts == dict(tests=3000, passed=2700, failed=300, flaky=0, skipped=0)
    # one copy of the file would be `size` (2x as a str of non-ASCII text); three, 3x
    assert peak < 0.8 * size, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB report"
