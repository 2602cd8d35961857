"""What the five real reports teach (tests/data/reports, byte for byte from public
projects): no wrong record and little noise, checked on concrete properties — no
placeholder procedure, one record per spec across browser projects, no generic or
generated anchor, no app-bug for a stale test.fail(), titles a person can read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from memidex.app import Memidex
from memidex.importers.build import STALE_FAIL
from memidex.records.model import Record

REPORTS = REPO_ROOT / "tests/data/reports"
REAL = ("junit-pytest-keinar-Pytest-RCA-Report.xml",
        "junit-surefire-zeebe-io-flaky-test-extractor-maven-plugin.xml",
        "playwright-buerokratt-TDD-Playwright.json",
        "playwright-jay-UT-utis-playwright-framework.json",
        "playwright-rwx-research-captain.json")
GENERIC = re.compile(r"^el:(?:css:)?(?:option|div|span|label|button|input|a|li|ul|tr|td|p|"
                     r"checkbox|link|listitem)$")
GENERATED = re.compile(r"[0-9a-f]{12,}|\d{6,}")


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Record], dict[
        str, dict[str, str]]]:
    from conftest import git
    from memidex.store.layout import init_repository

    root = tmp_path_factory.mktemp("real") / "repo"
    root.mkdir()
    git(root, "init", "-q")
    init_repository(root, product="p")
    analyses: dict[str, dict[str, str]] = {}
    with Memidex(root) as m:
        for name in REAL:
            analyses[name] = dict(m.ingest(REPORTS / name).analysis)
        records = [m.show(r.id).record for r in m.list_records().records]
    return root, records, analyses


def test_every_report_teaches_something_and_nothing_is_generic(learned: tuple[
        Path, list[Record], dict[str, dict[str, str]]]) -> None:
    _root, records, _analyses = learned
    kinds = {r.kind for r in records}
    assert {"procedure", "caution", "unknown"} <= kinds
    for r in records:
        for a in (r.anchor, *r.anchors):
            assert not GENERIC.match(a), f"{r.id}: a generic anchor {a}"
            if a.startswith("el:"):
                assert not GENERATED.search(a), f"{r.id}: a generated id in {a}"
        assert len(r.title) < 120, r.title


def test_no_placeholder_procedure(learned: tuple[Path, list[Record],
                                                 dict[str, dict[str, str]]]) -> None:
    _root, records, _analyses = learned
    procedures = [r for r in records if r.kind == "procedure"]
    assert procedures
    for r in procedures:
        lines = r.body.splitlines()
        assert lines and not any(re.fullmatch(r"\d+\. step", ln.strip()) for ln in lines), \
            r.body
        # the test.step titles, in order, when the test named its steps
        assert all(re.match(r"\d+\. \S", ln) for ln in lines)


def test_one_record_per_spec_across_browser_projects(learned: tuple[
        Path, list[Record], dict[str, dict[str, str]]]) -> None:
    _root, records, _analyses = learned
    seen: dict[tuple[str, str], str] = {}
    for r in records:
        if not r.anchor.startswith("test:"):
            continue
        spec = r.anchor.rsplit("@", 1)[0]
        assert (r.kind, spec) not in seen, f"{r.id} copies {seen[(r.kind, spec)]}"
        seen[(r.kind, spec)] = r.id
    # the rwx report ran its specs in 5 projects: one caution, one procedure, one unknown
    rwx = [r for r in records if "example.spec.ts" in r.anchor or
           "demo-todo-app.spec.ts" in r.anchor]
    assert len({(r.kind, r.anchor) for r in rwx}) == len(rwx)


def test_a_stale_test_fail_is_never_an_app_bug(learned: tuple[
        Path, list[Record], dict[str, dict[str, str]]]) -> None:
    root, records, analyses = learned
    from memidex.importers import import_report

    rwx = import_report(REPORTS / "playwright-rwx-research-captain.json", product="p",
                        root=root).evidence
    stale = {t["test_id"] for t in rwx["tests"]
             if (t.get("failure") or {}).get("message") == STALE_FAIL}
    assert len(stale) == 7
    cause = analyses["playwright-rwx-research-captain.json"]
    assert all(cause[t] == "test-bug" for t in stale)
    assert "app-bug" not in {cause[t] for t in stale}
    assert not [r for r in records if r.kind == "unknown" and
                any(e.test in stale for e in r.evidence)]


def test_the_few_records_it_teaches_are_counted(learned: tuple[
        Path, list[Record], dict[str, dict[str, str]]]) -> None:
    # 36 failing tests and 150 passing ones: a handful of cautions and unknowns, one
    # procedure per named, fully passing spec (not one per browser project)
    _root, records, _analyses = learned
    counts = {k: sum(r.kind == k for r in records) for k in ("caution", "unknown",
                                                              "procedure", "fact")}
    assert counts["fact"] == 0  # no report carries a verified observation
    assert counts["caution"] <= 8 and counts["unknown"] <= 12 and counts["procedure"] <= 20
