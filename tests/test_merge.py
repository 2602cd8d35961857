"""The records' merge driver: the pure field-level merge (rules and properties), the
driver's file protocol, ``init``'s git set-up and a real ``git merge`` of two branches."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from hypothesis import assume, given
from hypothesis import strategies as st

from conftest import git, make_record, write_record
from memidex.errors import RecordError
from memidex.records.codec import dump_record, parse_record
from memidex.records.merge import merge_records, merge_texts
from memidex.records.model import Evidence, HistoryEntry, Record, Relations, Trust, Valid
from memidex.records.transitions import confirm, supersede_in_place
from memidex.store.gitsetup import DRIVER, merge_driver_status, run_merge_driver, setup_git
from strategies import records


def _base() -> Record:
    return replace(make_record(trust=Trust("local", 3, 0, 41), valid=Valid(36, None),
                               anchors=("page:/checkout",)),
                   evidence=(Evidence(run="r-0041", test="checkout", step=3,
                                      observed="disabled"),))


def _confirmed(r: Record, run: str, ordinal: int) -> Record:
    r = confirm(r, ordinal)
    return replace(r, evidence=(*r.evidence, Evidence(run=run, test="checkout", step=3,
                                                      observed="disabled")))


# --- the rules ---------------------------------------------------------------------------


def test_confirmations_from_both_sides_add_up_and_evidence_is_united() -> None:
    base = _base()
    ours = _confirmed(_confirmed(base, "r-0042", 42), "r-0044", 44)
    theirs = _confirmed(base, "r-0043", 43)
    result = merge_records(base, ours, theirs)
    assert result.clean and result.record is not None
    assert result.record.trust.confirmations == 3 + 2 + 1
    assert result.record.trust.last_confirmed == 44
    assert [e.run for e in result.record.evidence] == ["r-0041", "r-0042", "r-0043", "r-0044"]


def test_capped_evidence_merges_into_a_valid_record_with_its_total() -> None:
    # Each side kept only its last items (the curator's cap) and counted the rest: the
    # union may hold more items than either side's count said; the merge stays valid.
    base = replace(_base(), evidence_total=5, written_by="template")
    ours = replace(_confirmed(base, "r-0042", 42), evidence_total=6)
    theirs = replace(_confirmed(base, "r-0043", 43), evidence_total=6,
                     title="Place order needs the terms box", written_by="model")
    result = merge_records(base, ours, theirs)
    assert result.clean and result.record is not None
    merged = result.record
    assert merged.evidence_total == 7 and len(merged.evidence) == 3
    assert merged.written_by == "model"  # the wording kept is theirs
    assert parse_record(dump_record(merged), "x.md") == merged  # loads back: valid
    # With no count on either side, the union is all of it: no total is written.
    plain = merge_records(_base(), _confirmed(_base(), "r-0042", 42),
                          _confirmed(_base(), "r-0043", 43)).record
    assert plain is not None and plain.evidence_total is None


def test_anchor_and_relation_removals_are_honoured() -> None:
    base = replace(_base(), anchors=("page:/checkout", "test:a"),
                   relations=Relations(cites=("fact-x-0000000000000000",)))
    ours = replace(base, anchors=("page:/checkout",), relations=Relations())
    theirs = replace(base, anchors=("page:/checkout", "test:a", "test:b"),
                     trust=replace(base.trust, confirmations=4))
    merged = merge_records(base, ours, theirs).record
    assert merged is not None
    assert merged.anchors == ("page:/checkout", "test:b")
    assert merged.relations.cites == ()
    assert merged.trust.confirmations == 4


def test_status_conflict_takes_the_more_cautious() -> None:
    base = _base()
    for a, b, want in [("quarantined", "deprecated", "quarantined"),
                       ("deprecated", "superseded", "deprecated"),
                       ("candidate", "superseded", "superseded"),
                       ("candidate", "quarantined", "quarantined")]:
        ours = replace(base, status=a, trust=replace(base.trust, confirmations=9))
        theirs = replace(base, status=b)
        for x, y in ((ours, theirs), (theirs, ours)):
            result = merge_records(base, x, y)
            assert result.clean and result.record is not None
            assert result.record.status == want


def test_a_new_version_wins_over_a_confirmation_of_the_old_one() -> None:
    base = _base()
    newer = supersede_in_place(base, title="Place order is enabled", body="Now enabled.",
                               ordinal=45)
    older = _confirmed(base, "r-0043", 43)
    for ours, theirs in ((newer, older), (older, newer)):
        result = merge_records(base, ours, theirs)
        assert result.clean and result.record is not None
        merged = result.record
        assert merged.title == "Place order is enabled" and merged.valid == Valid(45, None)
        assert merged.trust == newer.trust
        assert merged.history[-1].trust is not None
        assert merged.history[-1].trust.confirmations == 4  # the old version's confirmation
        # the old claim's confirmation counts in its history entry, and its evidence
        # never enters the new version (the next run would supersede it again)
        assert "r-0043" not in {e.run for e in merged.evidence}
        parse_record(dump_record(merged), "x.md")


def test_a_rewrite_of_the_old_version_against_a_new_version_is_a_conflict() -> None:
    base = _base()
    newer = supersede_in_place(base, title="Enabled now", body="Now enabled.", ordinal=45)
    older = replace(base, body="Someone rewrote the old text.")
    result = merge_records(base, newer, older)
    assert not result.clean and "body" in result.conflicts


def test_both_rewrote_the_body_writes_markers() -> None:
    base = _base()
    ours = replace(base, body="Ours says this.")
    theirs = replace(base, body="Theirs says that.")
    text, result = merge_texts(dump_record(base).encode(), dump_record(ours).encode(),
                               dump_record(theirs).encode(), "r.md")
    assert not result.clean and result.conflicts == ("body",)
    assert text is not None
    assert "<<<<<<< ours\nOurs says this.\n=======\nTheirs says that.\n>>>>>>> theirs" in text
    parse_record(text, "r.md")  # the front matter stays readable


def test_no_base_is_a_two_way_union() -> None:
    ours = _confirmed(_base(), "r-0042", 42)
    theirs = _confirmed(_base(), "r-0043", 43)
    result = merge_records(None, ours, theirs)
    assert result.clean and result.record is not None
    assert {e.run for e in result.record.evidence} == {"r-0041", "r-0042", "r-0043"}
    assert result.record.trust.last_confirmed == 43


def test_unparseable_sides_are_not_merged_as_records() -> None:
    text, result = merge_texts(b"", b"---\nnot: [a record\n---\n", dump_record(_base()).encode())
    assert text is None and not result.clean and result.reason


# --- properties ----------------------------------------------------------------------------


@st.composite
def _edited(draw: st.DrawFn, base: Record) -> Record:
    """A side: ``base`` after a few of the changes a branch makes."""
    r = base
    if draw(st.booleans()):
        r = replace(r, trust=replace(r.trust, confirmations=min(
            r.trust.confirmations + draw(st.integers(1, 3)), 2**62),
            last_confirmed=draw(st.integers(0, 10**6))))
    if draw(st.booleans()):
        r = replace(r, evidence=(*r.evidence, Evidence(run=f"r-{draw(st.integers(0, 99))}",
                                                       test="t", step=draw(st.integers(0, 3)),
                                                       observed="seen")),
                    evidence_total=None if r.evidence_total is None else min(
                        r.evidence_total + 1, 2**63 - 1))
    if draw(st.booleans()):
        r = replace(r, status=draw(st.sampled_from(
            ["candidate", "active", "superseded", "deprecated", "quarantined"])))
    if draw(st.booleans()):
        r = replace(r, anchors=tuple(sorted({*r.anchors[1:],
                                             f"test:t{draw(st.integers(0, 5))}"}
                                            - {r.anchor})))
    if draw(st.booleans()):
        r = replace(r, body=draw(st.sampled_from(["One.", "Two.", r.body])))
    if draw(st.booleans()):
        r = replace(r, relations=replace(r.relations, cites=tuple(sorted(
            {*r.relations.cites, "fact-cited-0123456789abcdef"}))))
    return r


@given(st.data())
def test_merge_properties(data: st.DataObject) -> None:
    base = data.draw(records())
    x = data.draw(_edited(base))
    y = data.draw(_edited(base))
    for r in (base, x, y):  # sides that are valid records themselves
        try:
            parse_record(dump_record(r), "m.md")
        except RecordError:
            assume(False)
    assert merge_records(base, x, x).record == x
    assert merge_records(base, base, x).record == x
    assert merge_records(base, x, base).record == x
    assert merge_records(None, x, x).record == x
    xy, yx = merge_records(base, x, y), merge_records(base, y, x)
    assert set(xy.conflicts) == set(yx.conflicts)
    if xy.clean:
        assert xy.record == yx.record
        assert xy.record is not None
        text = dump_record(xy.record)
        assert parse_record(text, "m.md") == xy.record  # canonical and valid


@given(records())
def test_merge_texts_keeps_identical_bytes(r: Record) -> None:
    raw = dump_record(r).encode()
    text, result = merge_texts(raw, raw, raw)
    assert result.clean and text is not None and text.encode() == raw


# --- the driver and git ----------------------------------------------------------------------


def test_driver_protocol_writes_ours_and_exits(tmp_path: Path) -> None:
    base = _base()
    files = {}
    for name, rec in (("O", base), ("A", _confirmed(base, "r-0042", 42)),
                      ("B", _confirmed(base, "r-0043", 43))):
        files[name] = tmp_path / name
        files[name].write_text(dump_record(rec), encoding="utf-8")
    code, _ = run_merge_driver(str(files["O"]), str(files["A"]), str(files["B"]), "r.md")
    assert code == 0
    merged = parse_record(files["A"].read_text(encoding="utf-8"), "r.md")
    assert merged.trust.confirmations == 5
    # unparseable versions: git's own line conflict, both sides kept
    files["A"].write_text("---\nbroken: [\n---\nours\n", encoding="utf-8")
    files["B"].write_text("---\nbroken: {\n---\ntheirs\n", encoding="utf-8")
    code, note = run_merge_driver(str(files["O"]), str(files["A"]), str(files["B"]), "r.md")
    text = files["A"].read_text(encoding="utf-8")
    assert code == 1 and "<<<<<<<" in text and "ours" in text and "theirs" in text
    assert "r.md" in note


def test_setup_is_idempotent_and_status_reports_a_fresh_clone(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    assert setup_git(root, "kb") == [".gitattributes",
                                     "git config merge.memidex.driver (this clone)"]
    assert setup_git(root, "kb") == []
    assert "kb/records/**/*.md merge=memidex" in (root / ".gitattributes").read_text()
    assert merge_driver_status(root)["ok"]
    git(root, "config", "--unset", "merge.memidex.driver")
    status = merge_driver_status(root)
    assert not status["ok"] and status["fix"] == "memidex init" and status["attributes"]
    assert setup_git(root, "kb") == ["git config merge.memidex.driver (this clone)"]
    assert git(root, "config", "merge.memidex.driver").strip() == DRIVER


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _git_env(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          env=_env(), check=False)


def test_git_merge_of_two_branches_that_confirmed_the_same_record(repo: Path) -> None:
    from conftest import run_cli

    base = _base()
    path = write_record(repo, base)
    rel = path.relative_to(repo).as_posix()
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "left")
    write_record(repo, _confirmed(base, "r-0042", 42))
    git(repo, "commit", "-qam", "left")
    git(repo, "checkout", "-q", "-")
    git(repo, "checkout", "-qb", "right")
    write_record(repo, _confirmed(_confirmed(base, "r-0043", 43), "r-0044", 44))
    git(repo, "commit", "-qam", "right")
    out = _git_env(repo, "merge", "-q", "--no-edit", "left")
    assert out.returncode == 0, out.stderr + out.stdout
    merged = parse_record((repo / rel).read_text(encoding="utf-8"), rel)
    assert merged.trust.confirmations == 3 + 1 + 2
    assert [e.run for e in merged.evidence] == ["r-0041", "r-0042", "r-0043", "r-0044"]
    assert run_cli(repo, "knowledge", "check").returncode == 0

    # conflicting rewrites of the body stop the merge with markers
    git(repo, "checkout", "-qb", "one")
    write_record(repo, replace(merged, body="One way to say it."))
    git(repo, "commit", "-qam", "one")
    git(repo, "checkout", "-q", "right")
    write_record(repo, replace(merged, body="Another way entirely."))
    git(repo, "commit", "-qam", "two")
    out = _git_env(repo, "merge", "--no-edit", "one")
    assert out.returncode != 0 and "CONFLICT" in out.stdout
    text = (repo / rel).read_text(encoding="utf-8")
    assert "<<<<<<< ours\nAnother way entirely.\n=======\nOne way to say it.\n>>>>>>>" in text
    _git_env(repo, "merge", "--abort")


def test_history_entries_merge_by_window() -> None:
    h1 = HistoryEntry(Valid(1, 5), "first", "", Trust(), (), "active")
    base = replace(_base(), history=(h1,))
    ours = replace(base, history=(h1,), trust=replace(base.trust, confirmations=5))
    theirs = replace(base, history=(replace(h1, body="annotated"),))
    merged = merge_records(base, ours, theirs).record
    assert merged is not None and merged.history[0].body == "annotated"
    assert merged.trust.confirmations == 5
