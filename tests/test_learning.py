"""Learning from runs, end to end (issue 11, "How it will be checked"): `memidex runs
ingest` in real subprocesses where the issue asks for the command, the library facade
(`Memidex(root).ingest(path)`) where a test needs many runs quickly.

The helpers the learning tests share are in tests/learnkit.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from learnkit import (
    PLACE_ORDER,
    PRODUCT,
    RECORDS,
    TERMS,
    a_run,
    a_test,
    all_records,
    changed,
    checkout,
    cli_json,
    error_lines,
    example,
    fact_id,
    ingest,
    init_repo,
    leaks,
    load,
    ops,
    records,
    set_config,
    snapshot,
    step,
    validate,
    write_run,
    write_secrets,
)
from memidex.app import Memidex
from memidex.records.ids import record_id

# --- a run teaches; the same run again changes nothing -------------------------------------


def test_a_run_with_passing_and_flaky_tests_yields_facts_a_caution_and_a_procedure(
        repo: Path) -> None:
    path = write_run(repo.parent, checkout("r-1", search="flaky"))
    out = cli_json(repo, "runs", "ingest", str(path))
    validate(out, "runs-ingest")
    assert out["run_id"] == "r-1" and out["ordinal"] == 1 and out["ci"] is False
    assert out["analysis"] == {"search": "flaky"}
    assert out["already_ingested"] is False and out["proposals"] == []
    kinds = {load(repo, rid).kind for rid in ops(out)}
    assert kinds == {"fact", "caution", "procedure"}
    assert set(ops(out).values()) == {"add"}
    place = load(repo, PLACE_ORDER)
    assert (place.status, place.written_by, place.trust.source, place.trust.confirmations,
            place.trust.last_confirmed, place.valid.from_, place.valid.until) == \
        ("candidate", "template", "local", 1, 1, 1, None)
    assert dict(place.scope) == {"aspect": "enabled"} and "page:/checkout" in place.anchors
    caution = [load(repo, rid) for rid in ops(out) if rid.startswith("caution-")]
    assert [c.anchor for c in caution] == ["el:list:suggestions"]
    procedures = [rid for rid in ops(out) if rid.startswith("procedure-")]
    # a procedure for the passing test only; no fact, no unknown about the flaky element
    assert procedures == [record_id("procedure", "test:checkout", PRODUCT, {})]
    assert not [rid for rid in ops(out) if rid.startswith(("unknown-",
                                                           "fact-el-list-suggestions"))]
    assert (repo / ".agent-qa/runs/r-1.json").is_file()
    frozen = json.loads((repo / ".agent-qa/runs/r-1.json").read_text(encoding="utf-8"))
    assert frozen["ordinal"] == 1 and frozen["run_id"] == "r-1"
    ordinals = json.loads((repo / ".agent-qa/build-ordinals.json").read_text(encoding="utf-8"))
    assert ordinals["products"][PRODUCT]["next"] == 2
    assert ordinals["products"][PRODUCT]["builds"] == {"v1": 1}


def test_ingesting_the_same_run_again_changes_no_file_at_all(repo: Path) -> None:
    path = write_run(repo.parent, checkout("r-1", search="flaky"))
    first = cli_json(repo, "runs", "ingest", str(path))
    before = snapshot(repo)
    again = cli_json(repo, "runs", "ingest", str(path))
    assert again["already_ingested"] is True and again["changes"] == []
    assert again["ordinal"] == first["ordinal"] and again["proposals"] == []
    # every file: records, runs, ordinals, queue, index — and the writer lease's files
    assert changed(before, snapshot(repo)) == []


def test_the_same_run_id_with_other_content_is_refused_and_writes_nothing(repo: Path) -> None:
    run = checkout("r-1")
    cli_json(repo, "runs", "ingest", str(write_run(repo.parent, run)))
    before = snapshot(repo)
    run["tests"][0]["steps"][0]["observed"] = "Place order (greyed out)"
    other = write_run(repo.parent / "other", run)
    out = run_cli(repo, "runs", "ingest", str(other))
    assert out.returncode == 4
    assert "Traceback" not in out.stderr and out.stdout == ""
    lines = error_lines(out.stderr)
    assert len(lines) == 1 and "r-1" in lines[0], out.stderr
    assert changed(before, snapshot(repo)) == []
    # under --json: the error object on stdout, the same line on stderr
    out = run_cli(repo, "runs", "ingest", str(other), "--json")
    assert out.returncode == 4 and json.loads(out.stdout)["error"]["code"]
    assert len(error_lines(out.stderr)) == 1
    assert changed(before, snapshot(repo)) == []


def test_a_repeat_run_confirms(repo: Path) -> None:
    ingest(repo, checkout("r-1"))
    first = load(repo, PLACE_ORDER)
    out = ingest(repo, checkout("r-2"))
    assert out["ordinal"] == 2 and ops(out)[PLACE_ORDER] == "confirm"
    assert set(ops(out).values()) == {"confirm"}
    after = load(repo, PLACE_ORDER)
    assert after.trust.confirmations == first.trust.confirmations + 1 == 2
    assert after.trust.last_confirmed == 2 and after.valid.from_ == 1
    assert [e.run for e in after.evidence] == ["r-1", "r-2"]
    assert after.status == "active"  # two local confirmations pass the gate
    assert after.title == first.title and after.body == first.body and not after.history


def test_a_timing_in_the_observed_text_is_not_a_new_claim(repo: Path) -> None:
    ingest(repo, checkout("r-1"))
    run = checkout("r-2")
    run["tests"][1]["steps"][0]["observed"] = "8 suggestions after 2310 ms"
    out = ingest(repo, run)
    assert ops(out)[fact_id("el:list:suggestions", "visible")] == "confirm"


def test_a_later_build_where_the_app_changed_supersedes_and_diff_lists_it(repo: Path) -> None:
    ingest(repo, checkout("r-1", build="v1"))
    ingest(repo, checkout("r-2", build="v1"))
    old = load(repo, PLACE_ORDER)
    assert old.status == "active"
    out = ingest(repo, checkout("r-3", build="v2", place_order="enabled"))
    assert ops(out)[PLACE_ORDER] == "supersede" and out["ordinal"] == 3
    new = load(repo, PLACE_ORDER)
    assert new.id == PLACE_ORDER  # superseded in place: same subject, same file
    assert new.valid.from_ == 3 and new.valid.until is None
    assert new.trust.confirmations == 1 and new.trust.last_confirmed == 3
    assert [(e.run, e.observed, e.check) for e in new.evidence] == \
        [("r-3", "Place order (enabled)", "assert-enabled")]
    (h,) = new.history
    assert (h.valid.from_, h.valid.until) == (1, 3)
    assert h.title == old.title and h.body == old.body and "disabled" in h.title + h.body
    assert h.trust is not None and h.trust.confirmations == 2
    # the checkbox fact did not change: confirmed, no history
    assert ops(out)[TERMS] == "confirm" and not load(repo, TERMS).history
    diff = cli_json(repo, "knowledge", "diff", "v1", "--product", PRODUCT)
    validate(diff, "diff")
    assert diff["since_ordinal"] == 1 and PLACE_ORDER in diff["superseded"]
    assert PLACE_ORDER in diff["added"] and TERMS in diff["confirmed"]
    assert PLACE_ORDER not in diff["deprecated"]
    since_v2 = cli_json(repo, "knowledge", "diff", "v2", "--product", PRODUCT)
    assert since_v2["since_ordinal"] == 3 and PLACE_ORDER in since_v2["superseded"]
    assert since_v2["added"] == []
    out = run_cli(repo, "knowledge", "diff", "v9", "--product", PRODUCT)
    assert out.returncode == 2 and len(error_lines(out.stderr)) == 1


# --- CI never promotes -----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["--ci", "CI=true", '"ci": true'])
def test_ci_only_runs_never_make_anything_active(repo: Path, how: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "CI=true":
        monkeypatch.setenv("CI", "true")
    for n in (1, 2, 3):
        run = checkout(f"r-{n}", search="flaky" if n == 2 else "pass",
                       ci=True if how.startswith('"ci"') else None)
        args = ["runs", "ingest", str(write_run(repo.parent, run))]
        if how == "--ci":
            args.append("--ci")
        out = cli_json(repo, *args)
        assert out["ci"] is True
    recs = all_records(repo)
    assert recs and {r.status for r in recs} == {"candidate"}
    assert {r.trust.source for r in recs} == {"ci"}
    # the same runs, locally, do promote (the gate is what held them back)
    monkeypatch.delenv("CI", raising=False)
    assert load(repo, PLACE_ORDER).trust.confirmations == 3
    out = ingest(repo, checkout("r-4"))
    assert ops(out)[PLACE_ORDER] == "confirm"
    assert load(repo, PLACE_ORDER).status == "candidate"  # one local run: 1 of 2
    ingest(repo, checkout("r-5"))
    assert load(repo, PLACE_ORDER).status == "active"


def test_a_ci_run_never_promotes_a_local_candidate(repo: Path) -> None:
    ingest(repo, checkout("r-1"))
    out = ingest(repo, checkout("r-2"), ci=True)
    assert out["ci"] is True and ops(out)[PLACE_ORDER] == "confirm"
    rec = load(repo, PLACE_ORDER)
    assert rec.status == "candidate" and rec.trust.confirmations == 1
    assert rec.trust.last_confirmed == 2


# --- secrets ---------------------------------------------------------------------------------

SECRETS = {"pw": "Zq9#hunter2-PASSWORD-xyz", "token": "sk_live_Vq7Wmx9ZyQ4pLs",
           "host": "internal-db.corp-secret.example"}


MODEL_SCRIPT = r'''
import hashlib, json, os, sys
prompt = sys.stdin.read()
h = hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]
with open(os.environ.get("MODEL_LOG") or sys.argv[1], "a", encoding="utf-8") as f:
    f.write(h + "\n")
extra = open(sys.argv[2], encoding="utf-8").read() if len(sys.argv) > 2 else ""
if "Classify" in prompt:
    print("app-bug " + extra)
else:
    print(json.dumps({"title": "Worded by the model " + h + " " + extra,
                      "body": "What the run showed, in plain words. " + extra}))
'''


def model_config(tmp: Path, echo: str = "") -> tuple[str, Path]:
    """A [model] table running a real subprocess model; and its call log."""
    script = tmp / "model.py"
    script.write_text(MODEL_SCRIPT, encoding="utf-8")
    log = tmp / "model.log"
    argv = [sys.executable, str(script), str(log)]
    if echo:  # what the model adds to each answer (kept outside the repository)
        (tmp / "model-echo.txt").write_text(echo, encoding="utf-8")
        argv.append(str(tmp / "model-echo.txt"))
    return f"[model]\ncommand = {json.dumps(argv)}\n", log


def _secret_run(run_id: str, build: str) -> dict[str, Any]:
    pw, token, host = SECRETS["pw"], SECRETS["token"], SECRETS["host"]
    return a_run(run_id, [
        a_test("login", [
            step(0, f"el:input:{token}", f"Signed in with {pw}", kind="assert-value",
                 anchors=(f"page:/login/{token}", f"api:POST:https://{host}/auth"),
                 value=pw, scope={"tenant": token}),
            step(1, "el:button:sign-in", f"Welcome back, token={token}", kind="assert-text",
                 anchors=("page:/login",), check={"kind": "assert-text", "passed": True,
                                                  "expected": f"Welcome {pw}"}),
        ], anchors=[f"flow:{token}"], **{"x-note": pw}),
        a_test("search", [
            step(0, "el:list:results", None, kind="assert-visible", passed=False,
                 anchors=("page:/search",), error=f"net::ERR_CONNECTION_RESET at https://{host}/q?k={token}"),
        ], verdict="fail", failure={"message": f"GET https://{host}/q?k={token} -> 503 "
                                               f"Service Unavailable ({pw})", "step": 0}),
        a_test("profile", [
            step(0, "el:label:name", f"Name: {pw}", kind="assert-text", anchors=("page:/me",)),
            step(1, "el:label:key", None, kind="assert-text", passed=False,
                 anchors=("page:/me",), error=f"expected {token} to be shown"),
        ], verdict="fail", failure={"message": f"AssertionError: expected {token}", "step": 1}),
    ], build=build)


def test_secret_values_appear_in_no_file_under_the_repository(repo: Path,
                                                               tmp_path: Path) -> None:
    write_secrets(repo, SECRETS)
    table, log = model_config(tmp_path, echo=SECRETS["token"])  # a model that leaks one
    set_config(repo, table)
    for n, build in ((1, "v1"), (2, "v1"), (3, "v2")):
        run = _secret_run(f"r-{n}", build)
        if n == 3:
            run["tests"][0]["steps"][0]["observed"] = f"Signed in as {SECRETS['pw']} (v2)"
        out = cli_json(repo, "runs", "ingest", str(write_run(repo.parent, run)))
        assert not [s for s in SECRETS.values() if s in json.dumps(out)]
    assert log.read_text(encoding="utf-8").strip(), "the model was never asked"
    shown = cli_json(repo, "runs", "show", "r-3")
    assert not [s for s in SECRETS.values() if s in json.dumps(shown)]
    cli_json(repo, "knowledge", "rebuild-index")
    cli_json(repo, "runs", "list")
    snap = snapshot(repo)
    assert any(k.startswith(".agent-qa/runs/") for k in snap)
    assert any(k.endswith(".sqlite") and "index" in k for k in snap)
    assert any("/queue/" in k for k in snap)
    assert leaks(repo, SECRETS) == []
    masked = [r for r in all_records(repo) if "[secret:" in r.anchor + r.title + r.body +
              json.dumps([dict(e) for e in r.evidence], default=str)]
    assert masked, "the secrets were not masked into the records"


def test_a_secret_is_not_recreated_by_collapsing_whitespace(repo: Path) -> None:
    """Masking runs on the raw run; the candidates then collapse runs of whitespace. A
    passphrase the app showed with a double space must not come out whole."""
    secrets = {"phrase": "correct horse battery staple"}
    write_secrets(repo, secrets)
    run = a_run("r-1", [a_test("hint", [
        step(0, "el:label:hint", "Hint: correct  horse\tbattery\n staple", anchors=("page:/",)),
        step(1, "el:label:other", None, passed=False,
             error="AssertionError: expected correct   horse battery staple"),
    ], verdict="fail", failure={"message": "AssertionError: expected correct   horse "
                                           "battery staple", "step": 1})])
    cli_json(repo, "runs", "ingest", str(write_run(repo.parent, run)))
    assert leaks(repo, secrets) == []


# --- determinism and the example series -------------------------------------------------------

SERIES = [f"r-{n:04d}" for n in range(51, 61)]


def test_two_repositories_that_ingest_the_same_runs_get_the_same_ids_and_bytes(
        tmp_path: Path) -> None:
    a = init_repo(tmp_path / "a" / "repo")
    b = init_repo(tmp_path / "b" / "deeper" / "repo")
    results = {}
    for root in (a, b):
        results[root] = [ingest(root, example(name)) for name in SERIES]
    assert results[a] == results[b]
    ra, rb = records(a), records(b)
    assert len(ra) > 20 and ra == rb
    for rel in ("build-ordinals.json", *(f"runs/{n}.json" for n in SERIES)):
        assert (a / ".agent-qa" / rel).read_bytes() == (b / ".agent-qa" / rel).read_bytes()


def _statuses(root: Path) -> dict[str, str]:
    return {r.id: r.status for r in all_records(root)}


def test_the_example_series_teaches_what_docs_runs_md_says(repo: Path) -> None:
    res: dict[str, dict[str, Any]] = {}
    statuses: dict[str, dict[str, str]] = {}
    contradictions: dict[str, dict[str, int]] = {}
    for name in SERIES:
        res[name] = ingest(repo, example(name))
        statuses[name] = _statuses(repo)
        contradictions[name] = {r.id: r.trust.contradictions for r in all_records(repo)
                                if r.trust.contradictions}
    assert [res[n]["ordinal"] for n in SERIES] == list(range(1, 11))
    place = fact_id("el:button:place-order", "enabled")
    suggestions = fact_id("el:list:suggestions", "visible")
    # r-0051: facts for each verified step, a procedure per test
    first = ops(res["r-0051"])
    assert place in first and set(first.values()) == {"add"}
    assert sum(rid.startswith("procedure-") for rid in first) == 3
    v1 = load_version(repo, place, 1)
    assert "disabled" in v1.title + v1.body
    # r-0052: confirmations; a flaky caution on el:list:suggestions, no contradiction
    r52 = ops(res["r-0052"])
    assert res["r-0052"]["analysis"] == {"search-suggestions": "flaky"}
    assert r52[place] == "confirm"
    cautions = [rid for rid, op in r52.items() if rid.startswith("caution-")]
    assert len(cautions) == 1 and load(repo, cautions[0]).anchor == "el:list:suggestions"
    assert not [rid for rid in r52 if rid.startswith("unknown-")]
    # r-0053 (CI): nothing is promoted by it
    promoted = {rid for rid, s in statuses["r-0053"].items()
                if s == "active" and statuses["r-0052"].get(rid) != "active"}
    assert promoted == set() and res["r-0053"]["ci"] is True
    # r-0054: environment by its error text; a caution about the payment host; the
    # checkout facts untouched (no contradiction)
    assert res["r-0054"]["analysis"] == {"checkout-happy-path": "environment"}
    hosts = [load(repo, rid).anchor for rid, op in ops(res["r-0054"]).items()
             if rid.startswith("caution-")]
    assert hosts == ["host:payments.sandbox.shop-web.test"]
    assert not [rid for rid in ops(res["r-0054"]) if rid.startswith("unknown-")]
    # r-0055: local candidates seen twice are promoted
    assert {rid for rid, s in statuses["r-0055"].items()
            if s == "active" and statuses["r-0054"].get(rid) == "candidate"}
    # r-0056: flaky by history (no hint; it passed on v1.4.3 before)
    assert res["r-0056"]["analysis"] == {"search-suggestions": "flaky"}
    assert ops(res["r-0056"])[cautions[0]] == "confirm"
    # r-0057: the failed check says what the app shows now (enabled): the fact it
    # contradicts is superseded at once — the old claim is no longer served — by a
    # candidate no failure confirms, and the unknown names it
    r57 = res["r-0057"]
    assert r57["analysis"] == {"checkout-happy-path": "app-bug"}
    unknowns = [c for c in r57["changes"] if c["op"] == "unknown"]
    assert len(unknowns) == 1 and unknowns[0].get("contradicts") == [place]
    assert contradictions["r-0056"] == {} and contradictions["r-0057"] == {}
    assert ops(r57)[place] == "supersede" and statuses["r-0057"][place] == "candidate"
    # r-0058: the updated test verifies assert-enabled: a confirmation of the new version
    assert ops(res["r-0058"])[place] == "confirm" and res["r-0058"]["proposals"] == []
    assert contradictions["r-0060"] == {}  # the new version starts with none
    # r-0059: a confirmation of the new version
    assert ops(res["r-0059"])[place] == "confirm"
    # r-0060 (CI): an environmental caution that contradicts nothing, promotes nothing
    assert res["r-0060"]["analysis"] == {"search-suggestions": "environment"}
    assert [load(repo, rid).anchor for rid in ops(res["r-0060"])
            if rid.startswith("caution-")] == ["host:staging.shop-web.test"]
    assert {rid for rid, s in statuses["r-0060"].items()
            if s == "active" and statuses["r-0059"].get(rid) != "active"} == set()
    # the end state
    final = load(repo, place)
    assert final.valid.from_ == 7 and final.evidence[0].observed == "Place order (enabled)"
    assert final.evidence[0].run == "r-0057" and final.status == "active"
    assert [(h.valid.from_, h.valid.until) for h in final.history] == [(1, 7)]
    sug = load(repo, suggestions)
    assert sug.trust.contradictions == 0 and sug.status == "active"
    assert sug.valid.until is None and not sug.history
    diff = Memidex(repo).diff("v1.4.2", PRODUCT).to_json()
    assert place in diff["superseded"]
    diff_cli = cli_json(repo, "knowledge", "diff", "v1.4.2", "--product", PRODUCT)
    assert diff_cli["superseded"] == diff["superseded"]


def load_version(root: Path, rid: str, ordinal: int) -> Any:
    """The version of a record served at ``ordinal`` (the current one or a history entry)."""
    r = load(root, rid)
    if r.valid.from_ <= ordinal and (r.valid.until is None or ordinal < r.valid.until):
        return r
    for h in r.history:
        if h.valid.from_ <= ordinal and (h.valid.until is None or ordinal < h.valid.until):
            return h
    raise AssertionError(f"no version of {rid} at {ordinal}")


# --- deprecation ----------------------------------------------------------------------------


def _two_anchor_run(run_id: str, with_b: bool, verdict: str = "pass") -> dict[str, Any]:
    steps = [step(0, "el:item:a", "A")]
    if with_b:
        steps.append(step(1, "el:item:b", "B"))
    failure = None
    if verdict == "fail":
        steps.append(step(2, "el:item:c", None, passed=False, error="Timeout 5000ms exceeded"))
        failure = {"message": "Timeout 5000ms exceeded", "hint": "flaky", "step": 2}
    return a_run(run_id, [a_test("t", steps, verdict=verdict, failure=failure)])


def test_a_fact_is_deprecated_after_three_passing_runs_without_its_anchor(repo: Path) -> None:
    b = fact_id("el:item:b", "text")
    a = fact_id("el:item:a", "text")
    ingest(repo, _two_anchor_run("r-1", True))
    ingest(repo, _two_anchor_run("r-2", True))
    assert load(repo, b).status == "active"
    ingest(repo, _two_anchor_run("r-3", False))
    # failing runs of the test do not count towards deprecation
    ingest(repo, _two_anchor_run("r-4", False, verdict="fail"))
    ingest(repo, _two_anchor_run("r-5", False))
    assert load(repo, b).status == "active"
    out = ingest(repo, _two_anchor_run("r-6", False))
    assert ops(out)[b] == "deprecate" and out["ordinal"] == 6
    gone = load(repo, b)
    assert gone.status == "deprecated" and gone.valid.until == 6
    assert load(repo, a).status == "active"
    out = ingest(repo, _two_anchor_run("r-7", False))
    assert b not in ops(out)
    diff = Memidex(repo).diff("v1", PRODUCT).to_json()
    assert b in diff["deprecated"]


def test_seeing_the_anchor_again_resets_the_count(repo: Path) -> None:
    b = fact_id("el:item:b", "text")
    ingest(repo, _two_anchor_run("r-1", True))
    for n, with_b in ((2, False), (3, False), (4, True), (5, False), (6, False)):
        out = ingest(repo, _two_anchor_run(f"r-{n}", with_b))
        assert ops(out).get(b) != "deprecate", n
    assert load(repo, b).status in ("candidate", "active")


# --- proposals ------------------------------------------------------------------------------


def test_a_run_contradicting_a_human_written_record_is_a_proposal_not_a_rewrite(
        repo: Path) -> None:
    added = cli_json(repo, "knowledge", "add", "--kind", "fact", "--product", PRODUCT,
                     "--anchor", "el:button:place-order", "--scope", "aspect=enabled",
                     "--title", "Place order stays disabled until the terms are ticked",
                     "--body", "The Place order button is disabled until terms are ticked.")
    assert added["id"] == PLACE_ORDER
    path = repo / added["path"]
    before = path.read_bytes()
    out = ingest(repo, checkout("r-1", place_order="enabled"))
    assert path.read_bytes() == before, "a run rewrote (or confirmed) a person's record " \
        "with a claim it does not make"
    assert out["proposals"], "the different claim was not held as a proposal"
    assert ops(out).get(PLACE_ORDER) in (None, "noop")


def _held_supersession(repo: Path) -> tuple[dict[str, Any], Path, bytes]:
    """A supersession held back as a proposal (max_rewrites = 0)."""
    set_config(repo, "[learning]\nmax_rewrites = 0\n")
    ingest(repo, checkout("r-1"))
    ingest(repo, checkout("r-2"))
    path = repo / RECORDS / "fact" / f"{PLACE_ORDER}.md"
    before = path.read_bytes()
    out = ingest(repo, checkout("r-3", build="v2", place_order="enabled"))
    assert PLACE_ORDER not in ops(out)
    assert path.read_bytes() == before
    listed = cli_json(repo, "knowledge", "proposals")
    validate(listed, "proposals")
    assert sorted(q["id"] for q in listed["proposals"]) == sorted(out["proposals"])
    (p,) = [q for q in listed["proposals"] if q["record_id"] == PLACE_ORDER]
    assert (p["op"], p["run_id"]) == ("supersede", "r-3")
    assert "rewrites" in p["reason"]
    return p, path, before


def test_accepting_a_proposal_applies_it(repo: Path) -> None:
    p, path, _before = _held_supersession(repo)
    out = cli_json(repo, "knowledge", "proposals", "accept", p["id"])
    validate(out, "proposals")
    assert out["decision"] == "accepted" and out["changed"] is True
    rec = load(repo, PLACE_ORDER)
    assert rec.valid.from_ == 3 and [(h.valid.from_, h.valid.until) for h in rec.history] \
        == [(1, 3)]
    assert [e.observed for e in rec.evidence] == ["Place order (enabled)"]
    left = cli_json(repo, "knowledge", "proposals")["proposals"]
    assert p["id"] not in [q["id"] for q in left]
    out = run_cli(repo, "knowledge", "proposals", "accept", p["id"])
    assert out.returncode != 0 and len(error_lines(out.stderr)) == 1
    assert "Traceback" not in out.stderr


def test_rejecting_a_proposal_drops_it(repo: Path) -> None:
    p, path, before = _held_supersession(repo)
    out = cli_json(repo, "knowledge", "proposals", "reject", p["id"])
    assert out["decision"] == "rejected" and out["changed"] is False
    assert path.read_bytes() == before
    left = cli_json(repo, "knowledge", "proposals")["proposals"]
    assert p["id"] not in [q["id"] for q in left] and len(left) == 1


def test_accepting_a_proposal_after_the_record_changed_on_disk_is_refused(repo: Path) -> None:
    p, path, before = _held_supersession(repo)
    edited = before + b"\nA note a person added by hand.\n"
    path.write_bytes(edited)
    out = run_cli(repo, "knowledge", "proposals", "accept", p["id"])
    assert out.returncode == 3, out.stderr
    assert len(error_lines(out.stderr)) == 1 and "Traceback" not in out.stderr
    assert path.read_bytes() == edited  # the person's edit is kept
    listed = cli_json(repo, "knowledge", "proposals")["proposals"]
    assert p["id"] in [q["id"] for q in listed]  # nothing lost: still proposed


# --- rollback -------------------------------------------------------------------------------


def test_rollback_restores_the_exact_bytes_and_removes_what_the_run_created(repo: Path) -> None:
    ingest(repo, example("r-0051"))
    before = records(repo)
    out = ingest(repo, example("r-0052"))
    created = [rid for rid, op in ops(out).items() if op == "add"]
    assert created and records(repo) != before
    data = cli_json(repo, "knowledge", "rollback", "r-0052")
    validate(data, "rollback")
    assert data["runs"] == ["r-0052"]
    assert records(repo) == before
    assert {Path(p).stem for p in data["removed"]} == set(created)
    listed = {r["run_id"]: r for r in cli_json(repo, "runs", "list")["runs"]}
    assert listed["r-0052"]["rolled_back"] is True and listed["r-0051"]["rolled_back"] is False
    assert "r-0052" not in Memidex(repo).diff("v1.4.2", PRODUCT).to_json()["runs"]


def _one_element(run_id: str, test_id: str, target: str, observed: str) -> dict[str, Any]:
    return a_run(run_id, [a_test(test_id, [step(0, target, observed)])])


def test_rollback_keeps_a_later_runs_changes_to_other_records(repo: Path) -> None:
    ingest(repo, _one_element("r-1", "ta", "el:item:a", "A"))
    ingest(repo, _one_element("r-2", "tb", "el:item:b", "B"))
    ingest(repo, _one_element("r-3", "tb", "el:item:b", "B"))
    kept = {k: v for k, v in records(repo).items() if "item-b" in k or "test-tb" in k}
    assert len(kept) == 2
    data = cli_json(repo, "knowledge", "rollback", "r-1")
    assert data["runs"] == ["r-1"] and len(data["removed"]) == 2
    assert records(repo) == kept


def test_rollback_refuses_when_a_later_run_changed_the_same_record_and_cascade_rolls_both_back(
        repo: Path) -> None:
    ingest(repo, _one_element("r-0", "tz", "el:item:z", "Z"))
    base = records(repo)
    ingest(repo, _one_element("r-1", "ta", "el:item:a", "A"))
    ingest(repo, _one_element("r-2", "ta", "el:item:a", "A"))
    before = snapshot(repo)
    out = run_cli(repo, "knowledge", "rollback", "r-1")
    assert out.returncode == 2, out.stderr
    lines = error_lines(out.stderr)
    assert len(lines) == 1 and "r-2" in lines[0] and "Traceback" not in out.stderr
    assert records(repo) == {k: before[f"{RECORDS}/{k}"] for k in records(repo)}
    assert changed({k: v for k, v in before.items() if k.startswith(RECORDS)},
                   {k: v for k, v in snapshot(repo).items() if k.startswith(RECORDS)}) == []
    data = cli_json(repo, "knowledge", "rollback", "r-1", "--cascade")
    assert data["runs"] == ["r-2", "r-1"]
    assert records(repo) == base


def test_rollback_refuses_a_file_a_person_edited_since(repo: Path) -> None:
    out = ingest(repo, _one_element("r-1", "ta", "el:item:a", "A"))
    rid = next(rid for rid in ops(out) if rid.startswith("fact-"))
    path = repo / RECORDS / "fact" / f"{rid}.md"
    edited = path.read_bytes() + b"\nEdited by hand.\n"
    path.write_bytes(edited)
    res = run_cli(repo, "knowledge", "rollback", "r-1")
    assert res.returncode == 2 and len(error_lines(res.stderr)) == 1
    assert path.read_bytes() == edited


def test_rollback_of_a_run_never_ingested_is_an_error(repo: Path) -> None:
    out = run_cli(repo, "knowledge", "rollback", "r-404")
    assert out.returncode != 0 and len(error_lines(out.stderr)) == 1
    assert "Traceback" not in out.stderr
