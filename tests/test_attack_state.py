"""Hardening, local state under attack: a tests file, a frozen run, a run's result or the
run counters damaged in shape or nested beyond reason. Each command that reads one
answers with one `error:` line naming the file (StateDamagedError, exit 4) — or, for the
brief, a note and a brief without that file's anchors. Never a traceback.

Real repositories, the real `memidex` command.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from learnkit import error_lines, example, learned_repo

TESTS = ".agent-qa/runs/tests-shop-web.json"
FROZEN = ".agent-qa/runs/r-0051.json"
RESULT = ".agent-qa/runs/r-0051.result.json"
ORDINALS = ".agent-qa/build-ordinals.json"


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository that learned r-0051 (its index built)."""
    root = learned_repo(tmp_path_factory.mktemp("learned") / "repo")
    return root


def _nested(depth: int, leaf: str = "1") -> str:
    return '{"a":' * depth + leaf + "}" * depth


def _edit(rel: str, change: Callable[[Any], Any]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        path = root / rel
        text = json.dumps(change(json.loads(path.read_text("utf-8"))))
        path.write_text(text.replace('"BIG"', "1e400"), "utf-8")  # (json reads it: inf)
    return apply


def _put(rel: str, text: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        (root / rel).write_text(text, encoding="utf-8")
    return apply


def _test_field(field: str, value: Any) -> Callable[[Any], Any]:
    def change(data: Any) -> Any:
        data["tests"]["checkout-happy-path"][field] = value
        return data
    return change


TESTS_DAMAGE = {
    "nested 5,000 deep": _put(TESTS, "[" * 5000 + "]" * 5000),
    "object nested 5,000 deep": _put(TESTS, _nested(5000)),
    "anchors: 5": _edit(TESTS, _test_field("anchors", 5)),
    "anchors: [5]": _edit(TESTS, _test_field("anchors", [5, {"x": 1}])),
    "recent: 5": _edit(TESTS, _test_field("recent", 5)),
    "missing: {x: y}": _edit(TESTS, _test_field("missing", {"x": "y"})),
    "runs: many": _edit(TESTS, _test_field("runs", "many")),
    "passed_builds: 5": _edit(TESTS, _test_field("passed_builds", 5)),
    "tests: 5": _edit(TESTS, lambda d: {**d, "tests": 5}),
    "ordinal: 1e400": _put(TESTS, '{"version": 1, "ordinal": 1e400, "tests": {}}'),
}

FROZEN_DAMAGE = {
    "run: 5": _put(FROZEN, '{"run": 5}'),
    "run.tests: 5": _edit(FROZEN, lambda d: {**d, "run": {**d["run"], "tests": 5}}),
    "ordinal: one": _edit(FROZEN, lambda d: {**d, "ordinal": "one"}),
    "ordinal: 1e400": _edit(FROZEN, lambda d: {**d, "ordinal": "BIG"}),
    "analysis: 5": _edit(FROZEN, lambda d: {**d, "analysis": 5}),
    "why: [1]": _edit(FROZEN, lambda d: {**d, "why": [1]}),
    "digest: 5": _edit(FROZEN, lambda d: {**d, "digest": 5}),
    "nested 100,000 deep": _put(FROZEN, _nested(100_000)),
}

ORDINALS_DAMAGE = {
    "nested 100,000 deep": _put(ORDINALS, _nested(100_000)),
    "products: 5": _edit(ORDINALS, lambda d: {**d, "products": 5}),
    "a list": _put(ORDINALS, "[1, 2]"),
}

RESULT_DAMAGE = {
    "changes: 5": _edit(RESULT, lambda d: {**d, "changes": 5}),
    "changes: [{op: 1}]": _edit(RESULT, lambda d: {**d, "changes": [{"op": 1}]}),
    "verdicts: {pass: x}": _edit(RESULT, lambda d: {**d, "verdicts": {"pass": "x"}}),
    "proposals: 5": _edit(RESULT, lambda d: {**d, "proposals": 5}),
    "ordinal: 1e400": _edit(RESULT, lambda d: {**d, "ordinal": "BIG"}),
}


def _damaged(learned: Path, tmp_path: Path, damage: Callable[[Path], None]) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(learned, root, symlinks=True)
    damage(root)
    return root


def _refused(root: Path, rel: str, *args: str) -> None:
    """``memidex args`` exits 4 with one error line naming the damaged file."""
    out = run_cli(root, *args)
    assert "Traceback" not in out.stderr, (args, out.stderr)
    assert out.returncode == 4, (args, out.returncode, out.stdout, out.stderr)
    lines = error_lines(out.stderr)
    assert len(lines) == 1 and Path(rel).name in lines[0], (args, out.stderr)


@pytest.mark.parametrize("case", sorted(TESTS_DAMAGE))
def test_a_damaged_tests_file(learned: Path, tmp_path: Path, case: str) -> None:
    root = _damaged(learned, tmp_path, TESTS_DAMAGE[case])
    brief = run_cli(root, "brief", "checkout-happy-path", "--json")
    assert brief.returncode == 0 and "Traceback" not in brief.stderr, brief.stderr
    notes = json.loads(brief.stdout)["notes"]
    assert any("tests-shop-web.json" in n for n in notes), notes  # said, not silent
    _refused(root, TESTS, "runs", "ingest", str(example("r-0052")))


@pytest.mark.parametrize("case", sorted(FROZEN_DAMAGE))
def test_a_damaged_frozen_run(learned: Path, tmp_path: Path, case: str) -> None:
    root = _damaged(learned, tmp_path, FROZEN_DAMAGE[case])
    _refused(root, FROZEN, "runs", "show", "r-0051")
    _refused(root, FROZEN, "runs", "show", "r-0051", "--json")
    _refused(root, FROZEN, "runs", "ingest", str(example("r-0051")))
    _refused(root, FROZEN, "knowledge", "rollback", "r-0051")
    listed = run_cli(root, "runs", "list")  # the run's result is intact: it is listed
    assert listed.returncode == 0 and "r-0051" in listed.stdout, listed.stderr


@pytest.mark.parametrize("case", sorted(ORDINALS_DAMAGE))
def test_damaged_run_counters(learned: Path, tmp_path: Path, case: str) -> None:
    root = _damaged(learned, tmp_path, ORDINALS_DAMAGE[case])
    for args in (("runs", "ingest", str(example("r-0052"))),
                 ("knowledge", "diff", "v1.4.2"), ("brief", "checkout-happy-path")):
        out = run_cli(root, *args)
        assert "Traceback" not in out.stderr, (args, out.stderr)
        if out.returncode != 0:
            _refused(root, ORDINALS, *args)
    _refused(root, ORDINALS, "runs", "ingest", str(example("r-0052")))


@pytest.mark.parametrize("case", sorted(RESULT_DAMAGE))
def test_a_damaged_run_result(learned: Path, tmp_path: Path, case: str) -> None:
    root = _damaged(learned, tmp_path, RESULT_DAMAGE[case])
    _refused(root, RESULT, "runs", "show", "r-0051")
    _refused(root, RESULT, "knowledge", "rollback", "r-0051")
    doctor = run_cli(root, "doctor")
    assert "Traceback" not in doctor.stderr and "r-0051.result.json" in doctor.stdout
