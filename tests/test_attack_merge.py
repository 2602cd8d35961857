"""Hardening, the merge driver under attack: two clones that each learned from one run
merge without losing a confirmation; a merged supersession is not superseded again; the
sums stay within what a record can hold."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conftest import make_record
from memidex.records.codec import dump_record, parse_record
from memidex.records.merge import merge_records
from memidex.records.model import MAX_ORDINAL, Evidence, Record, Trust, Valid
from memidex.records.transitions import confirm


def _base() -> Record:
    return replace(make_record(trust=Trust("local", 3, 0, 41), valid=Valid(36, None),
                               anchors=("page:/checkout",)),
                   evidence=(Evidence(run="r-0041", test="checkout", step=3,
                                      observed="disabled"),))


def _seen(r: Record, run: str, ordinal: int, observed: str = "disabled") -> Record:
    r = confirm(r, ordinal)
    return replace(r, evidence=(*r.evidence, Evidence(run=run, test="checkout", step=3,
                                                      observed=observed)))


def test_equal_trust_from_two_different_runs_adds_both_confirmations() -> None:
    # each clone numbered its own next run 42: the two sides' trust is equal, their
    # evidence is not — two confirmations, not one
    base = _base()
    ours, theirs = _seen(base, "r-a", 42), _seen(base, "r-b", 42)
    assert ours.trust == theirs.trust and ours != theirs
    merged = merge_records(base, ours, theirs).record
    assert merged is not None and merged.trust.confirmations == base.trust.confirmations + 2
    assert {e.run for e in merged.evidence} == {"r-0041", "r-a", "r-b"}


def test_the_same_run_on_both_sides_counts_once() -> None:
    base = _base()
    ours = _seen(base, "r-a", 42)
    theirs = replace(ours, title=ours.title + " (reworded)")  # same run, other change
    merged = merge_records(base, ours, theirs).record
    assert merged is not None and merged.trust.confirmations == base.trust.confirmations + 1


def test_a_merged_supersession_keeps_the_old_claims_evidence_out_of_the_new_version() -> None:
    base = _base()
    confirmed_old = _seen(base, "r-old", 45)  # one branch confirms the old claim
    new = replace(base, title="Place order is enabled at once", body="Enabled now.",
                  trust=Trust("local", 1, 0, 50), valid=Valid(50, None),
                  evidence=(Evidence(run="r-new", test="checkout", step=3,
                                     observed="enabled"),))
    from memidex.records.model import HistoryEntry

    new = replace(new, history=(HistoryEntry(valid=Valid(36, 50), title=base.title,
                                             body=base.body, trust=base.trust),))
    merged = merge_records(base, confirmed_old, new).record
    assert merged is not None and merged.valid.from_ == 50
    assert [e.run for e in merged.evidence] == ["r-new"]  # no old-claim item in it
    # the old version's history entry got the other side's confirmation
    assert merged.history[-1].trust is not None
    assert merged.history[-1].trust.confirmations == base.trust.confirmations + 1
    assert parse_record(dump_record(merged), "m.md") == merged


def test_counts_and_totals_never_sum_past_what_a_record_holds() -> None:
    near = MAX_ORDINAL - 1
    base = replace(_base(), trust=Trust("local", near, 0, 41), evidence_total=near)
    ours = replace(_seen(base, "r-a", 42), evidence_total=MAX_ORDINAL)
    theirs = replace(_seen(base, "r-b", 43), evidence_total=MAX_ORDINAL)
    merged = merge_records(base, ours, theirs).record
    assert merged is not None
    assert merged.trust.confirmations == MAX_ORDINAL
    assert merged.evidence_total == MAX_ORDINAL
    assert parse_record(dump_record(merged), "m.md") == merged  # still a valid record


def test_a_real_pull_between_two_clones_that_each_ingested_a_run(tmp_path: Path) -> None:
    # the team's repository learned from one run; two clones each ingest another run
    # (each numbers it 2); B pulls A through the records' merge driver
    import json
    import os
    import subprocess
    import sys

    from conftest import git, run_cli
    from learnkit import checkout, init_repo, load

    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    origin = init_repo(tmp_path / "origin")
    git(origin, "config", "user.email", "t@example.test")
    git(origin, "config", "user.name", "t")
    first = tmp_path / "r-1.json"
    first.write_text(json.dumps(checkout("r-1")), encoding="utf-8")
    assert run_cli(origin, "runs", "ingest", str(first)).returncode == 0
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "learned from r-1")
    clones = []
    for name in ("a", "b"):
        clone = tmp_path / name
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
        for key, value in (("user.email", "t@example.test"), ("user.name", name)):
            git(clone, "config", key, value)
        assert run_cli(clone, "init").returncode == 0  # this clone's merge driver config
        run = tmp_path / f"r-2{name}.json"
        run.write_text(json.dumps(checkout(f"r-2{name}")), encoding="utf-8")
        out = run_cli(clone, "runs", "ingest", str(run), "--json")
        assert out.returncode == 0, out.stderr
        git(clone, "add", "agent-qa-knowledge")
        git(clone, "commit", "-qm", f"learned from r-2{name}")
        clones.append(clone)
    a, b = clones
    out = subprocess.run(["git", "pull", "-q", "--no-rebase", "--no-edit", str(a), "HEAD"],
                         cwd=b, capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr + out.stdout
    from learnkit import PLACE_ORDER

    merged = load(b, PLACE_ORDER)
    # r-1, r-2a and r-2b: three confirmations, none lost
    assert merged.trust.confirmations == 3
    assert {e.run for e in merged.evidence} == {"r-1", "r-2a", "r-2b"}
    assert run_cli(b, "knowledge", "check").returncode == 0
