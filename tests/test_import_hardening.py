"""Regressions from the attack review (issue 19, items 8, 9, 10, 15, 16): what `runs import`
let through, each written against the code that let it through.

- secrets in Playwright project names (and the ``@project`` suffix of test ids), in
  attachment file names, in ``memidex-verified`` anchors and in fullwidth locator names
  (masked before NFKC made them plain) came out unmasked, ``--output`` too;
- masking the evidence again, as ``runs ingest`` does, turned ``@chromium-[secret:…]`` and
  ``artifacts/[secret:…].png`` into an invalid id and path, so the whole report exited 4;
- report text was cut to 4x its limit before masking: with ANSI codes, a secret straddling
  the cut survived as a partial token;
- 3,000 nested suites gave a ``RecursionError`` traceback, a lone surrogate a
  ``UnicodeEncodeError`` traceback, with and without ``--output``;
- a JUnit ``<!DOCTYPE … SYSTEM …>`` (an external reference) was read, not refused;
- an empty or cut-off report must say so in those words.

Every test uses the real masker (a real secrets file where the CLI runs) and real files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from memidex.app.learning import prepare_run
from memidex.errors import EXIT_INVALID
from memidex.evidence import validate_run
from memidex.importers import ReportError, import_report
from memidex.masking import Masker

SECRET = "sk-live-9fQ2ZpX7wLmN4vB8"
MASKER = Masker(secrets=(("api_key", SECRET),))


def _strings(value: Any) -> list[str]:
    """Every string in ``value``, keys included."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def _assert_masked_for_good(evidence: dict[str, Any], masker: Masker = MASKER) -> None:
    """No secret anywhere, the evidence valid, and masking it again (as `runs ingest`
    does) changes nothing and keeps it valid."""
    text = json.dumps(evidence, ensure_ascii=False)
    assert SECRET not in text
    assert validate_run(evidence) == []
    for s in _strings(evidence):
        assert masker.mask(s) == s, s
    run = prepare_run(json.loads(json.dumps(evidence, ensure_ascii=False)), source="again",
                      masker=masker)
    assert run.as_dict() == evidence


def _spec(title: str, project: str, **result: Any) -> dict[str, Any]:
    status = "unexpected" if result.get("status") == "failed" else "expected"
    return {"title": title, "tests": [{
        "projectName": project, "expectedStatus": "passed", "status": status,
        "annotations": result.pop("annotations", []),
        "results": [{"status": "passed", "duration": 10, "errors": [], **result}]}]}


def _report(tmp_path: Path, specs: list[dict[str, Any]], name: str = "report.json",
            **top: Any) -> Path:
    path = tmp_path / name
    data = {"config": {"rootDir": str(tmp_path / "tests")},
            "suites": [{"title": "a.spec.ts", "file": "a.spec.ts", "specs": specs}], **top}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _import(path: Path, tmp_path: Path, masker: Masker = MASKER) -> dict[str, Any]:
    return import_report(path, product="shop-web", root=tmp_path, masker=masker).evidence


# -- secrets --------------------------------------------------------------------------


def test_a_secret_in_a_project_name_is_masked_in_the_id_and_the_project(
        tmp_path: Path) -> None:
    path = _report(tmp_path, [_spec("checkout", f"staging-{SECRET}"),
                              _spec("checkout", "chromium")])
    evidence = _import(path, tmp_path)
    _assert_masked_for_good(evidence)
    ids = [t["test_id"] for t in evidence["tests"]]
    assert ids == ["a.spec.ts:checkout@staging-secret-api_key", "a.spec.ts:checkout@chromium"]
    assert evidence["tests"][0]["project"] == "staging-[secret:api_key]"


def test_an_attachment_whose_name_holds_a_secret_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "artifacts/r").mkdir(parents=True)
    shots = [{"name": "screenshot", "contentType": "image/png",
              "path": str(tmp_path / f"artifacts/r/{SECRET}.png")},
             {"name": "screenshot", "contentType": "image/png",
              "path": str(tmp_path / "artifacts/r/ok.png")}]
    path = _report(tmp_path, [_spec("shot", "chromium", attachments=shots)])
    result = import_report(path, product="shop-web", root=tmp_path, masker=MASKER)
    _assert_masked_for_good(result.evidence)
    assert result.evidence["tests"][0]["artifacts"] == ["artifacts/r/ok.png"]
    assert any("attachment" in w and "secret" in w for w in result.warnings)
    assert SECRET not in " ".join(result.warnings)


