"""Run evidence: the schema, the loader and the example series (docs/runs.md)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REPO_ROOT
from memidex.errors import EXIT_INVALID, InvalidInputError
from memidex.evidence import (
    HINTS,
    MAX_RUN_BYTES,
    VERDICTS,
    Check,
    Run,
    RunEvidenceError,
    load_run,
    parse_run,
    run_schema,
    schema_text,
    validate_run,
)

EXAMPLES = sorted((REPO_ROOT / "examples/runs").glob("*.json"))
BIG = 2**63 - 1

MINIMAL: dict[str, Any] = {
    "run_id": "r-0041", "product": "shop-web", "build_tag": "v1.4.2", "ci": False,
    "tests": [
        {"test_id": "checkout-happy-path", "verdict": "pass",
         "steps": [{"index": 3, "action": "click", "target": "el:button:place-order",
                    "anchors": ["page:/checkout"], "observed": "Place order (disabled)",
                    "check": {"kind": "assert-disabled", "passed": True},
                    "served_records": ["fact-el-button-place-order-97c05f92322716e0"],
                    "scope": {"viewport": "mobile"},
                    "artifacts": ["artifacts/r-0041/step-3.png"]}]},
        {"test_id": "search-suggestions", "verdict": "fail",
         "failure": {"message": "timeout waiting for el:list:suggestions", "hint": "flaky"},
         "steps": [{"index": 0, "action": "wait", "target": "el:list:suggestions"}]},
    ],
}


def _raw(data: Any) -> bytes:
    return json.dumps(data).encode()


def _violations(data: Any) -> list[str]:
    with pytest.raises(RunEvidenceError) as info:
        parse_run(_raw(data), source="run.json")
    err = info.value
    assert err.exit_code == EXIT_INVALID and err.source == "run.json"
    assert err.message.startswith("run.json: run evidence breaks the format")
    assert "\n" not in err.message
    return [str(v) for v in err.violations]


def test_the_published_schema_is_current_and_valid() -> None:
    import jsonschema

    text = (REPO_ROOT / "docs/run-evidence.schema.json").read_text(encoding="utf-8")
    assert text == schema_text(), ("docs/run-evidence.schema.json is stale: run `python -m "
                                   "memidex.evidence.schema > docs/run-evidence.schema.json`")
    jsonschema.Draft202012Validator.check_schema(json.loads(text))
    assert run_schema()["$schema"].endswith("/2020-12/schema")


def test_a_valid_run_loads(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(_raw(MINIMAL))
    run = load_run(path)
    assert (run.run_id, run.product, run.build_tag, run.ci) == ("r-0041", "shop-web",
                                                                "v1.4.2", False)
    happy, flaky = run.tests
    assert happy.passed and not flaky.passed
    step = happy.steps[0]
    assert step.check == Check("assert-disabled", True)
    assert step.scope == (("viewport", "mobile"),)
    assert step.served_records == ("fact-el-button-place-order-97c05f92322716e0",)
    assert flaky.failure is not None and flaky.failure.hint == "flaky"
    assert validate_run(MINIMAL) == []
    # null is the same as leaving a key out; x- keys are extensions
    loose = copy.deepcopy(MINIMAL)
    loose["build_tag"] = None
    loose["x-runner"] = "playwright 1.47"
    loose["tests"][0]["steps"][0].update(check=None, target=None, scope=None, index=3.0)
    loaded = parse_run(_raw(loose), source="r")
    assert loaded.build_tag is None and loaded.tests[0].steps[0].index == 3


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_run_validates(path: Path) -> None:
    run = load_run(path)
    assert run.product == "shop-web" and path.stem == run.run_id


def test_the_example_series_covers_what_it_should_teach() -> None:
    runs = [load_run(p) for p in EXAMPLES]
    assert len(runs) >= 8 and len({r.build_tag for r in runs}) >= 3
    assert any(r.ci for r in runs) and any(not r.ci for r in runs)
    failures = [t.failure for r in runs for t in r.tests if t.failure]
    assert any(f.hint == "flaky" for f in failures)
    assert any("ERR_NAME_NOT_RESOLVED" in f.message for f in failures)
    # the Place order fact changes between builds: disabled, then enabled at once
    seen = {(r.build_tag, s.observed) for r in runs for t in r.tests for s in t.steps
            if s.target == "el:button:place-order" and s.index in (3, 4)}
    assert ("v1.4.2", "Place order (disabled)") in seen
    assert ("v1.5.0", "Place order (enabled)") in seen


def _bad(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(MINIMAL)
    for dotted, value in changes.items():
        node: Any = data
        *parents, last = dotted.split("__")
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        if value is KeyError:
            del node[last]
        else:
            node[int(last) if last.isdigit() else last] = value
    return data


@pytest.mark.parametrize(("data", "expected"), [
    (_bad(run_id=KeyError), "run_id: is required"),
    (_bad(product="shop web"), "product: must be a product name"),
    (_bad(ci="yes"), "ci: must be true or false or null"),
    (_bad(tests=[]), "tests: must have at least 1 item"),
    (_bad(colour="blue"), "colour: is not a known key"),
    (_bad(tests__1__verdict="passed"), "tests[1].verdict: must be one of pass, fail"),
    (_bad(tests__1__failure__hint="cosmic-rays"), "tests[1].failure.hint: must be one of"),
    (_bad(tests__1__failure__message=KeyError), "tests[1].failure.message: is required"),
    (_bad(tests__0__steps__0__target="Place order"), "tests[0].steps[0].target: must be an "
                                                      "anchor"),
    (_bad(tests__0__steps__0__anchors=["page:/checkout", "nope"]),
     "tests[0].steps[0].anchors[1]: must be an anchor"),
    (_bad(tests__0__steps__0__index=-1), "tests[0].steps[0].index: must be at least 0"),
    (_bad(tests__0__steps__0__index=BIG + 1), "tests[0].steps[0].index: must be at most "
                                              f"{BIG}"),
    (_bad(tests__0__steps__0__index=True), "tests[0].steps[0].index: must be a whole number"),
    (_bad(tests__0__steps__0__check={"kind": "assert-disabled"}),
     "tests[0].steps[0].check.passed: is required"),
    (_bad(tests__0__steps__0__served_records=["Fact/../x"]),
     "tests[0].steps[0].served_records[0]: must be a record id"),
    (_bad(tests__0__steps__0__scope={"Viewport": "mobile"}),
     "tests[0].steps[0].scope: must be a scope key"),
    (_bad(tests__0__steps__0__observed="x" * 10_001),
     "tests[0].steps[0].observed: is longer than 10000 characters"),
    (_bad(tests__0__test_id="search-suggestions"), "tests[1].test_id: repeats tests[0]"),
    (_bad(tests__0__steps=[{"index": 1, "action": "click"}, {"index": 1, "action": "fill"}]),
     "tests[0].steps[1].index: repeats steps[0]"),
    (_bad(tests__0__steps__0__target="el:button:x\n"), "tests[0].steps[0].target: must be an "
                                                       "anchor, type:value on one line"),
    (_bad(run_id="r-1\n"), "run_id: must not hold a line break"),
    (_bad(tests__0__test_id="a\n"), "tests[0].test_id: must not hold a line break"),
    (_bad(tests__0__steps__0__anchors=["a:b"] * 65),
     "tests[0].steps[0].anchors: has more than 64 items"),
    ([1, 2], "(root): must be an object"),
])
def test_each_kind_of_violation_is_named_with_its_path(data: Any, expected: str) -> None:
    assert any(v.startswith(expected) for v in _violations(data)), _violations(data)


def test_every_violation_is_reported_at_once() -> None:
    data = _bad(run_id=KeyError, tests__0__steps__0__target="nope",
                tests__1__verdict="maybe")
    found = _violations(data)
    assert [v.split(":")[0] for v in found] == ["run_id", "tests[0].steps[0].target",
                                                "tests[1].verdict"]
    many = _bad(tests__0__steps=[{"index": i, "action": "Click"} for i in range(30)])
    with pytest.raises(RunEvidenceError) as info:
        parse_run(_raw(many), source="run.json")
    assert len(info.value.violations) == 30 and "and 10 more" in info.value.message


@pytest.mark.parametrize("artifact", [
    "../secrets.yaml", "artifacts/../../etc/passwd", "/etc/passwd", "artifacts/./x.png",
    "screens/x.png", "artifacts", "artifacts/", "artifacts//x.png", "artifacts\\x.png",
    "C:/artifacts/x.png", "artifacts/x.png\n", "artifacts/a b.png", "artifacts/..",
])
def test_escaping_artifact_paths_are_refused(artifact: str) -> None:
    for data in (_bad(tests__0__steps__0__artifacts=[artifact]),
                 _bad(tests__1__artifacts=[artifact])):
        found = _violations(data)
        assert any("artifacts[0]:" in v for v in found), found


def test_safe_artifact_paths_load() -> None:
    data = _bad(tests__1__artifacts=["artifacts/r-0041/search/trace.zip",
                                     "artifacts/step-3@2x.png"])
    assert parse_run(_raw(data), source="r").tests[1].artifacts[1] == "artifacts/step-3@2x.png"


def test_a_file_over_the_cap_is_refused_without_reading_it(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as fh:  # sparse: 50 MB of size, no 50 MB of disk or reading
        fh.truncate(MAX_RUN_BYTES)

    def no_reading(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file was opened")

    monkeypatch.setattr(Path, "open", no_reading)
    with pytest.raises(InvalidInputError, match=r"big\.json: the run file is 52428800 bytes"):
        load_run(big)


def test_a_file_that_grows_past_the_cap_is_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(b" " * 100 + _raw(MINIMAL))
    with pytest.raises(InvalidInputError, match="the limit is 50 bytes"):
        load_run(path, max_bytes=50)
    # stat says small, the read finds more (a file still being written)
    real_stat = Path.stat
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "stat", lambda self, **kw: type("S", (), {"st_size": 1})())
        with pytest.raises(InvalidInputError, match="over the limit of 50 bytes"):
            load_run(path, max_bytes=50)
    assert real_stat(path).st_size > 50


def test_not_json_is_one_line_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text('{"run_id": "r-1",\n  "product": shop-web}\n', encoding="utf-8")
    with pytest.raises(InvalidInputError) as info:
        load_run(path)
    assert info.value.message == f"{path}:2:14: not JSON: Expecting value"
    assert info.value.exit_code == EXIT_INVALID
    for raw, words in ((b'{"a": NaN}', "NaN is not a JSON number"),
                       (b'\xff\xfe{}', "not UTF-8 text at byte 0")):
        with pytest.raises(InvalidInputError, match=words):
            parse_run(raw, source="x.json")


def test_missing_unreadable_and_folder_paths(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no such run file"):
        load_run(tmp_path / "nope.json")
    with pytest.raises(InvalidInputError, match="is a folder"):
        load_run(tmp_path)
    locked = tmp_path / "locked.json"
    locked.write_bytes(_raw(MINIMAL))
    locked.chmod(0)
    try:
        try:
            locked.read_bytes()
        except PermissionError:
            with pytest.raises(InvalidInputError, match="permission denied"):
                load_run(locked)
    finally:
        locked.chmod(0o644)


# -- generated runs round-trip --------------------------------------------------------------

_word = st.from_regex(r"[a-z][a-z0-9_-]{0,12}", fullmatch=True)
_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
_anchor = st.builds(lambda t, v: f"{t}:{v}", st.sampled_from(["el", "page", "test", "api"]),
                    st.from_regex(r"[A-Za-z0-9/_<>-]([A-Za-z0-9/ _.-]{0,20}[A-Za-z0-9/])?",
                                  fullmatch=True))
_count = st.integers(min_value=0, max_value=BIG)
_artifact = st.lists(st.from_regex(r"[A-Za-z0-9_@+=-][A-Za-z0-9._@+=-]{0,10}", fullmatch=True),
                     min_size=1, max_size=3).map(lambda ps: "/".join(["artifacts", *ps]))


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


@st.composite
def _steps(draw: st.DrawFn) -> list[dict[str, Any]]:
    indices = draw(st.lists(_count, unique=True, max_size=4))
    out = []
    for index in indices:
        step: dict[str, Any] = {"index": index, "action": draw(_word)}
        for key, strategy in (
            ("target", _maybe(_anchor)), ("anchors", st.lists(_anchor, max_size=3)),
            ("observed", _maybe(_text)), ("value", _maybe(_text)), ("error", _maybe(_text)),
            ("check", _maybe(st.fixed_dictionaries(
                {"kind": _word, "passed": st.booleans()}, optional={"expected": _text}))),
            ("served_records", st.lists(st.from_regex(r"[a-z0-9][a-z0-9-]{0,30}",
                                                      fullmatch=True), max_size=2)),
            ("scope", st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True),
                                      st.one_of(_text, st.booleans(),
                                                st.integers(-BIG - 1, BIG)), max_size=2)),
            ("artifacts", st.lists(_artifact, max_size=2)),
            ("duration_ms", _maybe(_count)),
        ):
            if draw(st.booleans()):
                step[key] = draw(strategy)
        out.append(step)
    return out


@st.composite
def _runs(draw: st.DrawFn) -> dict[str, Any]:
    test_ids = draw(st.lists(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,20}",
                                           fullmatch=True), unique=True, min_size=1,
                             max_size=3))
    tests = []
    for test_id in test_ids:
        test: dict[str, Any] = {"test_id": test_id, "verdict": draw(st.sampled_from(VERDICTS)),
                                "steps": draw(_steps())}
        if draw(st.booleans()):
            test["failure"] = {"message": draw(_text),
                               "hint": draw(_maybe(st.sampled_from(HINTS))),
                               "step": draw(_maybe(_count))}
        if draw(st.booleans()):
            test.update(retries=draw(_count), anchors=draw(st.lists(_anchor, max_size=2)),
                        artifacts=draw(st.lists(_artifact, max_size=2)))
        tests.append(test)
    return {"run_id": draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)),
            "product": draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)),
            "build_tag": draw(_maybe(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._+/-]{0,20}",
                                                   fullmatch=True))),
            "ci": draw(st.booleans()), "tests": tests}


@given(_runs())
def test_generated_runs_round_trip(data: dict[str, Any]) -> None:
    run = parse_run(_raw(data), source="gen.json")
    assert isinstance(run, Run) and run.run_id == data["run_id"]
    assert [t.test_id for t in run.tests] == [t["test_id"] for t in data["tests"]]
    for test, raw in zip(run.tests, data["tests"], strict=True):
        assert [s.index for s in test.steps] == [s["index"] for s in raw["steps"]]
        assert [s.observed for s in test.steps] == [s.get("observed") for s in raw["steps"]]
    again = parse_run(_raw(run.as_dict()), source="again.json")
    assert again == run
    assert validate_run(run.as_dict()) == []
