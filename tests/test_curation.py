"""The human curation commands: real subprocesses in real git repositories, byte for byte."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest import make_record, run_cli, write_record
from memidex.errors import UsageError
from memidex.records.model import Record, Trust, Valid
from memidex.records.transitions import (
    confirm,
    deprecate,
    previous_status,
    quarantine,
    release,
    supersede_by,
    supersede_in_place,
)

RID = "fact-el-button-place-order-97c05f92322716e0"
FACTS = "agent-qa-knowledge/memory/records/fact"

HEAD = f"""\
---
id: {RID}
kind: fact
status: {{status}}
product: shop-web
scope: {{{{page: /checkout}}}}
anchor: el:button:place-order
anchors: [page:/checkout]
title: {{title}}
trust: {{trust}}
valid: {{valid}}
relations: {{relations}}
"""

NO_RELATIONS = "{supersedes: [], superseded_by: null, cites: [], contradicts: []}"


def _base() -> Record:
    return make_record(scope={"page": "/checkout"}, anchors=("page:/checkout",),
                       title="Place order stays disabled until terms are ticked",
                       body="Place order is disabled until the terms box is ticked.",
                       status="candidate",
                       trust=Trust(source="local", confirmations=2, last_confirmed=40),
                       valid=Valid(36))


def _text(repo: Path, rid: str = RID) -> str:
    return (repo / FACTS / f"{rid}.md").read_text(encoding="utf-8")


def _json(out: object) -> dict[str, object]:
    assert getattr(out, "returncode", None) == 0, getattr(out, "stderr", "")
    data = json.loads(out.stdout)  # type: ignore[attr-defined]
    assert isinstance(data, dict)
    return data


# --- the pure operations ------------------------------------------------------------------


def test_pure_operations_follow_the_documented_rules() -> None:
    r = _base()
    c = confirm(r)
    assert (c.status, c.trust.confirmations, c.trust.last_confirmed) == ("active", 3, 40)
    assert confirm(r, 44).trust.last_confirmed == 44
    with pytest.raises(UsageError):
        confirm(r, 30)  # before the version's window
    with pytest.raises(UsageError):
        confirm(quarantine(r))
    s = supersede_in_place(r, title="New", ordinal=50)
    assert s.valid == Valid(50, None) and s.history[-1].valid == Valid(36, 50)
    assert supersede_in_place(r, title="New").valid.from_ == 41  # one past last_confirmed
    with pytest.raises(UsageError):
        supersede_in_place(r, title="New", ordinal=36)
    d = deprecate(r, 45)
    assert (d.status, d.valid) == ("deprecated", Valid(36, 45))
    assert previous_status(d) == "deprecated"
    assert release(quarantine(d)).status == "deprecated"
    assert release(quarantine(r)).status == "candidate"  # exactly the status before
    with pytest.raises(UsageError):
        release(r)
    other = make_record(anchor="el:button:buy-now", title="Buy now")
    old, new = supersede_by(r, other, 47)
    assert (old.status, old.valid, old.relations.superseded_by) == ("superseded",
                                                                     Valid(36, 47), other.id)
    assert new.relations.supersedes == (r.id,)
    assert release(quarantine(old)).status == "superseded"
    with pytest.raises(UsageError):
        supersede_by(r, r)


# --- the commands, byte for byte -------------------------------------------------------------


def test_confirm_by_prefix_writes_the_canonical_bytes(repo: Path) -> None:
    write_record(repo, _base())
    data = _json(run_cli(repo, "knowledge", "confirm", "fact-el-button-place", "--run-ordinal",
                         "42", "--json"))
    assert data == {"id": RID, "path": f"{FACTS}/{RID}.md", "status": "active",
                    "change": "confirmed"}
    assert _text(repo) == HEAD.format(
        status="active", title="Place order stays disabled until terms are ticked",
        trust="{source: local, confirmations: 3, contradictions: 0, last_confirmed: 42}",
        valid="{from: 36, until: null}", relations=NO_RELATIONS,
    ) + "---\nPlace order is disabled until the terms box is ticked.\n"


def test_supersede_in_place_keeps_the_old_version_in_history(repo: Path) -> None:
    write_record(repo, _base())
    data = _json(run_cli(repo, "knowledge", "supersede", RID[:20], "--title",
                         "Place order is enabled at once", "--body",
                         "Since build 1.5 the button is enabled at once.", "--ordinal", "45",
                         "--json"))
    assert data["change"] == "superseded" and data["status"] == "active"
    assert _text(repo) == HEAD.format(
        status="active", title="Place order is enabled at once",
        trust="{source: human, confirmations: 1, contradictions: 0, last_confirmed: 45}",
        valid="{from: 45, until: null}", relations=NO_RELATIONS,
    ) + (
        "history:\n"
        "  - {valid: {from: 36, until: 45}, title: Place order stays disabled until terms "
        "are ticked, body: Place order is disabled until the terms box is ticked., trust: "
        "{source: local, confirmations: 2, contradictions: 0, last_confirmed: 40}, anchors: "
        "[page:/checkout], status: candidate}\n"
        "---\nSince build 1.5 the button is enabled at once.\n"
    )
    shown = _json(run_cli(repo, "knowledge", "show", RID, "--json"))
    assert shown["history"] == [{"valid": {"from": 36, "until": 45},
                                 "title": "Place order stays disabled until terms are ticked",
                                 "body": "Place order is disabled until the terms box is "
                                         "ticked.",
                                 "trust": {"source": "local", "confirmations": 2,
                                           "contradictions": 0, "last_confirmed": 40},
                                 "anchors": ["el:button:place-order", "page:/checkout"],
                                 "status": "candidate"}]


def test_supersede_by_another_record_changes_both_files(repo: Path) -> None:
    write_record(repo, _base())
    other = make_record(anchor="el:button:buy-now", title="Buy now replaces place order",
                        body="The checkout has a Buy now button.", valid=Valid(44))
    write_record(repo, other)
    data = _json(run_cli(repo, "knowledge", "supersede", RID, "--by", other.id[:22], "--json"))
    assert data == {"id": RID, "path": f"{FACTS}/{RID}.md", "status": "superseded",
                    "change": "superseded", "superseded_by": other.id,
                    "superseded_by_path": f"{FACTS}/{other.id}.md"}
    assert _text(repo) == HEAD.format(
        status="superseded", title="Place order stays disabled until terms are ticked",
        trust="{source: local, confirmations: 2, contradictions: 0, last_confirmed: 40}",
        valid="{from: 36, until: 44}",
        relations=f"{{supersedes: [], superseded_by: {other.id}, cites: [], contradicts: []}}",
    ) + "---\nPlace order is disabled until the terms box is ticked.\n"
    assert _text(repo, other.id) == (
        "---\n"
        f"id: {other.id}\n"
        "kind: fact\nstatus: active\nproduct: shop-web\nanchor: el:button:buy-now\n"
        "anchors: []\ntitle: Buy now replaces place order\n"
        "trust: {source: local, confirmations: 0, contradictions: 0, last_confirmed: null}\n"
        "valid: {from: 44, until: null}\n"
        f"relations: {{supersedes: [{RID}], superseded_by: null, cites: [], contradicts: []}}\n"
        "---\nThe checkout has a Buy now button.\n"
    )
    assert run_cli(repo, "knowledge", "check").returncode == 0


def test_deprecate_quarantine_release_round_trip(repo: Path) -> None:
    write_record(repo, _base())
    before = _text(repo)
    q = _json(run_cli(repo, "knowledge", "quarantine", RID, "--json"))
    assert q["status"] == "quarantined" and "status: quarantined\n" in _text(repo)
    listed = _json(run_cli(repo, "knowledge", "search", "place order", "--json"))
    assert listed["results"] == []  # never served
    refused = run_cli(repo, "knowledge", "confirm", RID)
    assert refused.returncode == 2 and refused.stderr.startswith("error: ")
    r = _json(run_cli(repo, "knowledge", "release", RID, "--json"))
    assert r["status"] == "candidate" and r["change"] == "released"
    assert _text(repo) == before  # the status before the quarantine, byte for byte
    d = _json(run_cli(repo, "knowledge", "deprecate", RID, "--ordinal", "50", "--json"))
    assert d["status"] == "deprecated"
    assert "status: deprecated\n" in _text(repo)
    assert "valid: {from: 36, until: 50}\n" in _text(repo)
    again = _json(run_cli(repo, "knowledge", "deprecate", RID, "--ordinal", "50", "--json"))
    assert again["change"] == "unchanged"


def test_unknown_and_ambiguous_prefixes_are_usage_errors(repo: Path) -> None:
    write_record(repo, _base())
    write_record(repo, make_record(anchor="el:button:pay", title="Pay"))
    missing = run_cli(repo, "knowledge", "confirm", "fact-nothing-like-this")
    assert missing.returncode == 2 and "no record" in missing.stderr
    ambiguous = run_cli(repo, "knowledge", "quarantine", "fact-el-button-p")
    assert ambiguous.returncode == 2 and "matches 2 records" in ambiguous.stderr
    both = run_cli(repo, "knowledge", "supersede", RID, "--title", "x", "--by", "fact-el")
    assert both.returncode == 2 and "Traceback" not in both.stderr


def test_purge_removes_the_file_its_index_rows_and_its_queue_traces(repo: Path) -> None:
    keep = make_record(anchor="el:button:pay", title="Pay")
    write_record(repo, _base())
    write_record(repo, keep)
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    queue = repo / "agent-qa-knowledge/memory/queue"
    planted = {
        queue / "corrections" / "0001-1-aaaa.item.json": {"changes": [{"path": f"x/{RID}.md"}]},
        queue / "corrections" / "0002-1-bbbb.done.json": {"message": f"confirmed {RID}"},
        queue / "journal" / "abandoned" / "0003.json": {"ops": [{"path": f"{RID}.md"}]},
        queue / "steps" / "abcd.answer.json": {"step": f"curate {RID}"},
        queue / "steps" / "other.answer.json": {"step": f"curate {keep.id}"},
    }
    for path, data in planted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    data = _json(run_cli(repo, "knowledge", "purge", RID[:24], "--json"))
    assert data["id"] == RID and data["status"] == "purged" and data["change"] == "purged"
    assert len(data["removed"]) == 4
    assert not (repo / FACTS / f"{RID}.md").exists()
    assert (repo / FACTS / f"{keep.id}.md").exists()
    with sqlite3.connect(repo / "agent-qa-knowledge/memory/index/memidex.sqlite") as conn:
        ids = [row[0] for row in conn.execute("SELECT id FROM records")]
    assert ids == [keep.id]
    leftovers = [p for p in queue.rglob("*") if p.is_file() and RID in p.read_text()]
    assert leftovers == []
    assert (queue / "steps" / "other.answer.json").exists()
    gone = run_cli(repo, "knowledge", "purge", RID)
    assert gone.returncode == 2 and "no record" in gone.stderr


def test_a_persons_edit_between_reading_and_writing_is_never_clobbered(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The curation commands pass the hash they read: the writer refuses a changed file."""
    from memidex.app import Memidex
    from memidex.app.curation import Curation
    from memidex.errors import ConflictError

    path = write_record(repo, _base())
    real_load = Curation.load_for_write

    def load_then_edit(c: Curation, prefix: str) -> tuple[Record, str, str]:
        loaded = real_load(c, prefix)
        path.write_text(path.read_text().replace("terms are ticked", "terms are ticked!"))
        return loaded

    monkeypatch.setattr(Curation, "load_for_write", load_then_edit)
    with Memidex(repo) as m, pytest.raises(ConflictError):
        m.confirm(RID)
    assert "ticked!" in path.read_text() and "confirmations: 2" in path.read_text()