def test_a_memidex_verified_annotation_holding_a_secret_is_masked(tmp_path: Path) -> None:
    annotations = [{"type": "memidex-verified",
                    "description": f"el:testid:{SECRET} | assert-text | token {SECRET}"}]
    path = _report(tmp_path, [_spec("verified", "chromium", annotations=annotations)])
    evidence = _import(path, tmp_path)
    _assert_masked_for_good(evidence)
    (step,) = evidence["tests"][0]["steps"]
    assert step["target"] == "el:testid:[secret:api_key]"
    assert step["observed"] == "token [secret:api_key]"


def test_a_fullwidth_locator_name_is_masked_after_nfkc(tmp_path: Path) -> None:
    secret = "Hunter2Token"
    fullwidth = "".join(chr(ord(c) + 0xFEE0) for c in secret)  # ＨｕｎｔｅｒＴｏｋｅｎ
    masker = Masker(secrets=(("pw", secret),))
    message = (f"Error: locator.click: Timeout 5000ms exceeded.\nCall log:\n  - waiting for "
               f"getByRole('button', {{ name: '{fullwidth}' }})\n")
    path = _report(tmp_path, [_spec("fullwidth", "chromium", status="failed",
                                    errors=[{"message": message}])])
    evidence = _import(path, tmp_path, masker)
    text = json.dumps(evidence, ensure_ascii=False)
    assert secret.lower() not in text.lower()
    assert "el:button:secret-pw" in evidence["tests"][0]["anchors"]
    _assert_masked_for_good(evidence, masker)


def test_a_secret_straddling_the_cut_of_an_ansi_heavy_message_is_masked(
        tmp_path: Path) -> None:
    # 40,000 characters of escapes around 4,000 visible ones, and the secret across the
    # place where the old code cut the raw text (4 x the 10,000-character limit)
    unit = "\x1b[2mx\x1b[22m"  # 10 characters, one of them visible
    head = "Error: locator.click: Timeout 5000ms exceeded.\n" + unit * 3995
    message = head[: 40_000 - 8] + SECRET + " and more\n"
    assert message.index(SECRET) < 40_000 < message.index(SECRET) + len(SECRET)
    path = _report(tmp_path, [_spec("ansi", "chromium", status="failed",
                                    errors=[{"message": message}])])
    evidence = _import(path, tmp_path)
    text = json.dumps(evidence, ensure_ascii=False)
    assert SECRET[:8] not in text  # not even a piece of it
    assert "[secret:api_key]" in text
    _assert_masked_for_good(evidence)


def test_secret_flags_are_refused(tmp_path: Path) -> None:
    from memidex.errors import UsageError

    path = _report(tmp_path, [_spec("t", "chromium")])
    with pytest.raises(UsageError, match="secrets file"):
        import_report(path, product="shop-web", root=tmp_path, masker=MASKER,
                      run_id=f"r-{SECRET}")
    with pytest.raises(UsageError, match="secrets file"):
        import_report(path, product="shop-web", root=tmp_path, masker=MASKER,
                      build_tag=f"v1-{SECRET}")


# -- reports that broke the reader ------------------------------------------------------


def _refused(path: Path, tmp_path: Path, words: str) -> ReportError:
    with pytest.raises(ReportError) as info:
        import_report(path, product="shop-web", root=tmp_path, masker=MASKER)
    err = info.value
    assert err.exit_code == EXIT_INVALID and "\n" not in err.message
    assert str(path) in err.message and words in err.message, err.message
    return err


def _nested(depth: int) -> str:
    spec = json.dumps(_spec("deep", "chromium"))
    return ('{"suites": ' + '[{"title": "s", "suites": ' * depth + '[{"title": "x", '
            '"specs": [' + spec + "]}]" + "}]" * depth + "}")


def test_three_thousand_nested_suites_are_one_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(_nested(3000), encoding="utf-8")
    _refused(path, tmp_path, "nested")


