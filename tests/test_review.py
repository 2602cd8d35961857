"""``memidex knowledge review``: every change of a branch with the right verb, what needs
a human look, the three formats, and git's message for an unknown revision."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from conftest import git, make_record, run_cli, write_record
from memidex.records.codec import dump_record
from memidex.records.model import Evidence, Trust, Valid
from memidex.records.transitions import confirm, deprecate, quarantine, supersede_in_place


def _branch(repo: Path) -> dict[str, str]:
    """A main branch with five records, then a branch that changes each differently."""
    recs = {
        name: make_record(anchor=f"el:button:{name}", title=f"{name} title",
                          status="candidate" if name == "promote" else "active",
                          trust=Trust("human" if name == "human" else "local", 2, 0, 10),
                          valid=Valid(5, None))
        for name in ("promote", "confirm", "supersede", "deprecate", "quarantine", "purge",
                     "human")
    }
    paths = {n: write_record(repo, r) for n, r in recs.items()}
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "branch", "-M", "main")
    git(repo, "checkout", "-qb", "learn")
    write_record(repo, confirm(recs["promote"], 11))
    write_record(repo, confirm(recs["confirm"], 12))
    write_record(repo, supersede_in_place(recs["supersede"], title="new claim",
                                          body="It changed.", ordinal=13))
    write_record(repo, deprecate(recs["deprecate"], 14))
    write_record(repo, quarantine(recs["quarantine"]))
    paths["purge"].unlink()
    write_record(repo, replace(recs["human"], trust=Trust("ci", 3, 0, 12),
                               evidence=(Evidence(run="r-1", observed="x"),)))
    write_record(repo, make_record(anchor="el:button:added", title="brand new"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "learn")
    return {n: r.id for n, r in recs.items()}


def test_review_lists_every_change_with_its_verb(any_repo: Path) -> None:
    repo = any_repo
    ids = _branch(repo)
    out = run_cli(repo, "knowledge", "review", "main", "learn", "--format", "json", check=True)
    data = json.loads(out.stdout)
    verbs = {c["id"]: verb for verb, cs in data["products"]["shop-web"].items() for c in cs}
    assert verbs[ids["promote"]] == "promoted"
    assert verbs[ids["confirm"]] == "confirmed"
    assert verbs[ids["supersede"]] == "superseded"
    assert verbs[ids["deprecate"]] == "deprecated"
    assert verbs[ids["quarantine"]] == "quarantined"
    assert verbs[ids["purge"]] == "purged"
    assert "added" in data["products"]["shop-web"]
    reasons = {a["id"]: " ".join(a["reasons"]) for a in data["attention"]}
    assert "automation" in reasons[ids["human"]]
    assert "active record deprecated" in reasons[ids["deprecate"]]
    assert "purged" in reasons[ids["purge"]]


def test_review_markdown_and_github_formats(repo: Path, tmp_path: Path) -> None:
    ids = _branch(repo)
    md = run_cli(repo, "knowledge", "review", "main", "learn", check=True).stdout
    assert "### shop-web" in md and "| confirmed |" in md and "2✓ 0✗ @10 → 3✓ 0✗ @12" in md
    assert "new claim" in md and "Needs a human look" in md
    summary = tmp_path / "summary.md"
    import os
    import subprocess
    import sys

    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(repo), "knowledge",
                          "review", "main", "learn", "--format", "github"], cwd=repo,
                         capture_output=True, text=True, env=env, check=True)
    assert "::warning file=" in out.stdout and ids["human"] in out.stdout
    assert "### shop-web" in summary.read_text(encoding="utf-8")


def test_review_of_the_working_tree_and_default_base(any_repo: Path) -> None:
    repo = any_repo
    r = make_record()
    write_record(repo, r)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "branch", "-M", "main")
    write_record(repo, confirm(r, 3))
    write_record(repo, make_record(anchor="el:link:new", title="untracked new"))
    data = json.loads(run_cli(repo, "knowledge", "review", "--json", check=True).stdout)
    verbs = {c["title"]: verb for verb, cs in data["products"]["shop-web"].items() for c in cs}
    assert verbs == {"Place order is disabled": "confirmed", "untracked new": "added"}


def test_review_flags_bad_records_and_secrets(repo: Path) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "empty")
    path = write_record(repo, replace(make_record(), evidence=(
        Evidence(run="r-1", observed="key AKIAIOSFODNN7EXAMPLE"),)))
    bad = path.parent / "fact-broken-0000000000000000.md"
    bad.write_text("---\nid: [\n---\n", encoding="utf-8")
    data = json.loads(run_cli(repo, "knowledge", "review", "HEAD", "--json",
                              check=True).stdout)
    reasons = " ".join(r for a in data["attention"] for r in a["reasons"])
    assert "possible AWS Access Key" in reasons and "AKIAIOSFODNN7EXAMPLE" not in reasons
    assert "fails validation" in reasons


def test_review_unknown_revision_exits_2(repo: Path) -> None:
    git(repo, "commit", "-q", "--allow-empty", "-m", "x")
    out = run_cli(repo, "knowledge", "review", "no-such-branch")
    assert out.returncode == 2 and out.stderr.startswith("error:")


def test_review_of_a_folder_whose_name_git_could_read_as_pathspec_magic(
        tmp_path: Path) -> None:
    """``knowledge_dir = ":(glob)kb"``: git is given every path literally
    (``--literal-pathspecs``); read as magic it named the folder ``kb``, and the review
    saw no change at all."""
    from memidex.store.layout import init_repository

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "memidex.toml").write_text('product = "shop-web"\nknowledge_dir = ":(glob)kb"\n',
                                       encoding="utf-8")
    init_repository(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "branch", "-M", "main")
    rec = make_record(anchor="el:link:new", title="untracked new")
    folder = repo / ":(glob)kb" / "records" / "fact"
    (folder / f"{rec.id}.md").write_text(dump_record(rec), encoding="utf-8")
    data = json.loads(run_cli(repo, "knowledge", "review", "--json", check=True).stdout)
    assert {c["title"]: verb for verb, cs in data["products"]["shop-web"].items()
            for c in cs} == {"untracked new": "added"}
