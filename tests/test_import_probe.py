"""`importers.detect.probe`: which format a file is in, from its start (docs/import.md,
"Which format"): every real report and example run, byte-order marks, deep nesting,
surrogates, cut-off and empty files, and that it never parses the file whole."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from memidex.importers import ReportError, probe

REPORTS = REPO_ROOT / "tests/data/reports"
CTRF = REPO_ROOT / "tests/data/ctrf"
RUNS = REPO_ROOT / "examples/runs"


@pytest.mark.parametrize("path", sorted([*REPORTS.glob("*.json"), *REPORTS.glob("*.xml"),
                                         *CTRF.glob("*.json"), *RUNS.glob("*.json")]),
                         ids=lambda p: p.name)
def test_every_real_file_is_told_apart(path: Path) -> None:
    want = ("evidence" if path.parent == RUNS else "ctrf" if path.parent == CTRF
            else "junit" if path.suffix == ".xml" else "playwright")
    assert probe(path) == want


def _write(tmp_path: Path, data: bytes | str, name: str = "f.json") -> Path:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


@pytest.mark.parametrize(("text", "want"), [
    ('{"run_id": "r-1", "product": "p", "tests": []}', "evidence"),
    ('{"product": "p"}', "evidence"),                      # broken evidence: the validator
    ('{"tests": [], "x-note": {"suites": 1}}', "evidence"),  # only top-level keys count
    ('{"config": {"a": [1, {"b": "}"}]}, "suites": []}', "playwright"),
    ('{"reportFormat": "CTRF", "results": {"tests": []}}', "ctrf"),
    ('{"run_id": "r-1", "suites": []}', "playwright"),     # suites: a report, not evidence
    ('{"run_id": "r", "tests": [], "results": {}}', "ctrf"),
    ('  \n<?xml version="1.0"?><testsuites/>', "junit"),
    ('{"a\\"b": "x\\\\", "run_id": 1}', "evidence"),        # escapes in keys and values
])
def test_the_top_level_keys_decide(tmp_path: Path, text: str, want: str) -> None:
    assert probe(_write(tmp_path, text)) == want


def test_byte_order_marks(tmp_path: Path) -> None:
    assert probe(_write(tmp_path, b'\xef\xbb\xbf{"suites": []}')) == "playwright"
    with pytest.raises(ReportError, match="UTF-16"):
        probe(_write(tmp_path, '{"suites": []}'.encode("utf-16")))


def test_deep_nesting_and_surrogates_do_not_matter(tmp_path: Path) -> None:
    deep = '{"run_id": "r", "x-deep": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert probe(_write(tmp_path, deep)) == "evidence"
    lone = '{"config": {"name": "\\ud800"}, "suites": []}'
    assert probe(_write(tmp_path, lone)) == "playwright"
    assert probe(_write(tmp_path, b'{"run_id": "\xed\xa0\x80", "tests": []}')) == "evidence"


@pytest.mark.parametrize(("data", "words"), [
    (b"", "the report is empty"),
    (b" \n\t", "the report is empty"),
    (b"\xef\xbb\xbf", "the report is empty"),
    (b'{"config": {"a": 1', "unexpected end of the file"),
    (b'{"run_id": "r-1", "tests": [', "unexpected end of the file"),
    (b'{"run_id": "r-1', "unexpected end of the file"),
    (b'{"run_id"', "unexpected end of the file"),
    (b"[1, 2]", "a JSON list"),
    (b"hello", "neither JSON nor XML"),
    (b'{"config": {}}', "not a Playwright JSON report"),
    (b"{run_id: 1}", "not JSON"),
    (b'{"a": 1 "b": 2}', "not JSON"),
])
def test_what_it_cannot_tell_is_one_error(tmp_path: Path, data: bytes, words: str) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(ReportError) as info:
        probe(path)
    assert words in info.value.message and str(path) in info.value.message
    assert "\n" not in info.value.message


def test_missing_and_folders(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no such report"):
        probe(tmp_path / "nope.json")
    with pytest.raises(ReportError, match="is a folder"):
        probe(tmp_path)


def test_it_stops_at_the_first_deciding_key(tmp_path: Path) -> None:
    # everything after `suites` is not even JSON: the probe never reads it
    path = _write(tmp_path, b'{"config": {"version": "1.48.2"}, "suites": [' + b"\x00" * 5_000_000)
    assert probe(path) == "playwright"


def test_evidence_is_scanned_without_being_parsed(tmp_path: Path) -> None:
    steps = [{"index": i, "action": "click", "target": "el:button:x",
              "observed": "y" * 200, "anchors": ["page:/a", "page:/b"]} for i in range(200)]
    tests = [{"test_id": f"t{i}", "verdict": "pass", "steps": steps} for i in range(300)]
    path = _write(tmp_path, json.dumps({"run_id": "r-1", "product": "p", "tests": tests}))
    size = path.stat().st_size
    assert size > 15_000_000
    tracemalloc.start()
    try:
        assert probe(path) == "evidence"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"peak {peak / 1e6:.1f} MB to probe a {size / 1e6:.0f} MB file"