def test_fifty_nested_suites_still_read(tmp_path: Path) -> None:
    path = tmp_path / "fifty.json"
    path.write_text(_nested(50), encoding="utf-8")
    (test,) = _import(path, tmp_path)["tests"]
    assert test["test_id"].endswith(":deep") and test["title"] == "deep"


def test_a_lone_surrogate_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "surrogate.json"
    text = json.dumps({"suites": [{"title": "a.spec.ts", "specs": [_spec("x", "c")]}]})
    path.write_text(text.replace('"title": "x"', '"title": "bad \\ud800 title"'),
                    encoding="utf-8")
    _refused(path, tmp_path, "surrogate")


def test_a_pair_of_surrogates_is_text(tmp_path: Path) -> None:
    path = tmp_path / "pair.json"
    text = json.dumps({"suites": [{"title": "a.spec.ts", "specs": [_spec("x", "c")]}]})
    path.write_text(text.replace('"title": "x"', '"title": "smile \\ud83d\\ude00"'),
                    encoding="utf-8")
    (test,) = _import(path, tmp_path)["tests"]
    assert test["title"] == "smile \U0001f600"


def test_a_doctype_with_an_external_reference_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "external.xml"
    path.write_text('<?xml version="1.0"?>\n<!DOCTYPE testsuites SYSTEM '
                    '"http://attacker.invalid/junit.dtd">\n<testsuites><testsuite name="s">'
                    '<testcase classname="c" name="t"/></testsuite></testsuites>\n',
                    encoding="utf-8")
    _refused(path, tmp_path, "refused")


@pytest.mark.parametrize(("content", "words"), [
    ("", "the report is empty"),
    ("  \n\t\n", "the report is empty"),
    ("\ufeff", "the report is empty"),
    ('{"config": {}, "suites": [{"title": "a.spec.ts", "specs": [{"title": "t", "tes',
     "unexpected end of the file"),
    ('{"suites": [{"title": "a", "specs": []}', "unexpected end of the file"),
    ('{"suites": [', "unexpected end of the file"),
    ('<testsuites><testsuite name="s"><testcase name="a"/>', "unexpected end of the file"),
    ('<testsuites><testsuite name="s"><testcase name="a', "unexpected end of the file"),
    ('<?xml version="1.0"?>\n', "the report is empty"),
])
def test_empty_and_cut_off_reports_say_so(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "cut.txt"
    path.write_text(content, encoding="utf-8")
    _refused(path, tmp_path, words)


# -- through the CLI: one error line, exit 4, nothing written ---------------------------


def test_the_cli_masks_and_refuses_as_the_library_does(repo: Path) -> None:
    (repo / ".agent-qa").mkdir(exist_ok=True)
    (repo / ".agent-qa/secrets.yaml").write_text(f"api_key: {SECRET}\n", encoding="utf-8")
    good = _report(repo, [_spec("checkout", f"staging-{SECRET}"),
                          _spec("checkout", "chromium")], name="good.json")
    out = repo / "run.json"
    done = run_cli(repo, "runs", "import", str(good), "--output", str(out), check=True)
    assert SECRET not in done.stdout + done.stderr
    evidence = json.loads(out.read_text(encoding="utf-8"))
    assert SECRET not in out.read_text(encoding="utf-8")
    assert evidence["tests"][0]["test_id"].endswith("@staging-secret-api_key")
    ingest = run_cli(repo, "runs", "ingest", str(good), "--json")
    assert ingest.returncode == 0, ingest.stderr  # masking again keeps it valid

    deep = repo / "deep.json"
    deep.write_text(_nested(3000), encoding="utf-8")
    surrogate = repo / "surrogate.json"
    surrogate.write_text(json.dumps({"suites": [{"title": "a.spec.ts", "specs": [
        _spec("x", "c")]}]}).replace('"title": "x"', '"title": "\\ud800"'), encoding="utf-8")
    for bad in (deep, surrogate):
        for extra in ([], ["--output", str(repo / "never.json")]):
            done = run_cli(repo, "runs", "import", str(bad), *extra)
            assert done.returncode == 4, done.stderr
            assert done.stderr.count("error:") == 1 and "Traceback" not in done.stderr
            assert str(bad) in done.stderr and done.stdout == ""
            assert not (repo / "never.json").exists()
