"""Issue 9, items 2, 4, 5 and 11: integer bounds, writes outside the repository, the status
transition table, and integrity gaps. Real git repositories, real subprocesses."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import make_record, run_cli, write_record
from memidex.app import Memidex
from memidex.errors import RecordError, UsageError
from memidex.records.codec import dump_record, parse_record
from memidex.records.model import MAX_ORDINAL, Evidence, Record, Relations, Valid
from memidex.records.transitions import (
    COMMANDS,
    TRANSITIONS,
    confirm,
    deprecate,
    quarantine,
    release,
    supersede_by,
    supersede_in_place,
    update,
)
from memidex.records.yamlfast import dump_value

FACTS = "agent-qa-knowledge/memory/records/fact"
HUGE = 99999999999999999999999


def _clean(out: Any, code: int) -> None:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and out.stderr.startswith("error:"), out.stderr


# --- item 2: integer bounds ---------------------------------------------------------------


def test_huge_numbers_on_the_cli_are_usage_errors(repo: Path) -> None:
    r = make_record()
    write_record(repo, r)
    before = (repo / FACTS / f"{r.id}.md").read_bytes()
    for args in (("knowledge", "confirm", r.id, "--run-ordinal", str(HUGE)),
                 ("knowledge", "deprecate", r.id, "--ordinal", str(HUGE)),
                 ("knowledge", "supersede", r.id, "--title", "n", "--ordinal", str(HUGE)),
                 ("knowledge", "search", "place", "-n", str(HUGE)),
                 ("knowledge", "search", "place", "--limit", str(2**63)),
                 ("knowledge", "list", "-n", str(HUGE))):
        _clean(run_cli(repo, *args), 2)
    assert (repo / FACTS / f"{r.id}.md").read_bytes() == before


_FIELDS = ("trust.confirmations", "trust.contradictions", "trust.last_confirmed",
           "valid.from", "valid.until", "evidence.step", "history.from", "history.until",
           "history.confirmations")


def _front(r: Record, field: str, value: int) -> str:
    """The canonical front matter of ``r`` with one numeric field set to ``value``."""
    data: dict[str, Any] = {
        "id": r.id, "kind": r.kind, "status": r.status, "product": r.product,
        "anchor": r.anchor, "title": r.title,
        "trust": {"source": "local", "confirmations": 1, "contradictions": 0,
                  "last_confirmed": 5},
        "valid": {"from": 5, "until": None},
        "evidence": [{"run": "r-1", "step": 1}],
        "history": [{"valid": {"from": 1, "until": 5}, "title": "old", "body": "",
                     "trust": {"source": "local", "confirmations": 0, "contradictions": 0,
                               "last_confirmed": None}}],
    }
    if field.startswith("history."):
        key = field.removeprefix("history.")
        target = data["history"][0]["trust" if key == "confirmations" else "valid"]
        target[key] = value
    elif field == "evidence.step":
        data["evidence"][0]["step"] = value
    else:
        head, key = field.split(".")
        data[head][key] = value
    lines = [f"{k}: {dump_value(v)}" for k, v in data.items() if k not in ("evidence",
                                                                             "history")]
    lines += ["evidence:", f"  - {dump_value(data['evidence'][0])}"]
    lines += ["history:", f"  - {dump_value(data['history'][0])}"]
    return "---\n" + "\n".join(lines) + "\n---\nbody\n"


@settings(max_examples=60)
@given(field=st.sampled_from(_FIELDS),
       value=st.one_of(st.integers(MAX_ORDINAL + 1, 10**60), st.integers(-(10**60), -1)))
def test_every_numeric_field_is_bounded_at_validation(field: str, value: int) -> None:
    text = _front(make_record(), field, value)
    with pytest.raises(RecordError) as exc:
        parse_record(text, "r.md")
    assert exc.value.problems[0].line > 1


@settings(max_examples=40)
@given(st.integers(-(10**30), 10**30), st.integers(-(10**30), 10**30))
def test_huge_scope_and_evidence_values_round_trip(scope_value: int, extra: int) -> None:
    r = make_record(scope={"n": scope_value})  # type: ignore[dict-item]
    r2 = Record(**{**{f: getattr(r, f) for f in r.__slots__},  # type: ignore[attr-defined]
                   "evidence": (Evidence(run="r", step=1, extra=(("n", extra),)),)})
    assert parse_record(dump_record(r2), "r.md") == r2


def test_a_record_with_a_huge_number_blocks_no_other(repo: Path) -> None:
    good = make_record(anchor="el:button:good", title="good button")
    write_record(repo, good)
    bad = make_record(anchor="el:button:bad", title="bad button")
    path = write_record(repo, bad)
    path.write_text(path.read_text().replace("confirmations: 0", f"confirmations: {HUGE}"))
    for args in (("knowledge", "search", "button", "--json"), ("knowledge", "list", "--json"),
                 ("knowledge", "show", good.id, "--json"), ("knowledge", "rebuild-index"),
                 ("knowledge", "confirm", good.id, "--json")):
        out = run_cli(repo, *args)
        assert out.returncode == 0, (args, out.stderr)
    out = run_cli(repo, "knowledge", "check")
    assert out.returncode == 1 and f"{bad.id}.md:" in out.stdout + out.stderr


# --- item 4: nothing written outside the repository ---------------------------------------


def test_add_through_a_symlinked_kind_folder_is_refused(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    kind_dir = repo / "agent-qa-knowledge/memory/records/procedure"
    for child in kind_dir.iterdir():
        child.unlink()
    kind_dir.rmdir()
    kind_dir.symlink_to(outside)
    out = run_cli(repo, "knowledge", "add", "--kind", "procedure", "--anchor", "test:t",
                  "--title", "t")
    _clean(out, 4)
    assert list(outside.iterdir()) == []


def test_a_symlinked_staging_folder_is_refused(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    staging = repo / "agent-qa-knowledge/memory/staging"
    staging.rmdir()
    staging.symlink_to(outside)
    _clean(run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "el:x",
                   "--title", "t"), 4)
    assert list(outside.iterdir()) == []


def test_a_knowledge_folder_outside_the_repository_creates_nothing(repo: Path,
                                                                    tmp_path: Path) -> None:
    outside = tmp_path / "kb"
    (outside / "records/fact").mkdir(parents=True)
    (repo / "memidex.toml").write_text(f'product = "shop-web"\nknowledge_dir = "{outside}"\n')
    _clean(run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "el:x",
                   "--title", "t"), 4)
    assert sorted(p.name for p in outside.rglob("*")) == ["fact", "records"]


# --- item 5: one status transition table ----------------------------------------------------


def _cli_json(repo: Path, *args: str, code: int = 0) -> dict[str, Any]:
    out = run_cli(repo, *args, "--json")
    assert out.returncode == code, out.stderr
    return json.loads(out.stdout) if code == 0 else {}


@pytest.mark.parametrize("setup", ["quarantine", "deprecate", "supersede"])
def test_add_does_not_override_curation(repo: Path, setup: str) -> None:
    r = make_record(anchor="el:input:prompt")
    write_record(repo, r)
    if setup == "supersede":
        other = make_record(anchor="el:input:other")
        write_record(repo, other)
        _cli_json(repo, "knowledge", "supersede", r.id, "--by", other.id)
    else:
        _cli_json(repo, "knowledge", setup, r.id)
    before = (repo / FACTS / f"{r.id}.md").read_bytes()
    out = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "el:input:prompt",
                  "--title", "now active?")
    _clean(out, 2)
    assert (repo / FACTS / f"{r.id}.md").read_bytes() == before


def test_release_restores_exactly_the_status_before_quarantine(repo: Path) -> None:
    r = make_record(status="candidate")
    write_record(repo, r)
    _cli_json(repo, "knowledge", "quarantine", r.id)
    assert _cli_json(repo, "knowledge", "release", r.id)["status"] == "candidate"
    _cli_json(repo, "knowledge", "deprecate", r.id)  # no --ordinal: the window stays open
    assert _cli_json(repo, "knowledge", "quarantine", r.id)["status"] == "quarantined"
    assert _cli_json(repo, "knowledge", "release", r.id)["status"] == "deprecated"
    assert "previous_status" not in (repo / FACTS / f"{r.id}.md").read_text()


@pytest.mark.parametrize(("status", "relations", "extra", "reason"), [
    ("active", "{supersedes: [], superseded_by: fact-a-0123456789abcdef, cites: [], "
               "contradicts: []}", "", "superseded_by"),
    ("candidate", "{supersedes: [], superseded_by: fact-a-0123456789abcdef, cites: [], "
                  "contradicts: []}", "", "superseded_by"),
    ("active", "{supersedes: [], superseded_by: null, cites: [], contradicts: []}",
     "previous_status: deprecated\n", "previous_status"),
    ("quarantined", "{supersedes: [], superseded_by: null, cites: [], contradicts: []}",
     "previous_status: quarantined\n", "previous_status"),
])
def test_invalid_status_combinations_are_problems(status: str, relations: str, extra: str,
                                                  reason: str) -> None:
    r = make_record()
    text = dump_record(r).replace("status: active\n", f"status: {status}\n{extra}")
    text = text.replace("relations: {supersedes: [], superseded_by: null, cites: [], "
                        "contradicts: []}", f"relations: {relations}")
    with pytest.raises(RecordError) as exc:
        parse_record(text, "r.md")
    assert reason in exc.value.problems[0].reason


_OPS = st.sampled_from(COMMANDS)


@settings(max_examples=150)
@given(st.sampled_from(("candidate", "active")), st.lists(_OPS, max_size=12))
def test_random_command_sequences_follow_the_table(start: str, ops: list[str]) -> None:
    r = make_record(status=start, valid=Valid(10))
    other = make_record(anchor="el:other", valid=Valid(10))
    before_quarantine = None
    ordinal = 11
    for op in ops:
        allowed = TRANSITIONS[op]
        try:
            if op == "confirm":
                new = confirm(r)
            elif op == "supersede":
                new = supersede_in_place(r, title=f"v{ordinal}", ordinal=max(
                    ordinal, r.valid.from_ + 1))
            elif op == "supersede-by":
                new, _ = supersede_by(r, other)
            elif op == "deprecate":
                new = deprecate(r)
            elif op == "quarantine":
                new = quarantine(r)
            elif op == "add":
                new = update(r, title=f"added {ordinal}", body="", anchors=("page:/x",))
            else:
                new = release(r)
        except UsageError:
            assert r.status not in allowed, (op, r.status)
            continue
        ordinal += 1
        assert r.status in allowed, (op, r.status)
        target = allowed[r.status]
        if op == "release":
            assert new.status == before_quarantine
        elif target is not None:
            assert new.status == target
        if op == "quarantine" and r.status != "quarantined":
            before_quarantine = r.status
        # every state reached is a valid record that round-trips through the codec
        assert parse_record(dump_record(new), "r.md") == new
        r = new


# --- item 11: integrity gaps -----------------------------------------------------------------


def test_add_refuses_when_the_record_sits_at_a_non_canonical_path(repo: Path) -> None:
    r = make_record()
    path = write_record(repo, r)
    moved = path.parent / "elsewhere.md"
    path.rename(moved)
    out = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", r.anchor,
                  "--title", "again")
    _clean(out, 4)
    assert "elsewhere.md" in out.stderr and not path.exists()


def test_purge_cleans_the_references_other_records_hold(repo: Path) -> None:
    old = make_record(anchor="el:old")
    new = make_record(anchor="el:new")
    cites = make_record(anchor="el:cites")
    write_record(repo, old)
    write_record(repo, new)
    write_record(repo, Record(**{**{f: getattr(cites, f) for f in cites.__slots__},  # type: ignore[attr-defined]
                                "relations": Relations(cites=(old.id,))}))
    _cli_json(repo, "knowledge", "supersede", old.id, "--by", new.id)
    assert old.id in (repo / FACTS / f"{new.id}.md").read_text()
    _cli_json(repo, "knowledge", "purge", old.id)
    assert old.id not in (repo / FACTS / f"{new.id}.md").read_text()
    assert old.id not in (repo / FACTS / f"{cites.id}.md").read_text()
    out = run_cli(repo, "knowledge", "check")
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(("original", "duplicated", "line"), [
    ("title: Place order is disabled\n", "title: Place order is disabled\ntitle: other\n", 9),
    ("valid: {from: 0, until: null}", "valid: {from: 0, from: 3, until: null}", 10),
    ("trust: {source: local,", "trust: {source: local, source: human,", 9),
])
def test_a_duplicate_key_is_a_problem_with_its_line(repo: Path, original: str,
                                                    duplicated: str, line: int) -> None:
    r = make_record()
    path = write_record(repo, r)
    text = path.read_text()
    assert original in text
    path.write_text(text.replace(original, duplicated))
    out = run_cli(repo, "knowledge", "check")
    assert out.returncode == 1
    assert f"{FACTS}/{r.id}.md:{line}:" in out.stdout and "duplicate key" in out.stdout


def test_a_duplicate_key_in_a_pyyaml_only_file_is_a_problem() -> None:
    r = make_record()
    text = dump_record(r).replace("title: Place order is disabled\n",
                                  "title: 'Place order is disabled'\ntitle: other\n")
    with pytest.raises(RecordError) as exc:
        parse_record(text, "r.md")
    assert exc.value.problems[0].line == 9 and "duplicate key" in exc.value.problems[0].reason


def test_a_nul_byte_in_a_body_is_refused_never_dropped(repo: Path, tmp_path: Path) -> None:
    body = tmp_path / "body.txt"
    body.write_bytes(b"before\0after\n")
    out = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "el:x",
                  "--title", "t", "--body-file", str(body))
    _clean(out, 4)
    assert not any((repo / FACTS).glob("fact-el-x-*.md"))
    r = make_record()
    path = write_record(repo, r)
    path.write_bytes(path.read_bytes() + b"tail\0end\n")
    out = run_cli(repo, "knowledge", "check")
    assert out.returncode == 1 and "NUL" in out.stdout


def test_supersede_by_across_products_is_refused(repo: Path) -> None:
    r = make_record()
    other = make_record(product="other-app")
    write_record(repo, r)
    write_record(repo, other)
    _clean(run_cli(repo, "knowledge", "supersede", r.id, "--by", other.id), 2)
    with pytest.raises(UsageError):
        supersede_by(r, other)


def test_masked_and_checked_folders_leave_normal_writes_alone(repo: Path) -> None:
    with Memidex(repo) as m:
        res = m.add(kind="fact", product="shop-web", anchors=["el:ok"], title="fine")
    assert res.change == "added" and os.path.isfile(repo / res.path)
