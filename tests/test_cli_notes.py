"""Working memory (issue 25, item 3): `memidex notes add|list --run R` and the MCP tools
note_add / notes — short notes to self, kept under .agent-qa/, masked, gone when the run
is ingested (or older than `notes_max_age_hours`), never in a record or the index."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from conftest import REPO_ROOT, run_cli

RUN = REPO_ROOT / "examples/runs/r-0051.json"
SECRET = "hunter2-s3cr3t-value"


def _notes(root: Path, run: str) -> list[dict[str, str]]:
    out = run_cli(root, "notes", "list", "--run", run, "--json", check=True)
    notes: list[dict[str, str]] = json.loads(out.stdout)["notes"]
    return notes


def test_notes_are_kept_masked_and_gone_once_the_run_is_ingested(repo: Path) -> None:
    (repo / ".agent-qa").mkdir(exist_ok=True)
    (repo / ".agent-qa/secrets.yaml").write_text(f"db_password: {SECRET}\n", encoding="utf-8")
    home = os.environ["HOME"]
    first = run_cli(repo, "notes", "add", "--run", "r-0051", f"login takes {SECRET}",
                    check=True)
    assert first.stdout.startswith("noted for r-0051 (1 note(s)): login takes "
                                   "[secret:db_password]")
    run_cli(repo, "notes", "add", "--run", "r-0051", f"screenshots in {home}/shots",
            check=True)
    run_cli(repo, "notes", "add", "--run", "r-0051", "-", input="from stdin\n", check=True)
    notes = _notes(repo, "r-0051")
    assert [n["text"] for n in notes] == ["login takes [secret:db_password]",
                                         "screenshots in ~/shots", "from stdin"]
    assert all(n["at"].endswith("Z") for n in notes)
    path = repo / ".agent-qa/notes/r-0051.jsonl"
    assert path.is_file() and SECRET not in path.read_text(encoding="utf-8")
    assert _notes(repo, "r-0052") == []  # another run has its own
    listed = run_cli(repo, "notes", "list", "--run", "r-0051", check=True).stdout
    assert listed.splitlines()[0] == "at\ttext" and len(listed.splitlines()) == 4

    run_cli(repo, "runs", "ingest", str(RUN), check=True)
    assert not path.exists() and _notes(repo, "r-0051") == []  # gone with the run
    # never a record, never the index
    for f in (repo / "agent-qa-knowledge").rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert b"screenshots in" not in data and b"from stdin" not in data, f
    late = run_cli(repo, "notes", "add", "--run", "r-0051", "too late")
    assert late.returncode == 2 and "already ingested" in late.stderr
    again = run_cli(repo, "runs", "ingest", str(RUN), check=True)  # a no-op still forgets
    assert again.returncode == 0


def test_old_notes_are_pruned_when_a_note_is_added(repo: Path) -> None:
    (repo / "memidex.toml").write_text('product = "shop-web"\nnotes_max_age_hours = 2\n',
                                       encoding="utf-8")
    run_cli(repo, "notes", "add", "--run", "r-old", "from yesterday", check=True)
    run_cli(repo, "notes", "add", "--run", "r-recent", "from just now", check=True)
    old = repo / ".agent-qa/notes/r-old.jsonl"
    hours_ago = time.time() - 3 * 3600
    os.utime(old, (hours_ago, hours_ago))
    run_cli(repo, "notes", "add", "--run", "r-new", "today", check=True)
    assert not old.exists()
    assert [n["text"] for n in _notes(repo, "r-recent")] == ["from just now"]


def test_bad_notes_are_refused_with_one_line(repo: Path) -> None:
    for args, code, says in [
        (["notes", "add", "--run", "../x", "t"], 2, "run id '../x' must be"),
        (["notes", "add", "--run", "r-1", "   "], 2, "a note needs some text"),
        (["notes", "add", "--run", "r-1", "x" * 2001], 4, "at most 2000 characters"),
        (["notes", "list"], 2, "Missing option '--run'"),
    ]:
        out = run_cli(repo, *args)
        assert out.returncode == code, (args, out.stderr)
        assert out.stderr.startswith("error: ") and says in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    (repo / "memidex.toml").write_text('product = "shop-web"\nnotes_max_age_hours = 0\n',
                                       encoding="utf-8")
    bad = run_cli(repo, "notes", "list", "--run", "r-1")
    assert bad.returncode == 4 and "`notes_max_age_hours` must be a positive number" in \
        bad.stderr
